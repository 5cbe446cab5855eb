"""`stello chat`'s history of typed lines (explore14 F6): the config dir's chat_history is
readable by its owner only (created so, tightened when it exists), and `--no-history`
keeps the lines in memory only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from prompt_toolkit.history import FileHistory, InMemoryHistory

from stello_cli.parser import build_parser
from stello_cli.turns.chat import chat_history, history_path


@pytest.fixture(name="config_dir")
def _config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    return tmp_path


def mode(path: Path) -> int:
    """The permission bits of `path`."""
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_history_is_its_owners_only(config_dir: Path) -> None:
    history = chat_history(keep=True)
    assert isinstance(history, FileHistory)
    assert history_path() == config_dir / "chat_history"
    assert mode(history_path()) == 0o600
    history.store_string("a secret line")
    assert mode(history_path()) == 0o600
    assert "a secret line" in history_path().read_text()


def test_an_existing_history_is_tightened_and_kept(config_dir: Path) -> None:
    path = config_dir / "chat_history"
    path.write_text("\n# 2026-01-01 00:00:00\n+earlier\n")
    path.chmod(0o644)
    history = chat_history(keep=True)
    assert mode(path) == 0o600
    assert list(history.load_history_strings()) == ["earlier"]


def test_no_history_writes_no_file(config_dir: Path) -> None:
    history = chat_history(keep=False)
    assert isinstance(history, InMemoryHistory)
    history.store_string("said once")
    assert not (config_dir / "chat_history").exists()


def test_the_flag(config_dir: Path) -> None:
    parser = build_parser()
    assert parser.parse_args(["chat", "abc", "--no-history"]).no_history
    assert not parser.parse_args(["chat", "abc"]).no_history
