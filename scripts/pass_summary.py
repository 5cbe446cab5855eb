"""What each pass of scripts/test ended with, in a few lines at the very end of its output.

scripts/test runs its passes side by side and prints their logs one after the other, so a
failure can sit thousands of lines above the end; a CI that keeps only the tail of a run
showed every test passing and an exit code of 1. This prints, per pass, its title, its
pytest result line (or that it printed none), each FAILED or ERROR line of pytest's short
summary, and the errors the Citus nodes logged that no test provoked.

    python scripts/pass_summary.py "TITLE=LOG" ...
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

RESULT = re.compile(r"^=+ (.* in [0-9.]+s.*) =+$")
FAILURE = re.compile(r"^(FAILED|ERROR) ")
CITUS_SECTION = re.compile(r"^=+ Citus nodes logged ERRORs no test provoked =+$")
SECTION_END = re.compile(r"^=+ ")
OTHER = re.compile(r"^scripts/citus failed|^Timeout|^\+{5,} Timeout")


def summary(title: str, lines: Iterable[str]) -> list[str]:
    """The lines that say how one pass ended (its log's lines given)."""
    results: list[str] = []
    found: list[str] = []
    in_citus = False
    for line in lines:
        line = line.rstrip("\n")
        if in_citus and SECTION_END.match(line):
            in_citus = False
        if in_citus:
            found.append(f"  {line.strip()}")
            continue
        if CITUS_SECTION.match(line):
            in_citus = True
            found.append("  Citus nodes logged ERRORs no test provoked:")
        elif FAILURE.match(line) or OTHER.match(line):
            found.append(f"  {line}")
        elif match := RESULT.match(line):
            results.append(match.group(1))
    ended = "; ".join(results) if results else "no pytest result line (stopped early?)"
    return [f"{title}: {ended}", *found]


def main(arguments: list[str]) -> int:
    """Print each TITLE=LOG pair's summary; a log that is missing is said."""
    print("== how each pass ended (their output is above)")
    for argument in arguments:
        title, _, log = argument.rpartition("=")
        path = Path(log)
        if not path.is_file():
            print(f"{title}: no log at {log}")
            continue
        with path.open(encoding="utf-8", errors="replace") as handle:
            print("\n".join(summary(title, handle)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
