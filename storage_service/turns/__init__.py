"""Turns: the turn lease and BeginTurn's locked read of a session with its window (DESIGN §4.2,
§4.3). `repository` holds the lease and the row's turn columns; `window` picks the newest
records within the caller's budget."""

__all__ = ["repository", "window"]
