"""The package surface and its settings (STYLE §1, §4)."""

from __future__ import annotations

import pydantic
import pytest

import storage_service
from storage_service import StorageSettings


class TestPackage:
    def test_exports(self) -> None:
        """The package exports exactly its public names, each importable."""
        assert sorted(storage_service.__all__) == [
            "SERVICE_NAME",
            "StorageService",
            "StorageSettings",
            "create_app",
        ]
        for name in storage_service.__all__:
            assert getattr(storage_service, name) is not None


class TestStorageSettings:
    def test_defaults(self) -> None:
        """Without variables it listens on 127.0.0.1:50061 and grants leases up to a day."""
        config = StorageSettings()
        assert config.address == "127.0.0.1:50061"
        assert config.max_turn_ttl_s == 86_400

    def test_reads_its_own_prefix(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_STORAGE_* variables configure it; empty ones are ignored."""
        monkeypatch.setenv("STELLO_STORAGE_PORT", "6000")
        monkeypatch.setenv("STELLO_STORAGE_MAX_TURN_TTL_S", "60")
        monkeypatch.setenv("STELLO_STORAGE_HOST", "")
        config = StorageSettings()
        assert (config.address, config.max_turn_ttl_s) == ("127.0.0.1:6000", 60)

    def test_refuses_a_renamed_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The record limit's old storage-only name stops the start, naming the new one."""
        monkeypatch.setenv("STELLO_STORAGE_MAX_RECORD_BYTES", "2048")
        with pytest.raises(pydantic.ValidationError, match="STELLO_MAX_RECORD_BYTES"):
            StorageSettings()

    def test_rejects_a_bad_port(self) -> None:
        """A port outside 0..65535 is refused with a message naming the field."""
        with pytest.raises(pydantic.ValidationError, match="port"):
            StorageSettings(port=70_000)
