"""TreeSettings: the STELLO_TREE_ variables and their defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tree_service.config import TreeSettings


class TestTreeSettings:
    def test_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without variables: 127.0.0.1:50062, 200,000 nodes, sweep every 10 s, TTL 60 s."""
        for name in ("HOST", "PORT", "MAX_TREE_NODES", "SWEEP_INTERVAL_S", "PROVISIONING_TTL_S"):
            monkeypatch.delenv(f"STELLO_TREE_{name}", raising=False)
        config = TreeSettings()
        assert config.address == "127.0.0.1:50062"
        assert (config.max_tree_nodes, config.sweep_interval_s, config.provisioning_ttl_s) == (
            200_000,
            10,
            60,
        )

    def test_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_TREE_* variables set the fields; empty ones are ignored."""
        monkeypatch.setenv("STELLO_TREE_PORT", "0")
        monkeypatch.setenv("STELLO_TREE_PROVISIONING_TTL_S", "2")
        monkeypatch.setenv("STELLO_TREE_MAX_TREE_NODES", "")
        config = TreeSettings()
        assert (config.port, config.provisioning_ttl_s, config.max_tree_nodes) == (0, 2, 200_000)

    def test_rejects_nonsense(self) -> None:
        """A zero TTL or a cap below 1 is refused with a message naming the field."""
        with pytest.raises(ValidationError, match="provisioning_ttl_s"):
            TreeSettings(provisioning_ttl_s=0)
        with pytest.raises(ValidationError, match="max_tree_nodes"):
            TreeSettings(max_tree_nodes=0)
