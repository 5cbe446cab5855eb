"""Domain values from the rows the storage repositories read."""

from __future__ import annotations

import asyncpg

from storage_service.models import SessionMeta


def meta_of(row: asyncpg.Record) -> SessionMeta:
    """A session's meta from a row holding its columns (every repository reads them so)."""
    return SessionMeta(
        id=row["id"],
        label=row["label"],
        status=row["status"],
        turn_count=row["turn_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_active_at=row["last_active_at"],
    )
