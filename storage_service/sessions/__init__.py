"""Sessions: the conversation meta of the `sessions` row that storage reads and writes (DESIGN §3).

The tree creates the row and owns its topology columns; storage writes label, status,
turn_count, last_seq, last_active_at and the turn lease. `repository` reads the meta as every
room reads it.
"""

__all__ = ["repository"]
