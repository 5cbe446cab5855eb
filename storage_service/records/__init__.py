"""Records: a session's conversation rows and its view through a lineage (DESIGN §3, §4.4).

Owns `records`, `record_segments` and `session_lineages`. `repository` appends, pages and
trims records; `lineage` gives a new session another's records by reference; `pages` binds
ListRecords page tokens to the query that started the walk.
"""

__all__ = ["lineage", "pages", "repository"]
