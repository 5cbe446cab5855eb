"""gRPC's fork handlers stay off (`stello/__init__.py`): children forked to exec survive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Imports `module` in a fresh interpreter, then grpc (an entry that loads grpc only when a
# command needs it, as `stello_cli` does, must have the setting in place by then too), and
# prints GRPC_ENABLE_FORK_SUPPORT as it was when grpc itself was first imported (what
# grpc's core reads).
SEEN_AT_GRPC_IMPORT = """
import importlib, os, sys

class Watch:
    seen = "grpc never imported"

    def find_spec(self, name, path=None, target=None):
        if name == "grpc" and Watch.seen == "grpc never imported":
            Watch.seen = os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "unset")
        return None

sys.meta_path.insert(0, Watch())
importlib.import_module(sys.argv[1])
importlib.import_module("grpc")
print(Watch.seen)
"""


def clean_env() -> dict[str, str]:
    """This process's environment without the setting (as a user's shell has it)."""
    return {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}


@pytest.mark.parametrize(
    "module", ["stello_cli", "storage_service", "tree_service", "agent_gateway", "stello_console"]
)
def test_every_entry_turns_them_off_before_grpc_loads(module: str) -> None:
    """Each entry point (the `stello` command, the three `python -m` services, the console)
    has the setting in place when grpc is first imported; a value the user set wins."""
    run = [sys.executable, "-c", SEEN_AT_GRPC_IMPORT, module]
    done = subprocess.run(run, cwd=REPO, env=clean_env(), capture_output=True, text=True)
    assert done.stdout.strip() == "false", done.stderr[-2000:]
    mine = {**clean_env(), "GRPC_ENABLE_FORK_SUPPORT": "true"}
    done = subprocess.run(run, cwd=REPO, env=mine, capture_output=True, text=True)
    assert done.stdout.strip() == "true", done.stderr[-2000:]


@pytest.mark.subprocess
def test_children_forked_beside_live_calls_survive() -> None:
    """40 pexpect children spawned while gRPC calls run all exec and exit 0 (with grpc's
    default fork handlers about a third die before their exec, SIGSEGV or EBADF)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.fork_probe", "40"],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "0", done.stdout
