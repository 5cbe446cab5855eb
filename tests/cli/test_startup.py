"""What `stello --version` and `stello --help` load: no grpc, asyncpg or pydantic (issue 36).

Behaviour, not timing (bench/bench_cli.py measures the times): a fresh
interpreter runs the command's `main` and reports the packages it imported.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from stello.distribution.plan import DEFAULT_SHARD_COUNT
from stello_cli.parser import build_parser

pytestmark = pytest.mark.subprocess

HEAVY = ("grpc", "asyncpg", "pydantic")
PROBE = """
import contextlib, io, json, sys
from stello_cli import main

def loaded():
    return sorted({name.split(".")[0] for name in sys.modules} & {"grpc", "asyncpg", "pydantic"})

found = {}
for argv in (["--version"], ["--help"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
    found[argv[0]] = loaded()
print(json.dumps(found))
"""


def test_version_and_help_load_no_heavy_package() -> None:
    """`stello --version`, then `stello --help`, in one interpreter: neither loads grpc,
    asyncpg or pydantic (a command loads them when it runs)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == {"--version": [], "--help": []}


def test_the_shard_count_help_names_the_plans_default() -> None:
    """`migrate --shard-count` states the distribution plan's default without loading it."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    help_text = sub.choices["migrate"].format_help()
    assert f"distribution plan's, {DEFAULT_SHARD_COUNT};" in " ".join(help_text.split())


def test_ctrl_c_while_the_commands_load_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the command groups are imported (`build_parser`, the first tenth of a
    second) exits 130 with no traceback; it ended the process by the signal (-2)."""
    module = importlib.import_module("stello_cli.main")  # the package's `main` is the function

    def interrupted() -> argparse.ArgumentParser:
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "build_parser", interrupted)
    with pytest.raises(SystemExit) as ended:
        module.main(["tree"])
    assert ended.value.code == 130
