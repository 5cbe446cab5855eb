"""Text search over records and session labels (SearchRecords, SearchSessions; migration 0019)."""
