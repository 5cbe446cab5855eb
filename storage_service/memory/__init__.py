"""Shared memory: a space's entries (`shared_memory`, DESIGN §4.5).

`repository` holds the SQL; `service` runs ListSharedMemory, GetSharedMemoryEntry,
UpsertSharedMemoryEntry and RemoveSharedMemoryEntry.
"""

__all__ = ["repository", "service"]
