"""The Fork baseline: bare grpc.aio servers running the same RPC chain and the same SQL.

Three bare servers (no interceptors, no auth, no validation, no composition,
no retries) stand in for storage, tree and gateway. The bare gateway's Fork
makes the calls ours makes for a NONE fork without a client request_id
(agent_gateway.forks.saga), in the same order: GetConfig of the source,
CreateSession(provisional, config, request_id), one Transact(remember the new
session under the saga's own key (require_new), put session, put the config's
system prompt (or copy the source's when it has none)), CommitSession. The
bare services run our SQL constants in the same transactions, with the
request_id's stored response, the remembered entry and the events ours write.
What is left between the two is our layers: interceptors, validation,
composition, the typed clients, conversion.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import grpc

from stello.agent.v1 import agent_pb2
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.settings import MIB
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.stored import idempotency
from stello.stored.events import Event, Outbox
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.sessions.repository import PUT_SESSION
from storage_service.slots.repository import COPY_SYSTEM_PROMPT, PUT_SLOT
from tree_service.convert import config_from_proto, config_to_proto
from tree_service.encoding import config_from_json, config_to_json
from tree_service.nodes.repository import GET_NODE
from tree_service.sessions.repository import (
    COMMIT_SESSION,
    CREATE_SESSION,
    GET_CONFIG,
    LOCK_FOR_COMMIT,
)

ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
PROVISIONING_TTL_S = 60.0
SAGA_SCOPE = "agent.saga.generated"
"""The scope of the key a saga without a client request_id remembers its session under."""

# idempotency.remember_new takes an asyncpg.Connection; the pool's PoolConnectionProxy
# forwards every Connection method, but asyncpg-stubs do not type it as one: hence the
# ignore[arg-type]s below.


def _server(service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]) -> tuple[Any, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, handlers)])
    return server, server.add_insecure_port("127.0.0.1:0")


def _unary(behaviour: Any, request: Any, response: Any) -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=request.FromString,
        response_serializer=response.SerializeToString,
    )


def _topology(row: asyncpg.Record) -> common_pb2.TopologyNode:
    node = common_pb2.TopologyNode(
        id=str(row["id"]),
        depth=row["depth"],
        index=row["sibling_index"] or 0,
        label=row["label"],
        status=ACTIVE,
    )
    if row["parent_id"] is not None:
        node.parent_id = str(row["parent_id"])
    return node


def tree_server(pool: asyncpg.Pool) -> tuple[Any, int]:
    """GetConfig, CreateSession and CommitSession with the tree's SQL."""

    async def get_config(request: Any, context: Any) -> tree_pb2.GetConfigResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con:
            config = await con.fetchval(GET_CONFIG, space, session)
        reply = tree_pb2.GetConfigResponse()
        if config is not None:
            reply.config.CopyFrom(config_to_proto(config_from_json(config)))
        return reply

    async def create(request: Any, context: Any) -> tree_pb2.CreateSessionResponse:
        space, parent = uuid.UUID(request.space_id), uuid.UUID(request.parent_id)
        scope, request_id = "tree.CreateSession", request.request_id
        request_hash = idempotency.fingerprint(request)
        async with pool.acquire() as con, con.transaction():
            row = await con.fetchrow(
                CREATE_SESSION,
                space,
                uuid.uuid4(),
                parent,
                request.label,
                uuid.UUID(request.source_session_id),
                PROVISIONING_TTL_S,
                config_to_json(config_from_proto(request.config, Violations(), MIB)),
            )
            assert row is not None and row["parent_found"] and row["source_found"]
            reply = tree_pb2.CreateSessionResponse(node=_topology(row))
            response = reply.SerializeToString()
            # The work, then its key in one insert (TreeService._create_once).
            new = await idempotency.remember_new(
                con,  # type: ignore[arg-type]
                space,
                scope,
                request_id,
                request_hash,
                response,
                [row["id"]],
            )
            assert new
        return reply

    async def commit(request: Any, context: Any) -> tree_pb2.CommitSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con, con.transaction():
            locked = await con.fetch(LOCK_FOR_COMMIT, space, session)
            target = next(r for r in locked if r["target"])
            if target["provisional"]:
                row = await con.fetchrow(COMMIT_SESSION, space, session)
                outbox = Outbox()
                outbox.add(space, Event("session_committed", session))
                await outbox.flush(con)  # type: ignore[arg-type]
            else:
                row = await con.fetchrow(GET_NODE, space, session)
        assert row is not None
        return tree_pb2.CommitSessionResponse(node=_topology(row))

    return _server(
        "stello.tree.v1.SessionTree",
        {
            "GetConfig": _unary(get_config, tree_pb2.GetConfigRequest, tree_pb2.GetConfigResponse),
            "CreateSession": _unary(
                create, tree_pb2.CreateSessionRequest, tree_pb2.CreateSessionResponse
            ),
            "CommitSession": _unary(
                commit, tree_pb2.CommitSessionRequest, tree_pb2.CommitSessionResponse
            ),
        },
    )


def storage_server(pool: asyncpg.Pool) -> tuple[Any, int]:
    """A Fork's Transact with storage's SQL: remember the session (require_new), put the
    meta, put the system prompt (or copy the source's)."""

    async def transact(request: Any, context: Any) -> storage_pb2.TransactResponse:
        space = uuid.UUID(request.space_id)
        remember_op, meta_op, prompt_op = (op for op in request.operations)
        remember = remember_op.remember_result
        meta = meta_op.put_session.session
        session = uuid.UUID(meta.id)
        reply = storage_pb2.TransactResponse()
        reply.results.add().remember_result.SetInParent()
        result = reply.results.add().put_session.session
        async with pool.acquire() as con, con.transaction():
            outbox = Outbox()
            new = await idempotency.remember_new(
                con,  # type: ignore[arg-type]
                space,
                remember.scope,
                remember.request_id,
                remember.request_hash,
                remember.response,
                [uuid.UUID(i) for i in remember.session_ids],
            )
            assert new
            row = await con.fetchrow(
                PUT_SESSION, space, session, meta.label, "active", datetime.now(UTC)
            )
            assert row is not None
            outbox.add(space, Event("session_updated", session, if_visible=True))
            if prompt_op.HasField("put_system_prompt"):
                prompt = prompt_op.put_system_prompt
                stored = await con.fetchval(
                    PUT_SLOT["system_prompt"], space, uuid.UUID(prompt.session_id), prompt.content
                )
                assert stored
                outbox.add(space, Event("system_prompt_put", session, if_visible=True))
                reply.results.add().put_system_prompt.SetInParent()
            else:
                copy = prompt_op.copy_system_prompt
                copied = await con.fetchrow(
                    COPY_SYSTEM_PROMPT, space, session, uuid.UUID(copy.source_id)
                )
                assert copied is not None and copied["target_found"] and copied["source_found"]
                if copied["copied"]:
                    outbox.add(space, Event("system_prompt_put", session, if_visible=True))
                reply.results.add().copy_system_prompt.copied = bool(copied["copied"])
            await outbox.flush(con)  # type: ignore[arg-type]
        result.id, result.label, result.status = meta.id, row["label"], ACTIVE
        result.created_at.FromDatetime(row["created_at"])
        result.updated_at.FromDatetime(row["updated_at"])
        return reply

    return _server(
        "stello.storage.v1.SessionStorage",
        {"Transact": _unary(transact, storage_pb2.TransactRequest, storage_pb2.TransactResponse)},
    )


class BareGateway:
    """Fork as the bare chain of calls to the bare storage and tree servers."""

    def __init__(self, storage: str, tree: str) -> None:
        self._addresses = (storage, tree)
        self._channels: list[grpc.aio.Channel] = []

    async def __aenter__(self) -> BareGateway:
        storage, tree = self._addresses
        self._channels = [
            await open_channel(storage).__aenter__(),
            await open_channel(tree).__aenter__(),
        ]
        self.storage = storage_pb2_grpc.SessionStorageStub(self._channels[0])
        self.tree = tree_pb2_grpc.SessionTreeStub(self._channels[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        for channel in self._channels:
            await channel.close()

    async def fork(self, request: Any, context: Any) -> agent_pb2.ForkResponse:
        space, source = request.space_id, request.source_session_id
        config = await self.tree.GetConfig(
            tree_pb2.GetConfigRequest(space_id=space, session_id=source)
        )
        request_id = uuid.uuid4().hex
        created = await self.tree.CreateSession(
            tree_pb2.CreateSessionRequest(
                space_id=space,
                parent_id=source,
                label=request.label,
                source_session_id=source,
                config=config.config,
                provisional=True,
                request_id=request_id,
            )
        )
        node = created.node
        session_id = node.id
        remembered = common_pb2.SessionSummary(id=session_id, parent_id=node.parent_id)
        meta = common_pb2.SessionMeta(id=session_id, label=request.label, status=ACTIVE)
        op = storage_pb2.Operation
        prompt = config.config.system_prompt
        results = await self.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=space,
                operations=[
                    op(
                        remember_result=op.RememberResultOp(
                            scope=SAGA_SCOPE,
                            request_id=request_id,
                            request_hash=hashlib.sha256(request_id.encode()).digest(),
                            response=remembered.SerializeToString(deterministic=True),
                            session_ids=[session_id],
                            require_new=True,
                        )
                    ),
                    op(put_session=op.PutSessionOp(session=meta)),
                    op(
                        put_system_prompt=op.PutSystemPromptOp(
                            session_id=session_id, content=prompt
                        )
                    )
                    if prompt
                    else op(
                        copy_system_prompt=op.CopySystemPromptOp(
                            session_id=session_id, source_id=source
                        )
                    ),
                ],
            )
        )
        committed = await self.tree.CommitSession(
            tree_pb2.CommitSessionRequest(space_id=space, session_id=session_id)
        )
        stored = results.results[1].put_session.session
        return agent_pb2.ForkResponse(
            session=common_pb2.SessionSummary(
                id=session_id,
                label=stored.label,
                status=ACTIVE,
                parent_id=committed.node.parent_id,
                created_at=stored.created_at,
                updated_at=stored.updated_at,
            )
        )

    def server(self) -> tuple[Any, int]:
        """A bare AgentGateway server answering Fork."""
        return _server(
            "stello.agent.v1.AgentGateway",
            {"Fork": _unary(self.fork, agent_pb2.ForkRequest, agent_pb2.ForkResponse)},
        )
