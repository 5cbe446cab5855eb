"""The Citus cluster of the `citus` tests: the Citus pass's when it runs, else one per module.

Where Citus cannot be made available (scripts/citus), a test that needs the
cluster skips with the script's one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.citus import CitusCluster, citus_cluster, citus_skip_reason
from tests.support.citus_pass import pass_cluster


@pytest.fixture(name="cluster", scope="module")
def _cluster() -> Iterator[CitusCluster]:
    """The Citus pass's cluster (tests.support.citus_pass), else one of the module's own."""
    running = pass_cluster()
    if running is not None:
        yield running
        return
    reason = citus_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with citus_cluster() as started:
        yield started
