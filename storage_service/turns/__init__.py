"""Turns: the turn lease and BeginTurn's answer (DESIGN §4.2, §4.3).

Owns the `sessions` row's lease (`turn_token`, `turn_expires_at`) and turn
columns (`turn_count`, `last_active_at`). `repository` holds their SQL and
BeginTurn's locked read of the row; `window` picks the newest records within the
caller's budget; `service` runs BeginTurn, RenewTurn and ReleaseTurn.
"""

__all__ = ["repository", "service", "window"]
