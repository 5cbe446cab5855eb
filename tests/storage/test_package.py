"""The package surface, its rooms and their imports, and its settings (STYLE §1, §4, §16)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pydantic
import pytest

import storage_service
import storage_service.servicer
from stello.storage.v1 import storage_pb2_grpc
from storage_service import StorageSettings
from tests.support.rooms import foreign_imports, room_modules

ROOT = Path(storage_service.__file__).parent
ROOMS = {
    "events": ["repository", "service", "wire"],
    "guard": ["repository", "service"],
    "jobs": ["repository", "service", "wire"],
    "keys": ["idempotent", "repository", "wire"],
    "memory": ["repository", "service"],
    "records": ["lineage", "pages", "repository", "service", "wire"],
    "search": [
        "backfill",
        "backfill_repository",
        "highlight",
        "letters",
        "query",
        "repository",
        "service",
        "stop_words",
        "symbols",
        "wire",
    ],
    "sessions": ["repository", "service", "wire"],
    "slots": ["caches", "repository", "service", "wire"],
    "transact": ["operations", "service", "wire"],
    "turns": ["line", "repository", "service", "waiters", "window", "wire"],
}
SERVICER = ["claims", "memory", "slots", "storage", "turns"]
# Storage is one service over the kernel: no other service, no program (STYLE §16).
FOREIGN = ("agent_gateway", "tree_service", "stello_cli", "stello_client", "stello_console")


class TestPackage:
    def test_exports(self) -> None:
        """The package exports exactly its public names, each importable."""
        assert sorted(storage_service.__all__) == ["SERVICE_NAME", "StorageSettings", "create_app"]
        for name in storage_service.__all__:
            assert getattr(storage_service, name) is not None

    def test_top_level_holds_only_what_every_room_shares(self) -> None:
        """Beside the rooms, the top holds the entry points, the wiring and the shared modules."""
        top = sorted(p.stem for p in ROOT.glob("*.py"))
        assert top == [
            "__init__",
            "__main__",
            "app",
            "config",
            "convert",
            "models",
            "page_tokens",
            "parse",
            "unit",
        ]
        packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
        assert packages == sorted([*ROOMS, "servicer"])

    def test_the_servicer_is_one_class_over_its_rpc_modules(self) -> None:
        """The gRPC face is a package: one class, the RPCs of a subsystem mixed in per module."""
        found = sorted(m.name for m in pkgutil.iter_modules(storage_service.servicer.__path__))
        assert found == SERVICER
        for name in found:
            importlib.import_module(f"storage_service.servicer.{name}")
        assert storage_service.servicer.__all__ == ["SessionStorageServicer"]
        assert issubclass(
            storage_service.servicer.SessionStorageServicer,
            storage_pb2_grpc.SessionStorageServicer,
        )

    @pytest.mark.parametrize("room", sorted(ROOMS))
    def test_each_room_lists_its_modules(self, room: str) -> None:
        """A room's __all__ names its modules (each imports), so a newcomer sees its parts."""
        listed, found = room_modules("storage_service", room)
        assert listed == found == ROOMS[room]

    def test_imports_no_other_service_and_no_program(self) -> None:
        """No module of storage_service imports another service, the CLI or the console."""
        assert foreign_imports(ROOT, FOREIGN) == set()


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
