"""Sessions: where a session id is born and what its row says (DESIGN §2, §4.1).

Owns CreateSession (a root or a child, visible at once or provisional, under a
request_id), CommitSession, the status (archive, unarchive), the label, the
metadata pairs (`session_metadata`) and the per-session config
(`session_configs`). `repository` holds their SQL; `service` runs each in one
unit of work.
"""

__all__ = ["repository", "service"]
