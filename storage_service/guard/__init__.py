"""The fork guard: the claims the gateway's built-in fork tool takes, counted in
`sessions.last_fork_turn` (STELLO-SPEC §4.11, DESIGN §4.5)."""

__all__ = ["repository", "service"]
