"""README.md: its first commands, its client session (run for real), its configuration table."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.cli.processes import StelloUp, client_env, private_env

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
SESSION_MARKER = "<!-- quick start client session: run by tests/cli/test_readme.py -->"


def code_blocks(text: str) -> list[str]:
    """The ```bash blocks of `text`, in order."""
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def settings_table() -> ModuleType:
    """scripts/settings_table.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "settings_table", REPO / "scripts/settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stello_bin(tmp_path: Path) -> Path:
    """The folder of the installed `stello` command (a shim running this checkout when absent)."""
    installed = Path(sys.executable).parent
    if (installed / "stello").exists():
        return installed
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "stello").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m stello_cli "$@"\n')
    (shim / "stello").chmod(0o755)
    return shim


def test_first_commands_install_and_start_then_test() -> None:
    """The first command, one line, installs and runs `stello up`; the second runs the tests."""
    first, second = code_blocks(README)[:2]
    assert first.count("\n") == 1 and "pip install -e '.[local]'" in first
    assert first.strip().endswith("stello up")
    assert second.strip() == "bash scripts/test"
    assert (REPO / ".ci/run").read_text().rstrip().endswith("bash scripts/test")


def test_configuration_table_names_every_variable() -> None:
    """Every Settings field's variable (and the client ones) appears in README.md."""
    table = settings_table()
    assert table.missing(README) == []
    names = [name for name, _, _ in table.variables()]
    assert {
        "STELLO_DATABASE_URL",
        "STELLO_GATEWAY_PORT",
        "STELLO_LOG_FORMAT",
        "STELLO_OTEL",
    } <= set(names)


@pytest.mark.subprocess
def test_client_session_runs_word_for_word(home: Path, tmp_path: Path) -> None:
    """The README's client session runs as written against `stello up`, and every step works."""
    session = README.partition(SESSION_MARKER)[2]
    script = code_blocks(session)[0]
    env = private_env(home)
    env["PATH"] = f"{stello_bin(tmp_path)}{os.pathsep}{env.get('PATH', '')}"
    up = StelloUp.start(env)
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=client_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        up.kill()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "What is a fork?" in out  # the streamed echo reply
    assert re.search(r"^Research +\[active, 0 turns\]  [0-9a-f]{8}$", out, flags=re.MULTILINE)
    child = (
        r"^└─ Side question  \[active, 1 turn\] +[0-9a-f]{8}  assistant: echo: What is a fork\?$"
    )
    assert re.search(child, out, flags=re.MULTILINE)
    assert re.search(r"^forked from: [0-9a-f-]{36}$", out, flags=re.MULTILINE)  # show
    assert re.search(r"^\[\d+\] user · [^:]+: What is a fork\?$", out, flags=re.MULTILINE)
    copied = (
        r"^imported 2 sessions as copies \(the exported sessions are still in this space\); "
        r"the new top: [0-9a-f-]{36}$"
    )
    assert re.search(copied, out, flags=re.MULTILINE)


SHARED_FLAGS = frozenset(
    (
        *("-h", "--help", "--gateway", "--key", "--space", "--json", "--timeout"),
        *("--ca-file", "--cert-file", "--key-file", "--server-name", "--database-url"),
    )
)
"""The connection and output flags every command takes: README says them once, in prose."""


def command_table() -> dict[str, str]:
    """README's command table: each row's first command (`fork`, `memory list`) and the row."""
    rows: dict[str, str] = {}
    for row in re.findall(r"^\| `stello ([^`]*)`.*$", README, flags=re.MULTILINE):
        words = [w for w in row.split() if re.fullmatch(r"[a-z]+", w)]
        line = next(r for r in README.splitlines() if r.startswith(f"| `stello {row}`"))
        rows[" ".join(words[:1])] = line
    return rows


def test_command_table_names_every_flag() -> None:
    """Every flag of a command in README's table (but the shared ones) is in its row, with
    the choices and the default `--help` gives for it."""
    from stello_cli.parser import build_parser

    commands = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    for name, row in command_table().items():
        for action in commands[name]._actions:
            flags = set(action.option_strings) - SHARED_FLAGS
            if flags:  # a flag may be given by its short form (`-o FILE`)
                assert any(f in row for f in flags), f"README's `stello {name}` lacks {flags}"
            if action.choices and action.option_strings:
                shown = "\\|".join(str(c) for c in action.choices)
                assert shown in row, f"`stello {name}` {action.option_strings}: {shown}"
    assert "`--timeout S`" in README
