"""Sessions: the conversation meta of the `sessions` row (DESIGN §3).

The tree creates the row and owns its topology; storage writes label and status
here (the other storage columns belong to `records`, `turns` and `guard`).
`repository` reads the row as every room reads it (`meta_of`, `session_event`)
and locks it for Transact; `service` runs GetSession, PutSession and ListSessions;
`wire` checks the session a request names, a status and a put's meta.
"""

__all__ = ["repository", "service", "wire"]
