"""Which statements of the services fail on Citus, named by the SQL constant that holds each.

A Citus pass keeps its nodes' logs when asked; this reads the coordinator's
ERRORs (each logged with its statement) and names each statement by the
module constant whose SQL it is (pglast fingerprints: constants ignored):

    STELLO_TEST_CITUS_LOGS=/tmp/citus-logs python -m pytest -p tests.support.citus_pass \\
        -m "sql and not slow and not browser" tests/storage tests/tree tests/gateway
    python -m tests.distribution.citus_probe /tmp/citus-logs/coordinator.log

A statement no constant holds is shown by its first words.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from collections import Counter
from pathlib import Path

from pglast.parser import ParseError, fingerprint

from tests.support.citus import logged_errors

PACKAGES = ("stello", "storage_service", "tree_service", "agent_gateway")
REPO = Path(__file__).resolve().parents[2]


def _sql_constants(module: object) -> list[tuple[str, str]]:
    """(name, text) of a module's SQL strings, a dict's values as NAME[key]."""
    found: list[tuple[str, str]] = []
    for name, value in vars(module).items():
        values = value.items() if isinstance(value, dict) else [(None, value)]
        for key, text in values:
            if isinstance(text, str) and any(
                word in text for word in ("SELECT", "INSERT", "UPDATE", "DELETE")
            ):
                found.append((name if key is None else f"{name}[{key}]", text))
    return found


def statement_names() -> dict[str, str]:
    """Fingerprint of each SQL constant of the services and the kernel -> 'file NAME'."""
    names: dict[str, str] = {}
    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if ".v1" in info.name or info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except Exception:  # a module that cannot load here holds no statement we ran
                continue
            path = Path(str(getattr(module, "__file__", ""))).resolve()
            where = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else info.name
            for name, text in _sql_constants(module):
                try:
                    names.setdefault(fingerprint(text), f"{where} {name}")
                except ParseError:
                    continue
    return names


@functools.cache
def _names() -> dict[str, str]:
    return statement_names()


def statement_name(statement: str) -> str:
    """The constant that holds `statement` ('file NAME'), else its first words."""
    if not statement:
        return "(no statement logged)"
    try:
        name = _names().get(fingerprint(statement))
    except ParseError:
        name = None
    return name or " ".join(statement.split())[:120]


def failures(log: str) -> Counter[tuple[str, str]]:
    """(statement's name, error message) -> how often, from a coordinator's log."""
    counted: Counter[tuple[str, str]] = Counter()
    for error in logged_errors(log):
        if error.statement:
            counted[(statement_name(error.statement), error.message)] += 1
    return counted


def main(argv: list[str]) -> int:
    """Print the failures of the log named by argv[1], by statement."""
    if len(argv) != 2:
        print(__doc__)  # noqa: T201
        return 2
    for (name, message), count in sorted(
        failures(Path(argv[1]).read_text(errors="replace")).items()
    ):
        print(f"{count:6d}  {name}\n        {message}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
