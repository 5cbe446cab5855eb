"""The protos pass `buf lint` and break nothing against the released v1 image (baseline.binpb)."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"
BASELINE = PROTOS / "baseline.binpb"
# buf comes with the dev dependencies (requirements.lock), in the venv's bin.
BUF = Path(sysconfig.get_path("scripts")) / "buf"


def buf(*args: str) -> subprocess.CompletedProcess[str]:
    """Run buf from the repository root and capture its output."""
    if not BUF.is_file():
        pytest.fail(f"{BUF} is missing: install the dev dependencies (bash scripts/test does)")
    return subprocess.run(
        [str(BUF), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


class TestBuf:
    def test_lint(self) -> None:
        """`buf lint` finds nothing under the module's STANDARD rules."""
        result = buf("lint", "protos")
        assert result.returncode == 0, f"buf lint failed:\n{result.stdout}{result.stderr}"

    def test_no_breaking_change_against_the_baseline(self) -> None:
        """`buf breaking` (FILE rules) finds no wire or source break against the released v1."""
        assert BASELINE.is_file(), "protos/baseline.binpb is missing (see protos/README.md)"
        result = buf("breaking", "protos", "--against", str(BASELINE.relative_to(ROOT)))
        assert result.returncode == 0, (
            "buf breaking: the protos break the released v1 API (protos/baseline.binpb). "
            "Add fields and RPCs instead of renaming, renumbering or removing them; see "
            f"protos/README.md.\n{result.stdout}{result.stderr}"
        )
