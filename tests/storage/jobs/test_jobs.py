"""ClaimJob, RenewJob and the job's Transact checks: one run per (session, kind) (DESIGN §4.8)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations, precondition_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.conftest import StubFor
from tests.storage.helpers import rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
Check = storage_pb2.Precondition
CONSOLIDATE = common_pb2.JOB_KIND_CONSOLIDATE
FOLD = common_pb2.JOB_KIND_FOLD

EXPIRE = """
UPDATE background_jobs SET expires_at = now() - interval '1 second'
WHERE space_id = $1 AND session_id = $2
"""


async def claim(
    stub: Stub, space: TestSpace, session: uuid.UUID, kind: int = CONSOLIDATE, ttl_s: int = 30
) -> storage_pb2.ClaimJobResponse:
    """ClaimJob."""
    reply: storage_pb2.ClaimJobResponse = await stub.ClaimJob(
        storage_pb2.ClaimJobRequest(
            space_id=space.sid,
            session_id=str(session),
            kind=kind,  # type: ignore[arg-type]
            ttl_s=ttl_s,
        )
    )
    return reply


def update_op(
    session: uuid.UUID, token: str, covered: int, *, release: bool = False, status: int = 0
) -> storage_pb2.Operation:
    """An UpdateJobOp of the consolidation job."""
    return Op(
        update_job=Op.UpdateJobOp(
            session_id=str(session),
            kind=CONSOLIDATE,
            token=token,
            covered_until_seq=covered,
            model_calls=2,
            tokens=40,
            release=release,
            status=status,  # type: ignore[arg-type]
        )
    )


def job_check(session: uuid.UUID, token: str) -> storage_pb2.Precondition:
    """A BackgroundJobCheck of the consolidation job."""
    return Check(
        background_job=Check.BackgroundJobCheck(
            session_id=str(session), kind=CONSOLIDATE, token=token
        )
    )


async def transact(
    stub: Stub,
    space: TestSpace,
    ops: list[storage_pb2.Operation],
    checks: list[storage_pb2.Precondition] | None = None,
) -> storage_pb2.TransactResponse:
    """Transact."""
    reply: storage_pb2.TransactResponse = await stub.Transact(
        storage_pb2.TransactRequest(space_id=space.sid, operations=ops, preconditions=checks or [])
    )
    return reply


async def memory(stub: Stub, space: TestSpace, session: uuid.UUID) -> storage_pb2.GetMemoryResponse:
    """GetMemory."""
    reply: storage_pb2.GetMemoryResponse = await stub.GetMemory(
        storage_pb2.GetMemoryRequest(space_id=space.sid, session_id=str(session))
    )
    return reply


async def put_memory(
    stub: Stub, space: TestSpace, session: uuid.UUID, content: str, covered: int | None = None
) -> None:
    """PutMemory."""
    request = storage_pb2.PutMemoryRequest(
        space_id=space.sid, session_id=str(session), content=content
    )
    if covered is not None:
        request.covered_until_seq = covered
    await stub.PutMemory(request)


class TestClaims:
    async def test_one_claim_at_a_time(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Of 20 concurrent claims of one job exactly one is granted; the others see it
        running; a job of another kind is claimed independently."""
        session = await make_session()
        replies = await asyncio.gather(*(claim(stub, space, session) for _ in range(20)))
        granted = [r for r in replies if r.granted]
        assert len(granted) == 1 and granted[0].token
        assert granted[0].job.status == common_pb2.JOB_STATUS_RUNNING and granted[0].job.claimed
        refused = [r for r in replies if not r.granted]
        assert all(not r.token and r.job.claimed and r.job.runs == 1 for r in refused)
        assert (await claim(stub, space, session, FOLD)).granted

    async def test_an_expired_claim_is_taken_over_with_its_progress(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A claim past its expiry (its gateway died) is granted to the next run, which keeps
        the progress saved so far; the dead run's token then renews and saves nothing."""
        session = await make_session()
        first = await claim(stub, space, session)
        await transact(stub, space, [update_op(session, first.token, 7)])
        assert not (await claim(stub, space, session)).granted
        await pool.execute(EXPIRE, space.id, session)
        second = await claim(stub, space, session)
        assert second.granted and second.token != first.token
        job = second.job
        assert (job.covered_until_seq, job.runs, job.model_calls, job.tokens) == (7, 2, 0, 0)
        renewed = await stub.RenewJob(
            storage_pb2.RenewJobRequest(
                space_id=space.sid,
                session_id=str(session),
                kind=CONSOLIDATE,
                token=first.token,
                ttl_s=30,
            )
        )
        assert not renewed.renewed
        late = await transact(stub, space, [update_op(session, first.token, 9)])
        assert not late.results[0].update_job.updated

    async def test_renew_keeps_an_expired_claim_nobody_took(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A renewal after the expiry, before anyone took the job, keeps the claim live."""
        session = await make_session()
        first = await claim(stub, space, session)
        await pool.execute(EXPIRE, space.id, session)
        renewed = await stub.RenewJob(
            storage_pb2.RenewJobRequest(
                space_id=space.sid,
                session_id=str(session),
                kind=CONSOLIDATE,
                token=first.token,
                ttl_s=30,
            )
        )
        assert renewed.renewed and renewed.HasField("expires_at")
        assert not (await claim(stub, space, session)).granted

    async def test_release_ends_the_run(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """An UpdateJobOp with release stores the run's status and frees the job at once;
        the covered seq never goes down."""
        session = await make_session()
        first = await claim(stub, space, session)
        await transact(stub, space, [update_op(session, first.token, 5)])
        reply = await transact(
            stub,
            space,
            [
                update_op(
                    session, first.token, 3, release=True, status=common_pb2.JOB_STATUS_BUDGET_SPENT
                )
            ],
        )
        assert reply.results[0].update_job.updated
        view = await stub.GetSession(
            storage_pb2.GetSessionRequest(
                space_id=space.sid, session_id=str(session), progress=True
            )
        )
        (job,) = view.progress.jobs
        assert (job.status, job.covered_until_seq, job.claimed) == (
            common_pb2.JOB_STATUS_BUDGET_SPENT,
            5,
            False,
        )
        assert (job.model_calls, job.tokens) == (2, 40)
        assert (await claim(stub, space, session)).granted

    async def test_a_saved_progress_needs_the_claim(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A save checked by BackgroundJobCheck with a token that lost the job is ABORTED and
        writes nothing (the memory stays as the new run left it)."""
        session = await make_session()
        first = await claim(stub, space, session)
        await pool.execute(EXPIRE, space.id, session)
        await claim(stub, space, session)
        put = Op(
            put_memory=Op.PutMemoryOp(session_id=str(session), content="stale", covered_until_seq=4)
        )
        error = await rpc_error(
            transact(
                stub,
                space,
                [put, update_op(session, first.token, 4)],
                [job_check(session, first.token)],
            )
        )
        assert error.code() is grpc.StatusCode.ABORTED
        assert [v.type for v in precondition_violations(error)] == ["background_job"]
        assert not (await memory(stub, space, session)).HasField("content")

    async def test_job_rows_go_with_their_session(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Deleting the session deletes its job rows."""
        session = await make_session()
        await claim(stub, space, session)
        await pool.execute(
            "DELETE FROM sessions WHERE space_id = $1 AND id = $2", space.id, session
        )
        left = await pool.fetchval(
            "SELECT count(*) FROM background_jobs WHERE space_id = $1", space.id
        )
        assert left == 0


class TestRetriedClaim:
    async def test_a_claim_with_its_token_is_granted_again(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """ClaimJob with the token of the live claim (a retry after a lost reply) is granted
        again, the same run, not a new one; another token is refused meanwhile (on main: the
        retry was refused by its own claim, and the job blocked until it expired)."""
        session = await make_session()
        token = str(uuid.uuid4())
        request = storage_pb2.ClaimJobRequest(
            space_id=space.sid, session_id=str(session), kind=CONSOLIDATE, ttl_s=30, token=token
        )
        first = await stub.ClaimJob(request)
        again = await stub.ClaimJob(request)
        assert first.granted and again.granted
        assert first.token == again.token == token
        assert (
            again.job.runs == 1 and again.expires_at.ToDatetime() >= first.expires_at.ToDatetime()
        )
        other = await stub.ClaimJob(
            storage_pb2.ClaimJobRequest(
                space_id=space.sid,
                session_id=str(session),
                kind=CONSOLIDATE,
                ttl_s=30,
                token=str(uuid.uuid4()),
            )
        )
        assert not other.granted and not other.token

    async def test_a_token_that_is_not_a_uuid_is_named(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A malformed token is INVALID_ARGUMENT naming `token`."""
        session = await make_session()
        error = await rpc_error(
            stub.ClaimJob(
                storage_pb2.ClaimJobRequest(
                    space_id=space.sid,
                    session_id=str(session),
                    kind=CONSOLIDATE,
                    ttl_s=30,
                    token="nope",
                )
            )
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["token"]


async def orphans(stub: Stub, limit: int = 0) -> list[tuple[str, str, int, int]]:
    """ListOrphanedJobs as (space, session, kind, status)."""
    reply = await stub.ListOrphanedJobs(storage_pb2.ListOrphanedJobsRequest(limit=limit))
    return [(o.space_id, o.session_id, o.kind, o.job.status) for o in reply.jobs]


class TestOrphans:
    async def test_expired_and_stopped_runs_are_listed(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """An expired claim and a run STOPPED by a shutdown are left without a gateway; a
        live claim, a finished run and a session being erased are not. STOPPED first."""
        running = common_pb2.JOB_STATUS_RUNNING
        stopped = common_pb2.JOB_STATUS_STOPPED
        live, expired, ended, halted, erased = [await make_session() for _ in range(5)]
        for session in (live, expired, erased):
            await claim(stub, space, session)
        await pool.execute(EXPIRE, space.id, expired)
        await pool.execute(EXPIRE, space.id, erased)
        done = await claim(stub, space, ended)
        await transact(
            stub,
            space,
            [update_op(ended, done.token, 1, release=True, status=common_pb2.JOB_STATUS_DONE)],
        )
        cut = await claim(stub, space, halted, FOLD)
        stop = Op(
            update_job=Op.UpdateJobOp(
                session_id=str(halted), kind=FOLD, token=cut.token, release=True, status=stopped
            )
        )
        await transact(stub, space, [stop])
        await pool.execute(
            "UPDATE sessions SET provisional_until = 'infinity' WHERE space_id = $1 AND id = $2",
            space.id,
            erased,
        )
        assert await orphans(stub) == [
            (space.sid, str(halted), FOLD, stopped),
            (space.sid, str(expired), CONSOLIDATE, running),
        ]
        assert await orphans(stub, limit=1) == [(space.sid, str(halted), FOLD, stopped)]
        assert (await claim(stub, space, expired)).granted
        assert await orphans(stub) == [(space.sid, str(halted), FOLD, stopped)]

    async def test_a_tenant_key_sees_its_space_an_admin_key_every_space(
        self,
        stub: Stub,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        admin_key: str,
        make_session: MakeSession,
        pool: asyncpg.Pool,
    ) -> None:
        """A tenant key lists its own space's orphaned jobs only; an admin key both."""
        mine = await make_session()
        theirs = await make_session(space_id=other_space.id)
        await claim(stub, space, mine)
        await claim(stub_for(other_space.key), other_space, theirs)
        await pool.execute(EXPIRE, space.id, mine)
        await pool.execute(EXPIRE, other_space.id, theirs)
        assert [o[1] for o in await orphans(stub)] == [str(mine)]
        assert [o[1] for o in await orphans(stub_for(other_space.key))] == [str(theirs)]
        everywhere = {o[1] for o in await orphans(stub_for(admin_key), limit=1000)}
        assert {str(mine), str(theirs)} <= everywhere

    async def test_the_limit_is_checked(self, stub: Stub) -> None:
        """A limit outside 0..1000 is INVALID_ARGUMENT naming `limit`."""
        error = await rpc_error(
            stub.ListOrphanedJobs(storage_pb2.ListOrphanedJobsRequest(limit=1001))
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["limit"]


class TestValidation:
    @pytest.mark.parametrize(
        ("request_", "field"),
        [
            pytest.param(storage_pb2.ClaimJobRequest(ttl_s=5), "kind", id="claim-without-kind"),
            pytest.param(
                storage_pb2.ClaimJobRequest(kind=CONSOLIDATE, ttl_s=0), "ttl_s", id="claim-ttl"
            ),
            pytest.param(
                storage_pb2.RenewJobRequest(kind=FOLD, ttl_s=5), "token", id="renew-token"
            ),
        ],
    )
    async def test_fields_are_named(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        request_: storage_pb2.ClaimJobRequest | storage_pb2.RenewJobRequest,
        field: str,
    ) -> None:
        """A claim without a kind, a TTL out of range, a renewal without a token are
        INVALID_ARGUMENT naming the field."""
        request_.space_id = space.sid
        request_.session_id = str(await make_session())
        call = stub.ClaimJob if isinstance(request_, storage_pb2.ClaimJobRequest) else stub.RenewJob
        error = await rpc_error(call(request_))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]

    async def test_unknown_session(self, stub: Stub, space: TestSpace) -> None:
        """A claim on a session that does not exist is NOT_FOUND."""
        error = await rpc_error(claim(stub, space, uuid.uuid4()))
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_release_needs_a_final_status(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """An UpdateJobOp with release and no final status is INVALID_ARGUMENT."""
        session = await make_session()
        error = await rpc_error(
            transact(stub, space, [update_op(session, str(uuid.uuid4()), 1, release=True)])
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["operations[0].update_job.status"]


async def with_records(stub: Stub, space: TestSpace, session: uuid.UUID, count: int) -> None:
    """Append `count` records (a memory covers seqs that exist)."""
    await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(
            space_id=space.sid, session_id=str(session), records=[rec("x")] * count
        )
    )


class TestMemoryVersion:
    async def test_every_write_counts(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The memory's version is 0 until written, then one more per write, by PutMemory
        (with or without a covered seq) and by Transact's PutMemoryOp."""
        session = await make_session()
        await with_records(stub, space, session, 3)
        assert (await memory(stub, space, session)).version == 0
        await put_memory(stub, space, session, "a")
        await put_memory(stub, space, session, "b", covered=3)
        await transact(
            stub, space, [Op(put_memory=Op.PutMemoryOp(session_id=str(session), content="c"))]
        )
        got = await memory(stub, space, session)
        assert (got.content, got.covered_until_seq, got.version) == ("c", 3, 3)

    async def test_a_put_made_meanwhile_wins(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A save checked against the version it read fails ABORTED once a put landed, and
        the put's memory stays."""
        session = await make_session()
        await with_records(stub, space, session, 4)
        await put_memory(stub, space, session, "consolidated", covered=2)
        read = await memory(stub, space, session)
        await put_memory(stub, space, session, "the user's")
        save = Op(
            put_memory=Op.PutMemoryOp(session_id=str(session), content="new", covered_until_seq=4)
        )
        check = Check(
            memory_version=Check.MemoryVersionCheck(session_id=str(session), expected=read.version)
        )
        error = await rpc_error(transact(stub, space, [save], [check]))
        assert error.code() is grpc.StatusCode.ABORTED
        assert [v.type for v in precondition_violations(error)] == ["memory_version"]
        assert (await memory(stub, space, session)).content == "the user's"

    async def test_the_covered_seq_never_goes_down(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A memory covering less than the stored one is ABORTED CONCURRENT_MODIFICATION and
        writes nothing (before migration 0012 the last writer won, whatever it covered)."""
        session = await make_session()
        await with_records(stub, space, session, 9)
        await put_memory(stub, space, session, "through 9", covered=9)
        error = await rpc_error(put_memory(stub, space, session, "through 4", covered=4))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "CONCURRENT_MODIFICATION"
        got = await memory(stub, space, session)
        assert (got.content, got.covered_until_seq) == ("through 9", 9)
        await put_memory(stub, space, session, "through 9 again", covered=9)

    async def test_a_memory_covers_no_seq_past_the_last(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A covered seq beyond the session's last is OUT_OF_RANGE naming it (in Transact,
        by its path), and nothing is written: a memory covering 2^63-1 was stored, and
        no later consolidation could ever cover the session's new records."""
        session = await make_session()
        await with_records(stub, space, session, 3)
        await put_memory(stub, space, session, "through 3", covered=3)
        error = await rpc_error(put_memory(stub, space, session, "beyond", covered=2**63 - 1))
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE
        assert [v.field for v in field_violations(error)] == ["covered_until_seq"]
        save = Op(
            put_memory=Op.PutMemoryOp(
                session_id=str(session), content="beyond", covered_until_seq=4
            )
        )
        error = await rpc_error(transact(stub, space, [save]))
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE
        fields = [v.field for v in field_violations(error)]
        assert fields == ["operations[0].put_memory.covered_until_seq"]
        got = await memory(stub, space, session)
        assert (got.content, got.covered_until_seq, got.version) == ("through 3", 3, 1)


class TestProgress:
    async def test_how_far_summaries_and_memory_cover(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """GetSession with progress answers the last seq, the newest summary (lossy), the
        newest complete one (kept beside it with keep_newer) and the memory's seq."""
        session = await make_session()
        sid = str(session)
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid, session_id=sid, records=[rec("x")] * 30
            )
        )
        lossy = storage_pb2.CompressionCache(summary="lossy", covered_until_seq=25, lossy=True)
        await stub.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(space_id=space.sid, session_id=sid, cache=lossy)
        )
        complete = storage_pb2.CompressionCache(summary="part", covered_until_seq=10)
        put = Op.PutCompressionCacheOp(session_id=sid, cache=complete, keep_newer=True)
        await transact(stub, space, [Op(put_compression_cache=put)])
        await put_memory(stub, space, session, "m", covered=20)
        reply = await stub.GetSession(
            storage_pb2.GetSessionRequest(
                space_id=space.sid,
                session_id=sid,
                progress=True,
                slots=[storage_pb2.SLOT_KIND_MEMORY],
            )
        )
        progress = reply.progress
        assert (progress.last_seq, progress.summary_covered_until_seq, progress.summary_lossy) == (
            30,
            25,
            True,
        )
        assert progress.complete_summary_covered_until_seq == 10
        assert (progress.memory_covered_until_seq, progress.memory_version) == (20, 1)
        assert reply.slots.memory == "m" and list(progress.jobs) == []
