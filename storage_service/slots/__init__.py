"""Slots: a session's system prompt, insight and memory (`session_slots`) and its compression
cache (`compression_caches`), DESIGN §3."""

__all__ = ["repository"]
