"""The storage service's composition root: repository, service, servicer, app."""

from __future__ import annotations

import asyncpg
import grpc

from stello.auth import KeyStore
from stello.server import ServiceApp
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2_grpc
from storage_service.config import StorageSettings
from storage_service.convert import ProtoCodecs
from storage_service.events.repository import EventRepository
from storage_service.events.service import EventLog, Purger
from storage_service.guard.service import ForkGuard
from storage_service.memory.service import SharedMemoryService
from storage_service.parse import RequestParser
from storage_service.records.repository import Database
from storage_service.service import StorageService
from storage_service.servicer import SessionStorageServicer

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
    service = StorageService(
        db,
        ProtoCodecs.create(),
        max_reply_bytes=settings.max_message_bytes,
        max_page_bytes=config.max_page_bytes,
    )
    events = EventRepository(pool)
    servicer = SessionStorageServicer(
        service,
        RequestParser(settings, config),
        EventLog(events),
        SharedMemoryService(db),
        ForkGuard(db),
    )

    def register(server: grpc.aio.Server) -> None:
        storage_pb2_grpc.add_SessionStorageServicer_to_server(servicer, server)

    return ServiceApp(
        name="storage",
        service_names=(SERVICE_NAME,),
        register=register,
        pool=pool,
        keys=keys,
        settings=settings,
        metrics_port=config.metrics_port,
        background=(create_purger(pool, config),),
    )


def create_purger(pool: asyncpg.Pool, config: StorageSettings | None = None) -> Purger:
    """The periodic purge of events past their retention (not started)."""
    config = config or StorageSettings()
    return Purger(EventRepository(pool), config.event_retention_s, config.event_purge_interval_s)
