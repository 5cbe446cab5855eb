"""Recomputes a session's token columns (migration 0006) from its records, for the tests."""

from __future__ import annotations

import json
import uuid

import asyncpg

from stello.rules.tokens import record_tokens

ROWS = """
SELECT seq, content, tool_calls, token_estimate, token_cumulative
FROM records WHERE space_id = $1 AND session_id = $2 ORDER BY seq
"""
TOTAL = "SELECT token_total FROM sessions WHERE space_id = $1 AND id = $2"


async def token_problems(
    pool: asyncpg.Pool, space_id: uuid.UUID, session_id: uuid.UUID, *, trimmed: bool = False
) -> list[str]:
    """`session_token_problems` on a connection of `pool`."""
    async with pool.acquire() as con:
        return await session_token_problems(con, space_id, session_id, trimmed=trimmed)


async def session_token_problems(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    trimmed: bool = False,
) -> list[str]:
    """What the stored token columns of the session get wrong; [] when they are right.

    Each record's estimate is recomputed from its content and tool calls; each
    cumulative must add the record's estimate to the one before it (to 0 for
    the first record unless the session was `trimmed`); the session's total
    must be the cumulative of its last record, so every tail (total minus a
    cumulative) is the sum of the estimates after it.
    """
    rows = await con.fetch(ROWS, space_id, session_id)
    total = await con.fetchval(TOTAL, space_id, session_id)
    problems: list[str] = []
    previous: int | None = None
    for row in rows:
        calls = json.loads(row["tool_calls"]) if isinstance(row["tool_calls"], str) else None
        calls = calls if calls is not None else (row["tool_calls"] or [])
        expected = record_tokens(row["content"], [(c["name"], c["arguments_json"]) for c in calls])
        if row["token_estimate"] != expected:
            problems.append(f"seq {row['seq']}: estimate {row['token_estimate']} != {expected}")
        before = row["token_cumulative"] - row["token_estimate"]
        if previous is None and not trimmed and before != 0:
            problems.append(f"seq {row['seq']}: the first cumulative starts at {before}")
        if previous is not None and before != previous:
            problems.append(f"seq {row['seq']}: cumulative {before} before it, {previous} stored")
        previous = row["token_cumulative"]
    if previous is not None and total != previous:
        problems.append(f"total {total} != last cumulative {previous}")
    if previous is None and not trimmed and total != 0:
        problems.append(f"total {total} without records")
    return problems
