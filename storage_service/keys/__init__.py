"""Request keys: the `idempotency_keys` rows storage reads and writes (DESIGN §2).

Its own scopes (AppendRecords, Transact, the shared memory writes) and the
callers' (RememberResultOp, read back by GetRememberedResult and BeginTurn).
`repository` runs `stello.stored.idempotency`'s statements on a unit of work; `idempotent`
runs a write at most once per request_id; `wire` checks a request's key and a
remembered result's scope.
"""

__all__ = ["idempotent", "repository", "wire"]
