"""Text search over records and session labels (SearchRecords, SearchSessions; migration 0019).

Reads `records.search_vector` and the labels' index; owns `search_backfill` (migration
0035: `backfill` recomputes the vectors of records written before it and each later change
of them, its SQL in `backfill_repository`). `query` turns the
user's text into a tsquery that can never be a syntax error (`letters` the accented letters
it reads as base letters, as migration 0042 does), `highlight` marks the matches in a
snippet, `symbols` the emoji and symbols it reads as terms of their own (migration 0043),
`stop_words` the common English words no record's vector holds (none is marked),
`repository` holds the SQL, `service` runs the two RPCs and `wire` checks their scope, order
and page size.
"""

__all__ = [
    "backfill",
    "backfill_repository",
    "highlight",
    "letters",
    "query",
    "repository",
    "service",
    "stop_words",
    "symbols",
    "wire",
]
