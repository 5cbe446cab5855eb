"""The committed gRPC stubs are exactly what scripts/gen_protos.py makes from protos/."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
gen_protos = importlib.import_module("gen_protos")


class TestGeneratedStubs:
    def test_regenerating_changes_nothing(self, tmp_path: Path) -> None:
        """Regenerating every stub into a scratch dir gives byte-identical files."""
        gen_protos.generate(tmp_path)
        fresh = sorted(
            p.relative_to(tmp_path) for p in (tmp_path / "stello").rglob("*") if p.is_file()
        )
        assert fresh, "the generator produced nothing"
        stale = [str(p) for p in fresh if (ROOT / p).read_bytes() != (tmp_path / p).read_bytes()]
        assert stale == [], f"stubs out of date, run scripts/gen_protos.py: {stale}"

    @pytest.mark.parametrize("package", gen_protos.PACKAGES)
    def test_every_generated_folder_is_a_package(self, package: str) -> None:
        """Each generated folder has an __init__.py, or the wheel would miss the stubs."""
        assert (ROOT / "stello" / package / "v1" / "__init__.py").is_file()


class TestExports:
    @pytest.mark.parametrize(
        "module", ["stello", "storage_service", "tree_service", "agent_gateway"]
    )
    def test_package_declares_all(self, module: str) -> None:
        """Every package declares __all__ and each listed name exists."""
        imported = importlib.import_module(module)
        names = imported.__all__
        assert isinstance(names, list)
        assert all(hasattr(imported, name) for name in names)
