"""Rows that belong to a session, written by SQL as the storage service would."""

from __future__ import annotations

import uuid

import asyncpg

OWNED_TABLES = (
    "records",
    "session_slots",
    "compression_caches",
    "session_configs",
    "session_metadata",
)


async def give_belongings(pool: asyncpg.Pool, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
    """One record, one slot row, a compression cache, a config and a metadata pair for the
    session."""
    async with pool.acquire() as con, con.transaction():
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content, token_estimate,"
            " token_cumulative) VALUES ($1, $2, 1, 'user', 'hello', 2, 2)",
            space_id,
            session_id,
        )
        await con.execute(
            "INSERT INTO session_slots (space_id, session_id, memory) VALUES ($1, $2, 'm')",
            space_id,
            session_id,
        )
        await con.execute(
            "INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq)"
            " VALUES ($1, $2, 's', 1)",
            space_id,
            session_id,
        )
        await con.execute(
            "INSERT INTO session_configs (space_id, session_id, config) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            space_id,
            session_id,
            {"system_prompt": "p"},
        )
        await con.execute(
            "INSERT INTO session_metadata (space_id, session_id, key, value, created_at)"
            " VALUES ($1, $2, 'owner', 'alice', now()) ON CONFLICT DO NOTHING",
            space_id,
            session_id,
        )


async def belongings(pool: asyncpg.Pool, space_id: uuid.UUID, session_id: uuid.UUID) -> int:
    """How many rows of the owned tables belong to the session."""
    async with pool.acquire() as con:
        total = 0
        for table in OWNED_TABLES:
            total += int(
                await con.fetchval(
                    f"SELECT count(*) FROM {table} WHERE space_id = $1 AND session_id = $2",
                    space_id,
                    session_id,
                )
            )
        return total
