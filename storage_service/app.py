"""The storage service's composition root: the unit of work's database, the rooms, the servicer."""

from __future__ import annotations

import asyncpg
import grpc
from prometheus_client import CollectorRegistry

from stello.auth import KeyStore
from stello.serving.server import ServiceApp
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2_grpc
from storage_service.config import StorageSettings
from storage_service.convert import ProtoCodecs
from storage_service.events.service import EventLog, Purger
from storage_service.guard.service import ForkGuard
from storage_service.jobs.service import JobService
from storage_service.memory.service import SharedMemoryService
from storage_service.parse import RequestParser
from storage_service.records.service import RecordService
from storage_service.search.backfill import SearchBackfill
from storage_service.search.service import SearchService
from storage_service.servicer import SessionStorageServicer
from storage_service.sessions.service import SessionService
from storage_service.slots.service import SlotService
from storage_service.transact.service import TransactService
from storage_service.turns.service import TurnService
from storage_service.unit import Database

SERVICE_NAME = "stello.storage.v1.SessionStorage"


def create_app(
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
    config: StorageSettings | None = None,
) -> ServiceApp:
    """Wire the storage service over `pool` into an app the kernel's server factory runs."""
    config = config or StorageSettings()
    db = Database(pool)
    codecs = ProtoCodecs.create()
    # ListRecords pages and BeginTurn's window: at most half a reply (max_page_bytes).
    page_bytes = min(config.max_page_bytes, settings.max_message_bytes // 2)
    servicer = SessionStorageServicer(
        RequestParser(settings, config),
        sessions=SessionService(db),
        records=RecordService(db, codecs.records, max_page_bytes=page_bytes),
        slots=SlotService(db, max_reply_bytes=settings.max_message_bytes),
        turns=TurnService(db, max_page_bytes=page_bytes),
        transact=TransactService(db, codecs.results),
        memory=SharedMemoryService(db, max_entries=config.max_shared_memory_entries),
        guard=ForkGuard(db),
        jobs=JobService(db),
        events=EventLog(db),
        search=SearchService(db, timeout_s=config.search_timeout_s),
    )

    def register(server: grpc.aio.Server) -> None:
        storage_pb2_grpc.add_SessionStorageServicer_to_server(servicer, server)

    app = ServiceApp(
        name="storage",
        service_names=(SERVICE_NAME,),
        register=register,
        pool=pool,
        keys=keys,
        settings=settings,
        metrics_port=config.metrics_port,
        metrics_setting="STELLO_STORAGE_METRICS_PORT",
    )

    def registry() -> CollectorRegistry | None:
        return app.metrics.registry if app.metrics is not None else None

    backfill = SearchBackfill(
        db, config.search_backfill_batch, config.search_backfill_interval_s, registry=registry
    )
    app.background = (create_purger(pool, config), backfill)
    return app


def create_purger(pool: asyncpg.Pool, config: StorageSettings | None = None) -> Purger:
    """The periodic purge of events past their retention (not started)."""
    config = config or StorageSettings()
    return Purger(Database(pool), config.event_retention_s, config.event_purge_interval_s)
