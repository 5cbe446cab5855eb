"""Slots: a session's system prompt, insight and memory, and its compression cache (DESIGN §3).

Owns `session_slots` and `compression_caches`. `repository` holds the slots' SQL,
`caches` the cache's; `service` runs the Get/Put slot RPCs, ClearInsight,
ConsumeInsight, Get/PutCompressionCache and BatchGetSlots; `wire` checks which
slots of which sessions a read asks for.
"""

__all__ = ["caches", "repository", "service", "wire"]
