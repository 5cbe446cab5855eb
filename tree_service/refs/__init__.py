"""Refs: a session's references to others of its space (`session_refs`, DESIGN §2).

Owns AddRef and RemoveRef: a ref goes last in its from-session's order, never to
itself, an ancestor or a descendant. `repository` holds their SQL; `service` checks
and runs each in one unit of work.
"""

__all__ = ["repository", "service"]
