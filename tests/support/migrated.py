"""A database of each test's own at an older release's schema, for the tests of an upgrade.

A module whose tests write rows as the release of an older migration did, then migrate on
(`stello.db.migrate.migrate`) and check what the later migrations and jobs made of them,
sets its `direct_database_url` fixture with `database_through`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.database import create_test_database, drop_test_database


def database_through(before: str) -> Any:
    """The `direct_database_url` fixture of a module whose tests write rows as the release
    of migration `before` did, then migrate on: a database of each test's own, migrated
    through `before`."""

    @pytest.fixture(name="direct_database_url")
    async def direct_database_url(admin_dsn: str) -> AsyncIterator[str]:
        dsn = await create_test_database(admin_dsn, before)
        yield dsn
        await drop_test_database(admin_dsn, dsn)

    return direct_database_url
