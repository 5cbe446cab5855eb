"""`stello up`'s locks (`stello_cli.up.process`): one `stello up` per config dir and data dir."""

from __future__ import annotations

import fcntl
import os
import types
from pathlib import Path

import pytest

from stello_cli.up import process
from stello_cli.up.process import LOCK_FILE, data_lock, one_up
from stello_client.errors import ClientError


def test_a_lock_file_removed_between_its_open_and_its_lock_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused `stello up` removes the lock file it made (`_unmake`) while another one may
    have opened that file and not yet locked it: the lock then taken is on a file no longer
    at the path, and a third `stello up` would make a new file there, lock it and run beside
    it. The one that lost the race opens the file at the path again and locks that one, so
    a later `stello up` on the same config dir and data dir is refused."""
    config_dir, data_dir = tmp_path / "config", tmp_path / "pgdata"
    paths = (config_dir / LOCK_FILE, data_lock(data_dir))
    removed: list[Path] = []

    def flock(fd: int, operation: int) -> None:
        """Between the open and the lock of each file, the other one's `_unmake` removes it."""
        for path in paths:
            if (
                path not in removed
                and path.exists()
                and os.path.samestat(os.fstat(fd), path.stat())
            ):
                removed.append(path)
                path.unlink()
        fcntl.flock(fd, operation)

    monkeypatch.setattr(
        process,
        "fcntl",
        types.SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB),
    )
    with one_up(config_dir, data_dir):
        assert removed == list(paths)  # both lock files were removed once, as the race does
        monkeypatch.undo()
        with pytest.raises(ClientError, match="another `stello up`"):
            with one_up(config_dir, tmp_path / "elsewhere"):
                pass
        with pytest.raises(ClientError, match="another `stello up`"):
            with one_up(tmp_path / "other-config", data_dir):
                pass
        assert all(path.exists() for path in paths)  # the files locked are the ones there


@pytest.mark.parametrize(
    ("where", "said"),
    [
        pytest.param("a-file", "{path} is a file, not a folder", id="file"),
        pytest.param("a-file/config", "cannot make {path}: Not a directory", id="under-a-file"),
    ],
)
def test_a_config_dir_that_cannot_be_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, said: str
) -> None:
    """STELLO_CONFIG_DIR naming a file, or a folder under one: one line naming the variable
    and the path (it was `[Errno 17] File exists: ...`), and nothing made."""
    (tmp_path / "a-file").write_text("not a folder\n")
    config_dir = tmp_path / where
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(config_dir))
    with pytest.raises(ClientError) as caught, one_up(config_dir, tmp_path / "pgdata"):
        pass
    assert str(caught.value) == f"STELLO_CONFIG_DIR: {said.format(path=config_dir)}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file"]
