"""The fork guard: the claims the gateway's built-in fork tool takes (STELLO-SPEC §4.11).

Owns the `sessions` row's `last_fork_turn` (DESIGN §4.5). `repository` holds the
SQL; `service` runs ClaimFork and ReleaseForkClaim.
"""

__all__ = ["repository", "service"]
