"""The Send baseline: bare grpc.aio servers running the same turn's calls and the same SQL.

A bare storage server (no interceptors, no auth, no validation) and a bare
gateway whose Send makes the calls ours makes for a plain turn, in the same
order: BeginTurn and GetSession in parallel; BatchGetSlots and ListRecords in
parallel; an echo reply; one Transact under the turn_lease and
session_last_seq preconditions (append the two records, bump_turn,
release_turn). The storage side runs our SQL constants in the same
transactions. What is left between the two is our layers: interceptors,
validation, context assembly, the provider interface, the typed clients,
conversion.

    python bench/send_baseline.py serve storage DSN   |   serve gateway STORAGE
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import wait_for_stdin_close

from stello.agent.v1 import agent_pb2
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.formats.timestamps import set_timestamp
from stello.serving.runner import event_loop_factory
from stello.settings import MAX_MESSAGE_BYTES, StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.config import StorageSettings
from storage_service.convert import ROLE_FROM_PROTO, ROLE_TO_PROTO
from storage_service.models import MAX_SEQ
from storage_service.records.repository import APPEND_RECORDS, LIST_RECORDS_OLDEST
from storage_service.sessions.repository import GET_SESSION, LOCK_SESSIONS
from storage_service.slots.repository import BATCH_GET_SLOTS, SLOTS_FRAMING_BYTES
from storage_service.turns.repository import BEGIN_TURN, BUMP_TURN, RELEASE_TURN

USER, ASSISTANT = common_pb2.RECORD_ROLE_USER, common_pb2.RECORD_ROLE_ASSISTANT
LEASE_TTL_S = 300
PAGE_BYTES = StorageSettings().max_page_bytes  # the byte bound storage applies (same SQL)
Op, Check = storage_pb2.Operation, storage_pb2.Precondition


def _unary(behaviour: Any, request: Any, response: Any) -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=request.FromString,
        response_serializer=response.SerializeToString,
    )


def _meta(row: asyncpg.Record) -> common_pb2.SessionMeta:
    meta = common_pb2.SessionMeta(
        id=str(row["id"]), label=row["label"], turn_count=row["turn_count"]
    )
    meta.status = common_pb2.SESSION_STATUS_ACTIVE
    set_timestamp(meta.created_at, row["created_at"])
    set_timestamp(meta.updated_at, row["updated_at"])
    set_timestamp(meta.last_active_at, row["last_active_at"])
    return meta


class BareStorage:
    """The five storage RPCs of a plain turn, with storage's SQL."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def get_session(self, request: Any, context: Any) -> storage_pb2.GetSessionResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with self._pool.acquire() as con:
            row = await con.fetchrow(GET_SESSION, space, session)
        assert row is not None
        return storage_pb2.GetSessionResponse(session=_meta(row))

    async def begin_turn(self, request: Any, context: Any) -> storage_pb2.BeginTurnResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        token = uuid.uuid4()
        async with self._pool.acquire() as con:
            row = await con.fetchrow(BEGIN_TURN, space, session, token, float(request.ttl_s))
        assert row is not None and row["expires_at"] is not None
        reply = storage_pb2.BeginTurnResponse(token=str(token))
        set_timestamp(reply.expires_at, row["expires_at"])
        return reply

    async def batch_get_slots(
        self, request: Any, context: Any
    ) -> storage_pb2.BatchGetSlotsResponse:
        space = uuid.UUID(request.space_id)
        ids = [uuid.UUID(i) for i in request.session_ids]
        async with self._pool.acquire() as con:
            # The slots a turn reads: system prompt and insight.
            rows = await con.fetch(
                BATCH_GET_SLOTS,
                space,
                list(dict.fromkeys(ids)),
                True,
                False,
                True,
                SLOTS_FRAMING_BYTES,
                MAX_MESSAGE_BYTES,
            )
        reply = storage_pb2.BatchGetSlotsResponse()
        for row in rows:
            slots = reply.slots.add(session_id=str(row["session_id"]))
            if row["system_prompt"] is not None:
                slots.system_prompt = row["system_prompt"]
            if row["insight"] is not None:
                slots.insight = row["insight"]
        return reply

    async def list_records(self, request: Any, context: Any) -> storage_pb2.ListRecordsResponse:
        space, session = uuid.UUID(request.space_id), uuid.UUID(request.session_id)
        async with self._pool.acquire() as con:
            rows = await con.fetch(
                LIST_RECORDS_OLDEST, space, session, request.after_seq, MAX_SEQ, None, 0,
                request.limit, PAGE_BYTES,
            )  # fmt: skip
        reply = storage_pb2.ListRecordsResponse()
        for row in rows:
            if row["seq"] is None:
                continue
            record = reply.records.add(
                seq=row["seq"], role=ROLE_TO_PROTO[row["role"]], content=row["content"]
            )
            set_timestamp(record.created_at, row["created_at"])
        return reply

    async def transact(self, request: Any, context: Any) -> storage_pb2.TransactResponse:
        space = uuid.UUID(request.space_id)
        lease, last = request.preconditions[0].turn_lease, request.preconditions[1]
        session = uuid.UUID(lease.session_id)
        records = request.operations[0].append_records.records
        async with self._pool.acquire() as con, con.transaction():
            [locked] = await con.fetch(LOCK_SESSIONS, space, [session])
            assert str(locked["turn_token"]) == lease.token and locked["lease_live"]
            assert locked["last_seq"] == last.session_last_seq.expected
            appended = await con.fetch(
                APPEND_RECORDS, space, session,
                [ROLE_FROM_PROTO[r.role] for r in records],
                [r.content for r in records], [None] * len(records), [None] * len(records),
                [None] * len(records), [None] * len(records), False,
            )  # fmt: skip
            bumped = await con.fetchrow(BUMP_TURN, space, session, False, 1)
            await con.fetchrow(RELEASE_TURN, space, session, uuid.UUID(lease.token), True)
        assert bumped is not None
        result = storage_pb2.OperationResult
        reply = storage_pb2.TransactResponse()
        added = reply.results.add(append_records=result.AppendRecordsResult())
        for record, row in zip(records, sorted(appended, key=lambda r: r["seq"]), strict=True):
            stored = added.append_records.records.add()
            stored.CopyFrom(record)
            stored.seq = row["seq"]
            set_timestamp(stored.created_at, row["created_at"])
        reply.results.add(bump_turn=result.BumpTurnResult(session=_meta(bumped)))
        reply.results.add(release_turn=result.ReleaseTurnResult(released=True))
        return reply

    def server(self) -> tuple[Any, int]:
        """A bare SessionStorage server with these five methods."""
        server = grpc.aio.server()
        handlers = {
            "GetSession": _unary(
                self.get_session, storage_pb2.GetSessionRequest, storage_pb2.GetSessionResponse
            ),
            "BeginTurn": _unary(
                self.begin_turn, storage_pb2.BeginTurnRequest, storage_pb2.BeginTurnResponse
            ),
            "BatchGetSlots": _unary(
                self.batch_get_slots,
                storage_pb2.BatchGetSlotsRequest,
                storage_pb2.BatchGetSlotsResponse,
            ),
            "ListRecords": _unary(
                self.list_records, storage_pb2.ListRecordsRequest, storage_pb2.ListRecordsResponse
            ),
            "Transact": _unary(
                self.transact, storage_pb2.TransactRequest, storage_pb2.TransactResponse
            ),
        }
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("stello.storage.v1.SessionStorage", handlers)]
        )
        return server, server.add_insecure_port("127.0.0.1:0")


class BareGateway:
    """Send as the bare chain of calls to the bare storage server, with an echo reply."""

    def __init__(self, storage: storage_pb2_grpc.SessionStorageStub) -> None:
        self._storage = storage

    async def send(self, request: Any, context: Any) -> agent_pb2.SendResponse:
        storage, space, sid = self._storage, request.space_id, request.session_id
        begun, _ = await asyncio.gather(
            storage.BeginTurn(
                storage_pb2.BeginTurnRequest(space_id=space, session_id=sid, ttl_s=LEASE_TTL_S)
            ),
            storage.GetSession(storage_pb2.GetSessionRequest(space_id=space, session_id=sid)),
        )
        slots = storage_pb2.BatchGetSlotsRequest(space_id=space, session_ids=[sid])
        records = storage_pb2.ListRecordsRequest(
            space_id=space, session_id=sid, limit=1000, after_seq=0
        )
        _, history = await asyncio.gather(
            storage.BatchGetSlots(slots), storage.ListRecords(records)
        )
        last = history.records[-1].seq if history.records else 0
        turn = [
            common_pb2.Record(seq=last + 1, role=USER, content=request.content),
            common_pb2.Record(seq=last + 2, role=ASSISTANT, content=f"echo: {request.content}"),
        ]
        committed = await storage.Transact(
            storage_pb2.TransactRequest(
                space_id=space,
                preconditions=[
                    Check(turn_lease=Check.TurnLeaseCheck(session_id=sid, token=begun.token)),
                    Check(
                        session_last_seq=Check.SessionLastSeqCheck(session_id=sid, expected=last)
                    ),
                ],
                operations=[
                    Op(append_records=Op.AppendRecordsOp(session_id=sid, records=turn)),
                    Op(bump_turn=Op.BumpTurnOp(session_id=sid)),
                    Op(release_turn=Op.ReleaseTurnOp(session_id=sid, token=begun.token)),
                ],
            )
        )
        stored = committed.results[0].append_records.records
        return agent_pb2.SendResponse(assistant=stored[-1], records=stored)

    def server(self) -> tuple[Any, int]:
        """A bare AgentGateway server answering Send."""
        server = grpc.aio.server()
        handler = _unary(self.send, agent_pb2.SendRequest, agent_pb2.SendResponse)
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "stello.agent.v1.AgentGateway", {"Send": handler}
                )
            ]
        )
        return server, server.add_insecure_port("127.0.0.1:0")


async def serve(kind: str, target: str) -> None:
    """Serve the bare storage (target: a DSN) or gateway (target: storage's address)."""
    if kind == "storage":
        settings = StelloSettings(database_url=target, db_pool_min_size=10, db_pool_max_size=10)
        async with create_pool(target, settings) as pool:
            server, port = BareStorage(pool).server()
            await _run(server, port)
        return
    async with open_channel(target) as channel:
        server, port = BareGateway(storage_pb2_grpc.SessionStorageStub(channel)).server()
        await _run(server, port)


async def _run(server: Any, port: int) -> None:
    await server.start()
    print(f"PORT {port}", flush=True)
    await wait_for_stdin_close()
    await server.stop(1)


if __name__ == "__main__":
    assert sys.argv[1] == "serve" and sys.argv[2] in ("storage", "gateway"), sys.argv
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(serve(sys.argv[2], sys.argv[3]))
