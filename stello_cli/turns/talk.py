"""send and records: one turn streamed as it arrives, and a session's records.

A turn is stored only when it completes (the gateway commits it at the end of
the stream): interrupting `stello send` with Ctrl-C before that stores
nothing, and the command says so before it exits 130. A stream that fails after
part of the reply was shown ends that line first and says, as its error tells,
whether the turn was stored.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stello_cli.gateway import gateway, session_id
from stello_cli.output import format as fmt
from stello_cli.output.style import Style, short_id, write
from stello_cli.parser import (
    Commands,
    check_count,
    int32,
    seconds,
    session_argument,
    text_argument,
)
from stello_client import dicts
from stello_client.errors import ClientError, own_deadline_line, rpc_error_line

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.exceptions import RpcError
    from stello_client.types import BusyName, Record, SendResponse

NOT_STORED = "interrupted: the turn was not stored (nothing was written; send it again)"
STORED = "interrupted after the turn was stored"
FAILED_NOT_STORED = "the turn was not stored (nothing of it was written)"
NOTHING_WRITTEN = re.compile(r"nothing (of (it|the turn|this turn) )?was (written|stored)")
"""How the gateway's errors say that nothing of a turn was stored."""
FAILED_MAYBE_STORED = (
    "the turn may have been stored (its end was not heard): `stello records {session} "
    "--limit 2` shows whether"
)
RETRY_TO_SETTLE = (
    "the turn may have been stored (its end was not heard): the same command with "
    "--request-id {request_id} answers it if it was, else runs it once"
)
MAX_PAGE = 1000  # the gateway's largest ListRecords limit
EARLY_S = 1.0
"""How long before the call's deadline the gateway may answer DEADLINE_EXCEEDED for it: a
turn waiting in line gives up ANSWER_MARGIN_S (0.5 s) early (agent_gateway.turns.queue)."""


@dataclass(slots=True)
class Turn:
    """What a streamed turn has shown so far."""

    done: SendResponse | None = None
    at_line_start: bool = True
    shown: bool = False
    """Some of the turn (text or a tool call) was shown."""


async def stream_turn(
    client: AsyncClient,
    session: str,
    text: str,
    *,
    as_json: bool = False,
    seconds: float | None = None,
    turn: Turn | None = None,
    busy: BusyName | None = None,
    request_id: str | None = None,
) -> Turn:
    """One SendStream turn: deltas printed as they arrive, tool calls on their own lines.

    `turn` (when given) is filled as events arrive, so a caller that cancels
    this can tell whether the turn was committed (`done` arrived). `busy` is the
    policy while another turn holds the session (None: reject); `request_id` the
    turn's (None: a new one).
    """
    from stello_client.types import TextDelta, ToolCall

    turn = turn or Turn()
    style = Style.of(sys.stdout)
    events = client.stream(session, text, timeout=seconds, busy=busy, request_id=request_id)
    async for event in events:
        if isinstance(event, TextDelta):
            if not as_json and event.text:
                write(event.text, end="")
                turn.at_line_start = event.text.endswith("\n")
                turn.shown = True
        elif isinstance(event, ToolCall):
            if not as_json:
                turn.shown = True
                if not turn.at_line_start:
                    write()
                write(style.paint(f"→ {event.name}({event.arguments_json})", "yellow"))
                turn.at_line_start = True
        else:
            turn.done = event
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


def request_id_text(text: str) -> str:
    """An argparse type: a turn's idempotency key, not empty (an empty one made a new id,
    so the command run again ran the turn twice)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "must not be empty: give the turn's id, or leave the flag out for a new one"
        )
    return text


def failed_turn(error: RpcError, session: str, request_id: str | None = None) -> str:
    """Whether a turn whose stream failed is stored, as its error tells: an error the
    gateway answered wrote nothing, except OUTCOME_UNKNOWN; a lost connection, a cancel
    or a deadline may have come once the commit was sent (then a retry with the turn's
    `request_id` settles it, when the command takes one; else its records tell), unless
    the gateway's words say nothing was written (a deadline that passed in line)."""
    import grpc

    from stello import reasons

    unheard = (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED)
    if error.reason != reasons.OUTCOME_UNKNOWN and NOTHING_WRITTEN.search(error.details):
        return FAILED_NOT_STORED  # the gateway answered, saying so (a turn left its line)
    if (
        error.reason == reasons.OUTCOME_UNKNOWN
        or error.code in unheard
        or (error.code == grpc.StatusCode.UNAVAILABLE and error.reason is None)
    ):
        if request_id is not None:
            return RETRY_TO_SETTLE.format(request_id=request_id)
        return FAILED_MAYBE_STORED.format(session=short_id(session))
    return FAILED_NOT_STORED


def with_outcome(line: str, outcome: str) -> str:
    """A failed turn's `line` and whether it was stored (`failed_turn`), unless the
    gateway's own words already say that nothing of it was written."""
    if outcome == FAILED_NOT_STORED and NOTHING_WRITTEN.search(line):
        return line
    return f"{line}; {outcome}"


def end_shown_line(turn: Turn) -> None:
    """End the line a partly shown reply left open, so what follows starts on its own."""
    if not turn.at_line_start:
        write()
        turn.at_line_start = True


async def cmd_send(args: argparse.Namespace) -> int:
    """Send one message and stream the reply; Ctrl-C before the end stores nothing."""
    from stello import reasons
    from stello_client.calls import new_request_id
    from stello_client.exceptions import RpcError

    text = text_argument(args.message)
    request_id = args.request_id or new_request_id()
    async with gateway(args) as client:
        session = await session_id(client, args.session)
        turn = Turn()
        began = time.monotonic()
        try:
            await stream_turn(
                client,
                session,
                text,
                as_json=args.json,
                seconds=args.stream_timeout,
                turn=turn,
                busy=args.busy,
                request_id=request_id,
            )
        except asyncio.CancelledError:
            end_shown_line(turn)
            write(f"stello: {STORED if turn.done else NOT_STORED}", stream=sys.stderr)
            raise
        except RpcError as exc:
            outcome = failed_turn(exc, session, request_id)
            # Only the command's own deadline (in gRPC's words, or the gateway's once it had
            # passed: a call that came too late): a bound of the gateway's keeps its words.
            own = _own_deadline(exc, args.stream_timeout, time.monotonic() - began)
            if not turn.shown and outcome == FAILED_NOT_STORED and not own:
                raise
            end_shown_line(turn)
            if exc.reason == reasons.OUTCOME_UNKNOWN:  # the gateway's words say it again
                raise ClientError(outcome) from exc
            line = rpc_error_line(exc, client.gateway, args.flags)
            if own:
                line = own_deadline_line(
                    "the turn did not end", args.stream_timeout, "--stream-timeout"
                )
            raise ClientError(with_outcome(line, outcome)) from exc
    return 0


def _own_deadline(exc: RpcError, timeout_s: float | None, waited_s: float) -> bool:
    """Whether a failed turn ran out of the command's own `timeout_s` (--stream-timeout): the
    SDK saw it pass (`timeout_s` on the error), or the gateway answered DEADLINE_EXCEEDED in
    its own words once it had passed (`waited_s`: the call began too late for it), or just
    before (a wait in the session's line ends EARLY_S before the deadline, so that the
    gateway's answer comes before gRPC's)."""
    if timeout_s is None:
        return False
    if getattr(exc, "timeout_s", None) is not None:
        return True
    # by name: `stello --help` and `--version` import no grpc (tests/cli/test_startup.py)
    return exc.code.name == "DEADLINE_EXCEEDED" and waited_s >= timeout_s - EARLY_S


async def all_records(client: AsyncClient, session: str) -> list[Record]:
    """Every record of a session, oldest first."""
    return [record async for record in client.records(session)]


async def newest_records(client: AsyncClient, session: str, count: int) -> list[Record]:
    """The newest `count` records, oldest first."""
    newest = [record async for record in client.records(session, newest_first=True, limit=count)]
    return newest[::-1]


async def cmd_records(args: argparse.Namespace) -> int:
    """Show every record of a session page by page, or the newest N with --limit."""
    check_count("--page-size", args.page_size, MAX_PAGE)
    check_count("--limit", args.limit, instead="leave it out for every record")
    style = Style.of(sys.stdout)
    async with gateway(args) as client:
        session = await session_id(client, args.session)
        walk = client.records(
            session, newest_first=args.limit is not None, limit=args.limit, page_size=args.page_size
        )
        if args.limit is None and not args.json:
            async for record in walk:  # oldest first: printed as the pages come
                _write_records([record], style)
            return 0
        records = [record async for record in walk]
    if args.limit is not None:
        records.reverse()  # newest first: shown oldest first
    if args.json:
        write(dicts.dumps([dicts.record_dict(record) for record in records]))
    else:
        _write_records(records, style)
    return 0


def _write_records(records: list[Record], style: Style) -> None:
    for record in records:
        write("\n".join(fmt.record_lines(record, style)))


BUSY_POLICIES = ("reject", "enqueue", "interrupt", "rollback")


def busy_argument(parser: argparse.ArgumentParser) -> None:
    """--busy: what a turn does while another holds its session (DESIGN §4.2)."""
    parser.add_argument(
        "--busy",
        choices=BUSY_POLICIES,
        help="while another turn runs on the session: reject (the default: refused), "
        "enqueue (wait in line, then run), interrupt or rollback (stop it, run this)",
    )


def register(commands: Commands) -> None:
    """Add send and records."""
    send = commands.client(
        "send",
        cmd_send,
        "send a message; the reply streams as it arrives",
        "Send MESSAGE to SESSION as one turn: the reply streams as the model writes it,\n"
        "and the turn (message and reply) is stored when it completes. Ctrl-C before\n"
        "that stores nothing.",
        flags={"content": "MESSAGE", "busy": "--busy", "request_id": "--request-id"},
    )
    session_argument(send)
    send.add_argument("message", metavar="MESSAGE", help="the text (- reads it from stdin)")
    send.add_argument(
        "--stream-timeout",
        type=seconds,
        metavar="S",
        help="seconds the whole turn may take (default: no limit)",
    )
    send.add_argument(
        "--request-id",
        type=request_id_text,
        metavar="ID",
        help="the turn's idempotency key (default: a new one): the same command again with "
        "the same ID within 24 h answers the stored turn instead of running it twice",
    )
    busy_argument(send)
    records = commands.client(
        "records", cmd_records, "show a session's records, oldest first, every page"
    )
    session_argument(records)
    records.add_argument("--limit", type=int32, metavar="N", help="only the newest N records")
    records.add_argument(
        "--page-size",
        type=int,
        default=MAX_PAGE,
        metavar="N",
        help=f"records per call (1-{MAX_PAGE}, default {MAX_PAGE})",
    )
