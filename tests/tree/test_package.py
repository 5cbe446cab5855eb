"""The tree_service package surface."""

from __future__ import annotations

import tree_service


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
