"""The CLI fork server (tests/cli/forkserver.py) answers as a `stello` started as itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.processes import client_env, private_env, run_cli

pytestmark = pytest.mark.subprocess

RUNS = [
    pytest.param(["--version"], id="version"),
    pytest.param(["no-such-command"], id="usage-error"),
    pytest.param(["tree"], id="unreachable-gateway"),
    pytest.param(["show", "not a session id", "--json"], id="bad-argument"),
]


def started_as_itself(env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stello_cli", *args],
        env=client_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("args", RUNS)
def test_a_forked_run_answers_as_a_started_one(home: Path, args: list[str]) -> None:
    """Exit status, stdout and stderr of a forked run are those of `python -m stello_cli`."""
    env = private_env(home)
    env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="sk-unused")
    forked = run_cli(env, *args)
    started = started_as_itself(env, args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        started.returncode,
        started.stdout,
        started.stderr,
    )


def test_a_run_reads_its_stdin_and_environment(home: Path) -> None:
    """A forked run reads the stdin and the environment it was given, not the server's: an
    unknown STELLO_GATEWAY port in the environment is the one its error names."""
    env = private_env(home)
    env.update(STELLO_GATEWAY="127.0.0.1:9", STELLO_KEY="sk-unused")
    forked = run_cli(env, "root", "--json", stdin="ignored\n")
    started = started_as_itself(env, ["root", "--json"])
    assert forked.returncode == started.returncode != 0
    assert "127.0.0.1:9" in forked.stderr
    assert forked.stderr == started.stderr
