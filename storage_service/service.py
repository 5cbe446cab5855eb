"""The conversation store's domain logic, over the repository; knows nothing of gRPC.

Every method takes the tenant space explicitly. Reads answer NotFound for a
session that is absent or provisional; writes accept provisional sessions
(DESIGN §4.1). request_id idempotency stores the encoded reply in the same
transaction as the work, through a `Codec` the composition root supplies.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from typing import Generic, Protocol, TypeVar

from stello.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted
from stello.idempotency import Answered, answer_of
from storage_service.models import (
    SLOT_NAMES,
    CompressionCache,
    Idempotency,
    MetaUpdate,
    NewRecord,
    RecordPage,
    RecordQuery,
    RememberedResult,
    SessionMeta,
    SessionPage,
    SessionSlots,
    SlotName,
    Status,
    StoredRecord,
    TurnBudget,
    TurnKey,
    TurnLease,
    TurnStart,
    TurnState,
    session_not_found,
)
from storage_service.records import pages
from storage_service.records.repository import Database, Repository
from storage_service.transact.operations import Operation, OperationResult, Precondition
from storage_service.transact.service import lease_token, run_transact
from storage_service.turns.window import read_turn

T = TypeVar("T")

TURN_IN_PROGRESS = "TURN_IN_PROGRESS"
APPEND_SCOPE = "storage.AppendRecords"
TRANSACT_SCOPE = "storage.Transact"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Codec(Protocol[T]):
    """Turns a reply into the bytes an idempotency key keeps, and back."""

    def encode(self, value: T) -> bytes:
        """The stored form of `value`."""
        ...

    def decode(self, data: bytes) -> T:
        """The value `encode` stored."""
        ...


class Codecs(Protocol):
    """The reply codecs of the two idempotent calls."""

    @property
    def records(self) -> Codec[tuple[StoredRecord, ...]]:
        """AppendRecords' reply."""
        ...

    @property
    def results(self) -> Codec[tuple[OperationResult, ...]]:
        """Transact's reply."""
        ...


class Idempotent(Generic[T]):
    """Runs work at most once per request_id: the work, then its key in the same
    transaction (one insert); an earlier call's live key answers instead (the work rolled
    back), and a failing work answers it too when there is one (stello.idempotency)."""

    def __init__(self, scope: str, codec: Codec[T]) -> None:
        self._scope = scope
        self._codec = codec

    async def run(
        self,
        db: Database,
        space_id: uuid.UUID,
        key: Idempotency,
        work: Callable[[Repository], Awaitable[T]],
    ) -> T:
        """`work` in one transaction, at most once for `key`; its result or the first one's.

        Raises:
            AlreadyExists: the request_id was used for a different request.
        """

        async def once(repo: Repository) -> T:
            result = await work(repo)
            encoded = self._codec.encode(result)
            await repo.remember_or_answer(
                space_id, self._scope, key.request_id, key.request_hash, encoded
            )
            return result

        try:
            return await db.transaction(once)
        except Answered as answered:
            return self._codec.decode(answered.response)
        except (NotFound, FailedPrecondition, Aborted):
            # A retry whose work can no longer succeed (a precondition its first call
            # changed, a session gone since) still gets the first call's answer.
            entry = await db.statement(
                lambda repo: repo.stored(space_id, self._scope, key.request_id)
            )
            if entry is None:
                raise
            return self._codec.decode(answer_of(entry, key.request_id, key.request_hash))


def _lease(
    session_id: uuid.UUID, token: uuid.UUID, found: bool, expires_at: datetime | None
) -> TurnLease:
    """The lease BeginTurn's statement took; NotFound or Aborted TURN_IN_PROGRESS."""
    if not found:
        raise session_not_found(session_id)
    if expires_at is None:
        raise Aborted(
            f"session {session_id} has a turn in progress; retry after it ends",
            reason=TURN_IN_PROGRESS,
        )
    return TurnLease(token, expires_at)


def _page_token(space_id: uuid.UUID, status: Status | None, last: SessionMeta) -> str:
    micros = (last.created_at - _EPOCH) // timedelta(microseconds=1)
    payload = {"space": str(space_id), "status": status or "", "at": micros, "id": str(last.id)}
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def _parse_page_token(
    token: str, space_id: uuid.UUID, status: Status | None
) -> tuple[datetime, uuid.UUID]:
    try:
        padded = token + "=" * (-len(token) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if payload["space"] != str(space_id) or payload["status"] != (status or ""):
            raise ValueError("issued for another space or filter")
        return _EPOCH + timedelta(microseconds=int(payload["at"])), uuid.UUID(payload["id"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidArgument.field(
            "page_token", "was not issued by ListSessions for this space and status filter"
        ) from exc


class StorageService:
    """SessionStorage's behaviour (DESIGN §2, STELLO-SPEC §2 with DESIGN §5's overrides)."""

    def __init__(
        self, db: Database, codecs: Codecs, *, max_reply_bytes: int, max_page_bytes: int
    ) -> None:
        self._db = db
        self._append_once = Idempotent(APPEND_SCOPE, codecs.records)
        self._transact_once = Idempotent(TRANSACT_SCOPE, codecs.results)
        self._max_reply_bytes = max_reply_bytes
        self._max_page_bytes = min(max_page_bytes, max_reply_bytes // 2)

    async def get_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionMeta:
        """The meta of a visible session."""
        meta = await self._db.statement(lambda repo: repo.get_session(space_id, session_id))
        if meta is None:
            raise session_not_found(session_id)
        return meta

    async def get_session_with_slots(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slots: AbstractSet[SlotName]
    ) -> tuple[SessionMeta, SessionSlots]:
        """The meta of a visible session and its `slots` (the others None), one statement."""
        found = await self._db.statement(
            lambda repo: repo.get_session_with_slots(space_id, session_id, slots)
        )
        if found is None:
            raise session_not_found(session_id)
        return found

    async def put_session(self, space_id: uuid.UUID, update: MetaUpdate) -> SessionMeta:
        """Replace label and status of an existing session (never creates one)."""
        meta = await self._db.transaction(lambda repo: repo.put_session(space_id, update))
        if meta is None:
            raise session_not_found(update.session_id)
        return meta

    async def list_sessions(
        self, space_id: uuid.UUID, status: Status | None, page_size: int, page_token: str
    ) -> SessionPage:
        """One page of visible sessions by (created_at, id)."""
        after = _parse_page_token(page_token, space_id, status) if page_token else None
        rows = await self._db.statement(
            lambda repo: repo.list_sessions(space_id, status, after, page_size + 1)
        )
        page = tuple(rows[:page_size])
        more = len(rows) > page_size
        return SessionPage(page, _page_token(space_id, status, page[-1]) if more else "")

    async def append_records(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        records: Sequence[NewRecord],
        key: Idempotency | None = None,
    ) -> tuple[StoredRecord, ...]:
        """Append atomically with the next contiguous seqs; answers the stored records."""

        async def append(repo: Repository, alone: bool = False) -> tuple[StoredRecord, ...]:
            if not records:
                if not await repo.session_exists(space_id, session_id):
                    raise session_not_found(session_id)
                return ()
            stored = await repo.append_records(space_id, session_id, records, alone=alone)
            if stored is None:
                raise session_not_found(session_id)
            return stored

        if key is None:  # one statement, its event included: no BEGIN/COMMIT round trips
            return await self._db.statement(lambda repo: append(repo, alone=True))
        return await self._append_once.run(self._db, space_id, key, append)

    async def list_records(
        self, space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery
    ) -> RecordPage:
        """One page of the records `query` selects (ascending seq), bounded in count and bytes."""
        walk = (
            pages.resume(space_id, session_id, query, query.page_token)
            if query.page_token
            else query
        )
        found = await self._db.statement(
            lambda repo: repo.list_records(space_id, session_id, walk, self._max_page_bytes)
        )
        if found is None:
            raise session_not_found(session_id)
        records, more = found
        if not more:
            return RecordPage(tuple(records), "")
        position = records[0].seq if query.newest_first else records[-1].seq
        token = pages.next_token(space_id, session_id, query, position)
        return RecordPage(tuple(records), token)

    async def trim_records(
        self, space_id: uuid.UUID, session_id: uuid.UUID, keep_recent: int
    ) -> int:
        """Keep the newest `keep_recent` records; clears the cache when any went."""

        async def trim(repo: Repository) -> int:
            if not await repo.lock_sessions(space_id, [session_id]):
                raise session_not_found(session_id)
            return await repo.trim_records(space_id, session_id, keep_recent)

        return await self._db.transaction(trim)

    async def get_slot(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slot: SlotName
    ) -> str | None:
        """One slot of a visible session; None = unset."""
        slots = await self._db.statement(lambda repo: repo.get_slots(space_id, session_id))
        if slots is None:
            raise session_not_found(session_id)
        return slots.get(slot)

    async def put_slot(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slot: SlotName, content: str
    ) -> None:
        """Overwrite one slot ("" is a stored value)."""
        await self._db.transaction(lambda repo: repo.put_slot(space_id, session_id, slot, content))

    async def get_memory(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[str | None, int | None]:
        """The memory slot of a visible session and the seq it covers (None = unset)."""
        slots = await self._db.statement(lambda repo: repo.get_slots(space_id, session_id))
        if slots is None:
            raise session_not_found(session_id)
        return slots.memory, slots.memory_covered_until_seq

    async def put_memory(
        self, space_id: uuid.UUID, session_id: uuid.UUID, content: str, covered: int | None
    ) -> None:
        """Overwrite the memory; with `covered`, the seq it covers too."""
        if covered is None:
            await self.put_slot(space_id, session_id, "memory", content)
            return
        await self._db.transaction(
            lambda repo: repo.put_memory_covering(space_id, session_id, content, covered)
        )

    async def clear_insight(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Delete the insight; a no-op when there is none."""
        if not await self._db.transaction(lambda repo: repo.clear_insight(space_id, session_id)):
            raise session_not_found(session_id)

    async def consume_insight(self, space_id: uuid.UUID, session_id: uuid.UUID) -> str | None:
        """Read and clear the insight atomically (of concurrent callers one gets it)."""

        async def consume(repo: Repository) -> str | None:
            visible, insight = await repo.lock_insight(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            if insight is None:
                return None
            if len(insight.encode()) + 16 > self._max_reply_bytes:
                raise ResourceExhausted(
                    "the insight exceeds the reply size limit (STELLO_MAX_MESSAGE_BYTES); "
                    "it was not cleared"
                )
            await repo.clear_insight(space_id, session_id)
            return insight

        return await self._db.transaction(consume)

    async def get_compression_cache(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        at_or_below: int | None = None,
        complete_only: bool = False,
    ) -> CompressionCache | None:
        """The newest summary of a visible session (at or below a seq, complete if asked);
        None = none."""
        visible, cache = await self._db.statement(
            lambda repo: repo.get_cache(space_id, session_id, at_or_below, complete_only)
        )
        if not visible:
            raise session_not_found(session_id)
        return cache

    async def put_compression_cache(
        self, space_id: uuid.UUID, session_id: uuid.UUID, cache: CompressionCache
    ) -> None:
        """Overwrite the compression cache."""
        await self._db.statement(lambda repo: repo.put_cache(space_id, session_id, cache))

    async def batch_get_slots(
        self,
        space_id: uuid.UUID,
        session_ids: Sequence[uuid.UUID],
        slots: AbstractSet[SlotName] = frozenset(SLOT_NAMES),
    ) -> list[SessionSlots]:
        """`slots` of the visible sessions among `session_ids`, request order, each once."""
        unique = list(dict.fromkeys(session_ids))
        if not unique:
            return []
        found = await self._db.statement(lambda repo: repo.batch_get_slots(space_id, unique, slots))
        return [found[session_id] for session_id in unique if session_id in found]

    async def begin_turn(self, space_id: uuid.UUID, session_id: uuid.UUID, ttl_s: int) -> TurnLease:
        """Take the turn lease for `ttl_s` seconds; Aborted while another lives."""
        token = uuid.uuid4()
        found, expires_at = await self._db.statement(
            lambda repo: repo.begin_turn(space_id, session_id, token, ttl_s)
        )
        return _lease(session_id, token, found, expires_at)

    async def start_turn(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        ttl_s: int,
        key: TurnKey | None,
        budget: TurnBudget | None,
    ) -> TurnStart:
        """BeginTurn with a request_id or a window, in one transaction (see the proto): a
        remembered entry first; with a window, NotFound for a provisional session, no lease
        for an archived one, else the lease and the turn read under the session's lock."""

        async def start(repo: Repository) -> TurnStart:
            if key is not None:
                found = await repo.remembered(space_id, key.scope, key.request_id)
                if found is not None:
                    return TurnStart(remembered=found)
            if budget is None:
                return TurnStart(lease=await take(repo))
            locked = await repo.lock_turn(space_id, session_id)
            if locked is None or not locked.visible:
                raise session_not_found(session_id)
            if locked.meta.status == "archived":
                state = TurnState(
                    locked.meta, locked.last_seq, locked.system_prompt, locked.insight, None
                )
                return TurnStart(state=state)
            lease = await take(repo)
            state = await read_turn(
                repo, space_id, session_id, locked, budget, self._max_page_bytes
            )
            return TurnStart(lease=lease, state=state)

        async def take(repo: Repository) -> TurnLease:
            token = uuid.uuid4()
            found, expires_at = await repo.begin_turn(space_id, session_id, token, ttl_s)
            return _lease(session_id, token, found, expires_at)

        return await self._db.transaction(start)

    async def release_turn(self, space_id: uuid.UUID, session_id: uuid.UUID, token: str) -> bool:
        """End the lease if `token` holds it; whether a live lease was ended."""
        found, released = await self._db.statement(
            lambda repo: repo.release_turn(space_id, session_id, lease_token(token))
        )
        if not found:
            raise session_not_found(session_id)
        return released

    async def renew_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: str, ttl_s: int
    ) -> datetime | None:
        """Extend the lease `token` holds to `ttl_s` from now; its new expiry, or None when
        the token no longer holds it (released, or taken by another turn)."""
        found, expires_at = await self._db.statement(
            lambda repo: repo.renew_turn(space_id, session_id, lease_token(token), ttl_s)
        )
        if not found:
            raise session_not_found(session_id)
        return expires_at

    async def transact(
        self,
        space_id: uuid.UUID,
        preconditions: Sequence[Precondition],
        operations: Sequence[Operation],
        key: Idempotency | None = None,
    ) -> tuple[OperationResult, ...]:
        """All preconditions, then all operations, in one transaction: all or nothing."""

        async def work(repo: Repository) -> tuple[OperationResult, ...]:
            return await run_transact(repo, space_id, preconditions, operations)

        if key is None:
            return await self._db.transaction(work)
        return await self._transact_once.run(self._db, space_id, key, work)

    async def get_remembered_result(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> RememberedResult | None:
        """The entry a RememberResultOp stored under (space, scope, request_id); None if none."""
        return await self._db.statement(lambda repo: repo.remembered(space_id, scope, request_id))
