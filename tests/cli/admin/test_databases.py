"""`stello_cli.admin.databases`: what `stello up` saves of its database, never a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from stello.settings import StelloSettings
from stello_cli.admin.databases import with_database, without_password
from stello_client.connection.credentials import Credentials

BLANK = Credentials("s", "k")


class TestWithDatabase:
    @pytest.mark.parametrize(
        ("url", "kept", "had"),
        [
            pytest.param("postgresql://me@db/x", "postgresql://me@db/x", False, id="none"),
            pytest.param("postgresql://me:pw@db:5/x", "postgresql://me@db:5/x", True, id="user"),
            pytest.param(
                "postgresql://me@db/x?password=pw&sslmode=require",
                "postgresql://me@db/x?sslmode=require",
                True,
                id="query",
            ),
            pytest.param("postgresql://:pw@db/x", "postgresql://db/x", True, id="no-user"),
        ],
    )
    def test_a_url_is_saved_without_its_password(self, url: str, kept: str, had: bool) -> None:
        """A URL's password, in its user part or its query, is left out and remembered as
        given."""
        assert without_password(url) == (kept, had)
        saved = with_database(BLANK, StelloSettings(database_url=url))
        assert (saved.database_url, saved.database_password, saved.data_dir) == (kept, had, "")
        assert "pw" not in repr(saved)

    def test_the_embedded_folder_is_saved_resolved(self, tmp_path: Path) -> None:
        """Without a URL the embedded cluster's folder is saved, as an absolute path."""
        saved = with_database(BLANK, StelloSettings(data_dir=str(tmp_path / "a" / ".." / "d")))
        assert (saved.data_dir, saved.database_url) == (str(tmp_path / "d"), "")
