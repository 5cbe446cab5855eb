"""At most once per request_id: the work, then its key, in one transaction (DESIGN §2).

The key costs one statement after the work (`remember_new`); when an earlier
call's key is live the work rolls back and that call's reply answers. A work
that fails (a precondition its first call changed, a session gone since) looks
the key up before answering the error, so a retry still gets the first answer.
Replies are stored encoded, by a `Codec` the composition root supplies, and
linked to the sessions whose data they hold (erased with any of them, DESIGN
§4.8: a replay then answers NOT_FOUND).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from stello.errors import Aborted, FailedPrecondition, NotFound
from stello.stored.idempotency import Answered, answer_of
from storage_service.models import Idempotency
from storage_service.unit import Database, UnitOfWork

T = TypeVar("T")


class Codec(Protocol[T]):
    """Turns a reply into the bytes an idempotency key keeps, and back."""

    def encode(self, value: T) -> bytes:
        """The stored form of `value`."""
        ...

    def decode(self, data: bytes) -> T:
        """The value `encode` stored."""
        ...


class Idempotent(Generic[T]):
    """Runs work at most once per request_id: the work, then its key in the same
    transaction (one insert); an earlier call's live key answers instead (the work rolled
    back), and a failing work answers it too when there is one (stello.stored.idempotency)."""

    def __init__(self, scope: str, codec: Codec[T]) -> None:
        self._scope = scope
        self._codec = codec

    async def run(
        self,
        db: Database,
        space_id: uuid.UUID,
        key: Idempotency,
        work: Callable[[UnitOfWork], Awaitable[T]],
        sessions: Sequence[uuid.UUID] = (),
        link: Callable[[UnitOfWork, T], Awaitable[None]] | None = None,
    ) -> T:
        """`work` in one transaction, at most once for `key`; its result or the first one's.
        The reply is linked to `sessions` (those whose data it holds), and `link` runs once
        it is stored (in the transaction: to link it to other data it holds).

        Raises:
            AlreadyExists: the request_id was used for a different request.
            NotFound: the first call's session was erased since (its reply with it).
        """

        async def once(uow: UnitOfWork) -> T:
            result = await work(uow)
            encoded = self._codec.encode(result)
            await uow.keys.remember_or_answer(
                space_id, self._scope, key.request_id, key.request_hash, encoded, sessions
            )
            if link is not None:
                await link(uow, result)
            return result

        try:
            return await db.transaction(once)
        except Answered as answered:
            return self._codec.decode(answered.response)
        except (NotFound, FailedPrecondition, Aborted):
            # A retry whose work can no longer succeed (a precondition its first call
            # changed, a session gone since) still gets the first call's answer.
            entry = await db.statement(
                lambda uow: uow.keys.stored(space_id, self._scope, key.request_id)
            )
            if entry is None:
                raise
            return self._codec.decode(answer_of(entry, key.request_id, key.request_hash))
