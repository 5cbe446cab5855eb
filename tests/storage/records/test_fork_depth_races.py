"""Forks, deletes, trims and turns at once on one deep chain of forks (DESIGN §4.4, issue
#34): every call answers OK or NOT_FOUND (a fork of a session deleted meanwhile), never a
deadlock, and afterwards every session shows what it showed before the race (a suffix of
it when trimmed, its own appends after it), a fork a prefix of its source's records."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.records.lineage import SEGMENT_CAP
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, end_turn, inherit, listed, trim
from tests.storage.turns.test_turn_window import begin
from tests.support.fixtures import MakeSession, TestSpace
from tests.tree.conftest import erased
from tree_service.app import create_service

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


def shown(records: list[Any]) -> list[tuple[int, str]]:
    return [(r.seq, r.content) for r in records]


async def test_forks_deletes_trims_and_turns_at_once_on_a_deep_chain(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    rng = random.Random(7)
    chain = [await make_session()]
    await append(stub, space, chain[0], rec("root 1"), rec("root 2"))
    for level in range(40):  # past the cap: the later forks compact
        child = await make_session()
        await inherit(stub, space, child, chain[-1])
        await append(stub, space, child, rec(f"level {level}"))
        chain.append(child)
    before = {sid: shown(await listed(stub, space, sid)) for sid in chain}
    tree = create_service(pool)
    deleted = set(rng.sample(chain[1:-1], 8))
    trimmed = set(rng.sample([s for s in chain if s not in deleted], 6))
    turned = [s for s in chain if s not in deleted and s not in trimmed][-4:]
    forks: dict[uuid.UUID, uuid.UUID] = {}

    async def fork(source: uuid.UUID) -> None:
        await asyncio.sleep(rng.random() * 0.02)
        child = await make_session()
        try:
            await inherit(stub, space, child, source)
        except grpc.aio.AioRpcError as error:
            assert error.code() is grpc.StatusCode.NOT_FOUND, error.details()
            assert source in deleted
        else:
            forks[child] = source

    async def delete(sid: uuid.UUID) -> None:
        await asyncio.sleep(rng.random() * 0.02)
        await tree.erasure.delete_subtree(space.id, sid)
        await erased(pool)

    async def cut(sid: uuid.UUID) -> None:
        await asyncio.sleep(rng.random() * 0.02)
        await trim(stub, space, sid, rng.randint(1, 20))

    async def turn(sid: uuid.UUID) -> None:
        await asyncio.sleep(rng.random() * 0.02)
        await end_turn(stub, space, await begin(stub, space, sid, window=200))
        await append(stub, space, sid, rec(f"turn of {sid}"))

    sources = [s for s in chain if s not in trimmed and s not in turned]
    calls = [
        *(fork(rng.choice(sources)) for _ in range(12)),
        *(delete(s) for s in deleted),
        *(cut(s) for s in trimmed),
        *(turn(s) for s in turned),
    ]
    rng.shuffle(calls)
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert [o for o in outcomes if o is not None] == []
    await erased(pool)
    for sid in chain:
        if sid in deleted:
            continue
        now = shown(await listed(stub, space, sid))
        if sid in trimmed:
            assert now == before[sid][len(before[sid]) - len(now) :], sid
        elif sid in turned:
            assert now == [*before[sid], (len(before[sid]) + 1, f"turn of {sid}")], sid
        else:
            assert now == before[sid], sid
    for child, source in forks.items():
        assert shown(await listed(stub, space, child)) == before[source], child
    async with pool.acquire() as con:
        most = await con.fetchval(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM record_segments WHERE space_id = $1"
            " GROUP BY session_id) c",
            space.id,
        )
        left = await con.fetchval(
            "SELECT count(*) FROM records WHERE space_id = $1 AND session_id = ANY ($2::uuid[])",
            space.id,
            list(deleted),
        )
    assert most <= SEGMENT_CAP and left == 0
