"""`stello up --data-dir PATH`: the folder of the embedded PostgreSQL, checked before anything
starts, and named as the flag's when a second `stello up` would share it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stello.settings import StelloSettings
from stello_cli.admin.databases import data_dir_source, settings_of
from stello_cli.parser import build_parser
from stello_cli.up.process import sharing_line
from stello_client.errors import ClientError, UsageError


def up_settings(*flags: str) -> StelloSettings:
    """The settings `stello up FLAGS` runs with."""
    return settings_of(build_parser().parse_args(["up", *flags]))


@pytest.fixture(autouse=True)
def _no_database_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STELLO_DATA_DIR", raising=False)
    monkeypatch.delenv("STELLO_DATABASE_URL", raising=False)


def test_a_relative_data_dir_is_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--data-dir wins over STELLO_DATA_DIR; a relative PATH is taken from the current
    directory (a folder not made yet is fine: `stello up` makes it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STELLO_DATA_DIR", str(tmp_path / "from-the-variable"))
    assert up_settings("--data-dir", "data/pg").data_dir == str(tmp_path / "data" / "pg")
    assert up_settings().data_dir == str(tmp_path / "from-the-variable")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        pytest.param("a-file", "{tmp}/a-file is a file, not a folder", id="file"),
        pytest.param("a-file/pg", "{tmp}/a-file is a file, not a folder", id="under-a-file"),
        pytest.param("", "empty: give a folder", id="empty"),
    ],
)
def test_a_data_dir_that_cannot_be_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, said: str
) -> None:
    """A --data-dir that is a file (or lies under one), or empty, is the flag's usage error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder\n")
    with pytest.raises(UsageError) as caught:
        up_settings("--data-dir", given)
    assert str(caught.value).startswith(f"--data-dir: {said.format(tmp=tmp_path)}")


def test_a_data_dir_this_user_cannot_write_in_is_refused() -> None:
    """A --data-dir in a folder no one may write in (a process's /proc folder, even for
    root) is the flag's usage error naming that folder."""
    own = Path(f"/proc/{os.getpid()}")
    with pytest.raises(UsageError) as caught:
        up_settings("--data-dir", str(own / "pgdata"))
    assert str(caught.value) == (
        f"--data-dir: cannot make {own}/pgdata: {own} is not writable by this user"
    )


def test_a_data_dir_with_a_database_url_is_refused(tmp_path: Path) -> None:
    """--data-dir with --database-url: the embedded PostgreSQL it would be the folder of
    does not run (it was ignored without a word)."""
    with pytest.raises(UsageError) as caught:
        up_settings("--data-dir", str(tmp_path), "--database-url", "postgresql://db/x")
    assert str(caught.value) == (
        "--data-dir: not with --database-url: the embedded PostgreSQL's folder, and with a "
        "database URL none runs"
    )


def test_the_source_of_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flag, else the variable, else the default, as the messages name them."""
    parse = build_parser().parse_args
    assert data_dir_source(parse(["up", "--data-dir", str(tmp_path)])) == "--data-dir"
    assert data_dir_source(parse(["up"])) == ""
    monkeypatch.setenv("STELLO_DATA_DIR", str(tmp_path))
    assert data_dir_source(parse(["up"])) == "STELLO_DATA_DIR"


@pytest.mark.parametrize(
    ("source", "chosen", "another"),
    [
        pytest.param("--data-dir", "given with --data-dir", "another --data-dir", id="flag"),
        pytest.param(
            "STELLO_DATA_DIR",
            "from STELLO_DATA_DIR",
            "another data dir (--data-dir, or STELLO_DATA_DIR)",
            id="variable",
        ),
        pytest.param(
            "", "the default", "another data dir (--data-dir, or STELLO_DATA_DIR)", id="default"
        ),
    ],
)
def test_sharing_says_where_the_data_dir_came_from(source: str, chosen: str, another: str) -> None:
    """A second `stello up` on a data dir says whether the flag, the variable or the default
    chose it, and names the flag when the flag did (it said STELLO_DATA_DIR always)."""
    said = json.dumps({"pid": 7, "gateway": "127.0.0.1:5", "config_dir": "/c"}).encode()
    assert sharing_line(Path("/d/pg"), said, source) == (
        "another `stello up` (pid 7, gateway 127.0.0.1:5, config dir /c) runs the embedded "
        f"PostgreSQL of the data dir /d/pg ({chosen}): stop it first, or start this one with "
        f"{another}"
    )


def test_a_variable_data_dir_that_cannot_be_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STELLO_DATA_DIR naming a file is refused as the flag's folder is, naming the variable
    (exit 1: no command line is wrong); it was a traceback of initdb's failure. With a
    database URL the folder is not used, so not checked."""
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.setenv("STELLO_DATA_DIR", str(tmp_path / "a-file"))
    with pytest.raises(ClientError) as caught:
        up_settings()
    assert not isinstance(caught.value, UsageError)
    assert str(caught.value) == f"STELLO_DATA_DIR: {tmp_path}/a-file is a file, not a folder"
    monkeypatch.setenv("STELLO_DATABASE_URL", "postgresql://db.example/stello")
    assert up_settings().database_url == "postgresql://db.example/stello"
