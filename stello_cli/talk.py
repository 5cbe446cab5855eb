"""send and records: one turn streamed as it arrives, and a session's records.

A turn is stored only when it completes (the gateway commits it at the end of
the stream): interrupting `stello send` with Ctrl-C before that stores
nothing, and the command says so before it exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli import format as fmt
from stello_cli.parser import Commands, session_argument
from stello_cli.sessions import text_argument
from stello_cli.style import Style, write
from stello_client import dicts
from stello_client.connect import Client, gateway
from stello_client.errors import UsageError

NOT_STORED = "interrupted: the turn was not stored (nothing was written; send it again)"
STORED = "interrupted after the turn was stored"
MAX_PAGE = 1000  # the gateway's largest ListRecords limit


@dataclass(slots=True)
class Turn:
    """What a streamed turn has shown so far."""

    done: agent_pb2.SendResponse | None = None
    at_line_start: bool = True


async def stream_turn(
    client: Client,
    session_id: str,
    text: str,
    *,
    as_json: bool = False,
    seconds: float | None = None,
    turn: Turn | None = None,
) -> Turn:
    """One SendStream turn: deltas printed as they arrive, tool calls on their own lines.

    `turn` (when given) is filled as events arrive, so a caller that cancels
    this can tell whether the turn was committed (`done` arrived).
    """
    turn = turn or Turn()
    style = Style.of(sys.stdout)
    request = agent_pb2.SendStreamRequest(
        space_id=client.space_id, session_id=session_id, content=text, request_id=uuid.uuid4().hex
    )
    stream = client.stub.SendStream(request, timeout=seconds, metadata=client.metadata)
    async for event in stream:
        kind = event.WhichOneof("event")
        if kind == "text_delta" and not as_json and event.text_delta.text:
            write(event.text_delta.text, end="")
            turn.at_line_start = event.text_delta.text.endswith("\n")
        elif kind == "tool_call" and not as_json:
            if not turn.at_line_start:
                write()
            call = event.tool_call
            write(style.paint(f"→ {call.name}({call.arguments_json})", "yellow"))
            turn.at_line_start = True
        elif kind == "done":
            turn.done = event.done
    if as_json:
        write(dicts.dumps(dicts.turn_dict(turn.done) if turn.done is not None else None))
        return turn
    if not turn.at_line_start:
        write()
        turn.at_line_start = True
    if turn.done is not None and turn.done.pending_tool_calls:
        names = ", ".join(call.name for call in turn.done.pending_tool_calls)
        write(f"(waiting for tool results: {names})", stream=sys.stderr)
    return turn


async def cmd_send(args: argparse.Namespace) -> int:
    """Send one message and stream the reply; Ctrl-C before the end stores nothing."""
    text = text_argument(args.message)
    async with gateway(args) as client:
        session_id = await client.session(args.session)
        turn = Turn()
        try:
            await stream_turn(
                client,
                session_id,
                text,
                as_json=args.json,
                seconds=args.stream_timeout,
                turn=turn,
            )
        except asyncio.CancelledError:
            if not turn.at_line_start:
                write()
            write(f"stello: {STORED if turn.done else NOT_STORED}", stream=sys.stderr)
            raise
    return 0


async def record_pages(
    client: Client, session_id: str, *, page_size: int = MAX_PAGE, newest: int | None = None
) -> AsyncIterator[list[common_pb2.Record]]:
    """A session's records a page (one call) at a time: oldest first, or with `newest` the
    newest that many, the newest page first (each page chronological)."""
    request = agent_pb2.ListRecordsRequest(
        space_id=client.space_id, session_id=session_id, newest_first=newest is not None
    )
    taken = 0
    while newest is None or taken < newest:
        request.limit = page_size if newest is None else min(page_size, newest - taken)
        reply = await client.call(client.stub.ListRecords, request)
        taken += len(reply.records)
        yield list(reply.records)
        if not reply.next_page_token:
            return
        request.page_token = reply.next_page_token


async def all_records(client: Client, session_id: str) -> list[common_pb2.Record]:
    """Every record of a session, oldest first."""
    return [r async for page in record_pages(client, session_id) for r in page]


async def newest_records(client: Client, session_id: str, count: int) -> list[common_pb2.Record]:
    """The newest `count` records, oldest first."""
    pages = [page async for page in record_pages(client, session_id, newest=count)]
    return [record for page in reversed(pages) for record in page]


async def cmd_records(args: argparse.Namespace) -> int:
    """Show every record of a session page by page, or the newest N with --limit."""
    if not 1 <= args.page_size <= MAX_PAGE:
        raise UsageError(f"--page-size must be between 1 and {MAX_PAGE}")
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must not be negative")
    style = Style.of(sys.stdout)
    async with gateway(args) as client:
        session_id = await client.session(args.session)
        pages = record_pages(client, session_id, page_size=args.page_size, newest=args.limit)
        if args.limit is None and not args.json:
            async for page in pages:  # oldest first: printed as the pages come
                _write_records(page, style)
            return 0
        kept = [page async for page in pages]
    if args.limit is not None:
        kept.reverse()  # newest-first pages, each chronological
    records = [record for page in kept for record in page]
    if args.json:
        write(dicts.dumps([dicts.record_dict(record) for record in records]))
    else:
        _write_records(records, style)
    return 0


def _write_records(records: list[common_pb2.Record], style: Style) -> None:
    for record in records:
        write("\n".join(fmt.record_lines(record, style)))


def register(commands: Commands) -> None:
    """Add send and records."""
    send = commands.client(
        "send",
        cmd_send,
        "send a message; the reply streams as it arrives",
        "Send MESSAGE to SESSION as one turn: the reply streams as the model writes it,\n"
        "and the turn (message and reply) is stored when it completes. Ctrl-C before\n"
        "that stores nothing.",
        flags={"content": "MESSAGE"},
    )
    session_argument(send)
    send.add_argument("message", metavar="MESSAGE", help="the text (- reads it from stdin)")
    send.add_argument(
        "--stream-timeout",
        type=float,
        metavar="S",
        help="seconds the whole turn may take (default: no limit)",
    )
    records = commands.client(
        "records", cmd_records, "show a session's records, oldest first, every page"
    )
    session_argument(records)
    records.add_argument("--limit", type=int, metavar="N", help="only the newest N records")
    records.add_argument(
        "--page-size",
        type=int,
        default=MAX_PAGE,
        metavar="N",
        help=f"records per call (1-{MAX_PAGE}, default {MAX_PAGE})",
    )
