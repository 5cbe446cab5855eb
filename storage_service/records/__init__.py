"""Records: a session's conversation rows and the view it reads them through (DESIGN §3, §4.4).

Owns `records`, `record_segments` and `session_lineages`, and the row's `last_seq`
and `token_total` that an append counts under the session's row lock.
`repository` appends, pages, trims and probes the token columns; `lineage` gives
a new session another's records by reference (InheritRecordsOp); `pages` binds
ListRecords page tokens to their query; `service` runs AppendRecords,
ListRecords and TrimRecords; `wire` checks a record's role, ListRecords' query and
a trim's count.
"""

__all__ = ["lineage", "pages", "repository", "service", "wire"]
