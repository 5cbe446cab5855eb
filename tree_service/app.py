"""The tree service's composition root: repository -> service -> servicer -> ServiceApp.

`create_app` builds what the kernel's server factory serves, with the periodic
provisional sweeper and the erasure job as the app's background tasks (the
server factory starts them once bound and stops them after the graceful
shutdown; the service wakes the job after each DeleteSubtree); `create_sweeper`
and `create_eraser` build one on its own, for tests that drive them. The
retention sweep (`tree_service.retention`) is a third background task.
"""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import grpc

from stello.auth import KeyStore
from stello.serving.server import ServiceApp, raw_replies
from stello.settings import MAX_MESSAGE_BYTES, StelloSettings
from stello.tree.v1 import tree_pb2_grpc
from tree_service.config import TreeSettings
from tree_service.erasure.eraser import Eraser
from tree_service.retention.service import RetentionService, RetentionSweeper
from tree_service.service import TreeService
from tree_service.servicer import TreeServicer
from tree_service.sweep.sweeper import Sweeper
from tree_service.unit import TreeRepository

SERVICE_NAME = "stello.tree.v1.SessionTree"
ADMIN_METHODS = frozenset({f"/{SERVICE_NAME}/SweepProvisional"})
RAW_REPLIES = frozenset({f"/{SERVICE_NAME}/GetTree"})
"""Methods whose servicer returns the reply's bytes (GetTree: `convert.tree_reply`)."""


def create_service(
    pool: asyncpg.Pool,
    config: TreeSettings | None = None,
    on_hidden: Callable[[], None] = lambda: None,
    max_reply_bytes: int = MAX_MESSAGE_BYTES,
) -> TreeService:
    """The domain service over `pool`, with the cap, TTL and erasure batch of `config`;
    `on_hidden` runs after each DeleteSubtree (it wakes the erasure job), which refuses a
    subtree whose ids would not fit `max_reply_bytes`."""
    config = config or TreeSettings()
    return TreeService(
        TreeRepository(pool),
        max_tree_nodes=config.max_tree_nodes,
        provisioning_ttl_s=config.provisioning_ttl_s,
        tree_timeout_s=config.get_tree_timeout_s,
        erase_batch=config.erase_batch,
        max_reply_bytes=max_reply_bytes,
        on_hidden=on_hidden,
    )


def create_app(
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
    config: TreeSettings | None = None,
) -> ServiceApp:
    """The SessionTree app the kernel's `create_server` serves (SweepProvisional: admin only)."""
    eraser = create_eraser(pool, config)
    retention = create_retention(pool, config, on_hidden=eraser.wake)
    service = create_service(
        pool, config, on_hidden=eraser.wake, max_reply_bytes=settings.max_message_bytes
    )
    servicer = TreeServicer(service, retention, max_slot_bytes=settings.max_slot_bytes)
    settings_ = config or TreeSettings()
    retention_sweeper = RetentionSweeper(retention, settings_.retention_interval_s)

    def register(server: grpc.aio.Server) -> None:
        tree_pb2_grpc.add_SessionTreeServicer_to_server(servicer, raw_replies(server, RAW_REPLIES))

    return ServiceApp(
        name="tree",
        service_names=(SERVICE_NAME,),
        register=register,
        pool=pool,
        keys=keys,
        settings=settings,
        admin_methods=ADMIN_METHODS,
        metrics_port=(config or TreeSettings()).metrics_port,
        metrics_setting="STELLO_TREE_METRICS_PORT",
        background=(create_sweeper(pool, config), eraser, retention_sweeper),
    )


def create_retention(
    pool: asyncpg.Pool,
    config: TreeSettings | None = None,
    on_hidden: Callable[[], None] = lambda: None,
) -> RetentionService:
    """Retention over `pool` with the batches of `config`; `on_hidden` runs after a batch
    deleted subtrees (it wakes the erasure job)."""
    config = config or TreeSettings()
    return RetentionService(
        pool,
        batch_roots=config.retention_batch,
        batch_sessions=config.retention_batch_sessions,
        on_hidden=on_hidden,
    )


def create_eraser(pool: asyncpg.Pool, config: TreeSettings | None = None) -> Eraser:
    """The erasure job of the sessions DeleteSubtree hid (not started)."""
    config = config or TreeSettings()
    return Eraser(create_service(pool, config).erasure, config.erase_interval_s)


def create_sweeper(pool: asyncpg.Pool, config: TreeSettings | None = None) -> Sweeper:
    """The periodic sweep of expired provisional sessions (not started)."""
    config = config or TreeSettings()
    return Sweeper(create_service(pool, config).sweeps, config.sweep_interval_s)
