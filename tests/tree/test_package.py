"""The tree_service package surface, its rooms and their imports (STYLE §1, §16)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tree_service
from tests.support.rooms import foreign_imports, room_modules

ROOT = Path(tree_service.__file__).parent
ROOMS = {
    "erasure": ["eraser", "job", "release", "repository", "service"],
    "nodes": ["listing", "repository", "service"],
    "refs": ["repository", "service"],
    "retention": ["repository", "service", "wire"],
    "sessions": ["repository", "service"],
    "sweep": ["repository", "service", "sweeper"],
    "trees": ["repository", "service"],
}
# The tree is one service over the kernel: no other service, no program (STYLE §16).
FOREIGN = ("agent_gateway", "storage_service", "stello_cli", "stello_client", "stello_console")


class TestPackage:
    def test_all_lists_the_public_names(self) -> None:
        """__all__ names the app factory, sweeper, service and settings, each importable."""
        assert set(tree_service.__all__) >= {
            "create_app",
            "create_sweeper",
            "Sweeper",
            "TreeSettings",
        }
        assert all(hasattr(tree_service, name) for name in tree_service.__all__)

    def test_top_level_holds_only_what_every_room_shares(self) -> None:
        """Beside the rooms, the top holds the entry points, the wiring and the shared modules."""
        top = sorted(p.stem for p in ROOT.glob("*.py"))
        assert top == [
            "__init__",
            "__main__",
            "app",
            "config",
            "convert",
            "encoding",
            "models",
            "service",
            "servicer",
            "sql",
            "unit",
        ]
        assert sorted(p.parent.name for p in ROOT.glob("*/__init__.py")) == sorted(ROOMS)

    @pytest.mark.parametrize("room", sorted(ROOMS))
    def test_each_room_lists_its_modules(self, room: str) -> None:
        """A room's __all__ names its modules (each imports), so a newcomer sees its parts."""
        listed, found = room_modules("tree_service", room)
        assert listed == found == ROOMS[room]

    def test_imports_no_other_service_and_no_program(self) -> None:
        """No module of tree_service imports another service, the CLI or the console."""
        assert foreign_imports(ROOT, FOREIGN) == set()
