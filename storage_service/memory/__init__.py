"""Shared memory: a space's entries (`shared_memory`, DESIGN §4.5), listed, read, upserted and
removed. `repository` holds the SQL; `service` the RPCs' behaviour."""

__all__ = ["repository", "service"]
