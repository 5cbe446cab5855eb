"""Small builders and probes shared by the storage tests."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2

USER = common_pb2.RECORD_ROLE_USER
ASSISTANT = common_pb2.RECORD_ROLE_ASSISTANT
TOOL = common_pb2.RECORD_ROLE_TOOL
SYSTEM = common_pb2.RECORD_ROLE_SYSTEM


def rec(content: str, role: int = USER, **fields: Any) -> common_pb2.Record:
    """A record to append; `role` is a raw number (tests pass unknown ones on purpose, which
    the generated stub's RecordRole type does not admit)."""
    return common_pb2.Record(role=role, content=content, **fields)  # type: ignore[arg-type]


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """Await a call that must fail and return its error."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


STATE = """
SELECT s.label, s.status, s.turn_count, s.last_seq, s.turn_token, s.updated_at,
       (SELECT count(*) FROM records r WHERE r.space_id = $1 AND r.session_id = $2)
           AS records,
       sl.system_prompt, sl.insight, sl.memory, c.summary, c.covered_until_seq
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = $1 AND sl.session_id = $2
LEFT JOIN (
    SELECT summary, covered_until_seq FROM compression_caches c
    WHERE c.space_id = $1 AND c.session_id = $2
    ORDER BY covered_until_seq DESC LIMIT 1
) c ON true
WHERE s.space_id = $1 AND s.id = $2
"""


async def state(pool: asyncpg.Pool, space_id: uuid.UUID, session_id: uuid.UUID) -> dict[str, Any]:
    """Everything the storage service may change about one session, read by SQL."""
    async with pool.acquire() as con:
        row = await con.fetchrow(STATE, space_id, session_id)
    assert row is not None
    return dict(row)
