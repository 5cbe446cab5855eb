"""The Fork baseline: bare grpc.aio servers running the same RPC chain and the same SQL.

Three bare servers (no interceptors, no auth, no validation, no composition,
no retries) stand in for storage, tree and gateway. The bare gateway's Fork
makes the calls ours makes for a NONE fork, in the same order: GetConfig and
GetSystemPrompt of the source in parallel, CreateSession(provisional, config,
request_id), one Transact(put session, put system prompt, request_id),
CommitSession. The bare services run our SQL constants in the same
transactions, with request_id claims and stored responses. What is left
between the two is our layers: interceptors, validation, composition, the
typed clients, conversion.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import grpc

from stello import idempotency
from stello.agent.v1 import agent_pb2
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.sessions.repository import PUT_SESSION
from storage_service.slots.repository import GET_SLOTS, PUT_SLOT
from tree_service import sql
from tree_service.convert import config_from_proto, config_to_proto
from tree_service.encoding import config_from_json, config_to_json

ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
PROVISIONING_TTL_S = 60.0

# idempotency.claim and remember take an asyncpg.Connection; the pool's PoolConnectionProxy
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
            config = await con.fetchval(sql.GET_CONFIG, space, session)
        reply = tree_pb2.GetConfigResponse()
        if config is not None:
            reply.config.CopyFrom(config_to_proto(config_from_json(config)))
        return reply

    async def create(request: Any, context: Any) -> tree_pb2.CreateSessionResponse:
        space, parent = uuid.UUID(request.space_id), uuid.UUID(request.parent_id)
        scope, request_id = "tree.CreateSession", request.request_id
        request_hash = idempotency.fingerprint(request)
        async with pool.acquire() as con, con.transaction():
            earlier = await idempotency.claim(con, space, scope, request_id, request_hash)  # type: ignore[arg-type]
            if earlier is not None:
                return tree_pb2.CreateSessionResponse.FromString(earlier)
            row = await con.fetchrow(
                sql.CREATE_SESSION,
                space,
                uuid.uuid4(),
                parent,
                request.label,
                uuid.UUID(request.source_session_id),
                PROVISIONING_TTL_S,
                config_to_json(config_from_proto(request.config, Violations())),
            )
            assert row is not None and row["id"] is not None
            reply = tree_pb2.CreateSessionResponse(node=_topology(row))
            response = reply.SerializeToString()
            await idempotency.remember(con, space, scope, request_id, request_hash, response)  # type: ignore[arg-type]
        return reply

    async def commit(request: Any, context: Any) -> tree_pb2.CommitSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con, con.transaction():
            provisional = await con.fetchval(sql.LOCK_FOR_COMMIT, space, session)
            assert provisional is not None
            query = sql.COMMIT_SESSION if provisional else sql.GET_NODE
            row = await con.fetchrow(query, space, session)
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
    """GetSystemPrompt and a put-session + put-system-prompt Transact with storage's SQL."""

    async def get_prompt(request: Any, context: Any) -> storage_pb2.GetSystemPromptResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with pool.acquire() as con:
            row = await con.fetchrow(GET_SLOTS, space, session)
        assert row is not None
        return storage_pb2.GetSystemPromptResponse(content=row["system_prompt"])

    async def transact(request: Any, context: Any) -> storage_pb2.TransactResponse:
        space = uuid.UUID(request.space_id)
        scope, request_id = "storage.Transact", request.request_id
        request_hash = idempotency.fingerprint(request)
        meta_op, prompt_op = (op for op in request.operations)
        meta, prompt = meta_op.put_session.session, prompt_op.put_system_prompt
        async with pool.acquire() as con, con.transaction():
            earlier = await idempotency.claim(con, space, scope, request_id, request_hash)  # type: ignore[arg-type]
            if earlier is not None:
                return storage_pb2.TransactResponse.FromString(earlier)
            session = uuid.UUID(meta.id)
            row = await con.fetchrow(PUT_SESSION, space, session, meta.label, "active")
            assert row is not None
            stored = await con.fetchval(
                PUT_SLOT["system_prompt"], space, uuid.UUID(prompt.session_id), prompt.content
            )
            assert stored
            result = common_pb2.SessionMeta(id=meta.id, label=row["label"], status=ACTIVE)
            result.created_at.FromDatetime(row["created_at"])
            result.updated_at.FromDatetime(row["updated_at"])
            reply = storage_pb2.TransactResponse(
                results=[
                    storage_pb2.OperationResult(
                        put_session=storage_pb2.OperationResult.PutSessionResult(session=result)
                    ),
                    storage_pb2.OperationResult(
                        put_system_prompt=storage_pb2.OperationResult.PutSystemPromptResult()
                    ),
                ]
            )
            response = reply.SerializeToString()
            await idempotency.remember(con, space, scope, request_id, request_hash, response)  # type: ignore[arg-type]
        return reply

    return _server(
        "stello.storage.v1.SessionStorage",
        {
            "GetSystemPrompt": _unary(
                get_prompt,
                storage_pb2.GetSystemPromptRequest,
                storage_pb2.GetSystemPromptResponse,
            ),
            "Transact": _unary(transact, storage_pb2.TransactRequest, storage_pb2.TransactResponse),
        },
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
        config, prompt = await asyncio.gather(
            self.tree.GetConfig(tree_pb2.GetConfigRequest(space_id=space, session_id=source)),
            self.storage.GetSystemPrompt(
                storage_pb2.GetSystemPromptRequest(space_id=space, session_id=source)
            ),
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
        session_id = created.node.id
        meta = common_pb2.SessionMeta(id=session_id, label=request.label, status=ACTIVE)
        op = storage_pb2.Operation
        results = await self.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=space,
                request_id=f"{request_id}/storage",
                operations=[
                    op(put_session=op.PutSessionOp(session=meta)),
                    op(
                        put_system_prompt=op.PutSystemPromptOp(
                            session_id=session_id, content=prompt.content or "-"
                        )
                    ),
                ],
            )
        )
        committed = await self.tree.CommitSession(
            tree_pb2.CommitSessionRequest(space_id=space, session_id=session_id)
        )
        stored = results.results[0].put_session.session
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
