"""Turns: the turn lease and BeginTurn's answer (DESIGN §4.2, §4.3).

Owns the `sessions` row's lease (`turn_token`, `turn_expires_at`, the token an
INTERRUPT stopped) and turn columns (`turn_count`, `last_active_at`), and the
line of ENQUEUE turns (`turn_waiters`). `repository` holds the row's SQL and
BeginTurn's locked read of it; `waiters` the line's SQL and `line` who of it
may start; `window` picks the newest records within the caller's budget;
`service` runs BeginTurn, RenewTurn, ReleaseTurn and LeaveTurnQueue; `wire` checks
BeginTurn's key, window and busy policy.
"""

__all__ = ["line", "repository", "service", "waiters", "window", "wire"]
