"""scripts/pass_summary.py: the tail of a CI run says how each pass ended."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
pass_summary = importlib.import_module("pass_summary")

CITUS_LOG = """\
tests/tree/test_tree.py ....                                  [100%]
Citus nodes' CPU: 120.0 s (coordinator 80.0 s, worker1 20.0 s, worker2 20.0 s)
================== Citus nodes logged ERRORs no test provoked ==================
    1  worker2: UPDATE sessions
       canceling statement due to lock timeout
============================= slowest 10 durations =============================
11.75s call     tests/tree/test_delete.py::TestDeleteSubtree::test_a_delete
========== 780 passed, 46 skipped, 31 deselected in 352.22s (0:05:52) ==========
"""

FAILED_LOG = """\
tests/storage/test_x.py .F.                                   [100%]
=========================== short test summary info ============================
FAILED tests/storage/test_x.py::test_two - AssertionError: 1 != 2
ERROR tests/storage/test_x.py::test_three - TimeoutError
============== 1 failed, 1 passed, 1 error in 3.10s ===============
"""


class TestSummary:
    def test_a_citus_error_is_named_in_the_tail(self) -> None:
        """The nodes' unprovoked ERROR and the result line, nothing of the durations."""
        lines = pass_summary.summary("Citus", CITUS_LOG.splitlines(keepends=True))
        assert lines == [
            "Citus: 780 passed, 46 skipped, 31 deselected in 352.22s (0:05:52)",
            "  Citus nodes logged ERRORs no test provoked:",
            "  1  worker2: UPDATE sessions",
            "  canceling statement due to lock timeout",
        ]

    def test_failed_and_errored_tests_are_listed(self) -> None:
        lines = pass_summary.summary("SQL", FAILED_LOG.splitlines())
        assert lines == [
            "SQL: 1 failed, 1 passed, 1 error in 3.10s",
            "  FAILED tests/storage/test_x.py::test_two - AssertionError: 1 != 2",
            "  ERROR tests/storage/test_x.py::test_three - TimeoutError",
        ]

    def test_a_pass_that_printed_no_result_says_so(self) -> None:
        lines = pass_summary.summary("programs", ["scripts/citus failed (exit 1)\n"])
        assert lines == [
            "programs: no pytest result line (stopped early?)",
            "  scripts/citus failed (exit 1)",
        ]


def test_the_script_names_each_pass_and_a_missing_log(tmp_path: Path) -> None:
    """Run as scripts/test runs it: TITLE=LOG pairs, titles holding '=' and spaces."""
    log = tmp_path / "1"
    log.write_text(CITUS_LOG, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "pass_summary.py"),
            f"Citus (a=b, two workers)={log}",
            f"history={tmp_path / 'missing'}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines()[1] == (
        "Citus (a=b, two workers): 780 passed, 46 skipped, 31 deselected in 352.22s (0:05:52)"
    )
    assert done.stdout.splitlines()[-1] == f"history: no log at {tmp_path / 'missing'}"
