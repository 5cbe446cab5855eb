"""`stello watch`: the space's changes as they commit (WatchSpace, DESIGN §4.6).

One command group of its own: the connection comes from the same flags,
environment and saved credentials as every client command. The SDK's watch
resumes from its last cursor when the gateway restarts, and the command keeps
calling through an outage of up to `RIDE_OUT_S` (not the few tries of the other
commands), so a long `stello watch` loses and repeats nothing across a restart.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stello.common.v1 import common_pb2
from stello_cli.gateway import RETRY_ATTEMPTS, gateway
from stello_cli.output.style import write
from stello_cli.parser import Commands, check_count
from stello_client import dicts

if TYPE_CHECKING:  # the SDK (and grpc) load when the command connects
    from stello_client.calls import Retry

HELP = "stream the space's changes as they commit (Ctrl-C stops)"
RIDE_OUT_S = 60.0
"""How long a watch keeps calling through an outage (a gateway restarting) before it fails."""


def register(commands: Commands) -> None:
    """Add watch."""
    watch = commands.client("watch", cmd_watch, HELP, flags={"after_cursor": "--after"})
    watch.add_argument(
        "--after", type=cursor, metavar="CURSOR", help="resume after this cursor (default: now)"
    )
    watch.add_argument("--count", type=int, metavar="N", help="stop after N events")


def cursor(text: str) -> str:
    """An argparse type: a cursor as `stello watch` prints them (a whole number), checked
    here: the gateway's refusal named its API (WatchSpace, SpaceEvent.cursor)."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_CURSOR_DIGITS:
        return text
    raise argparse.ArgumentTypeError(
        f"expected a cursor: the number a `stello watch` line starts with (`cursor` with "
        f"--json), got {text!r}"
    )


MAX_CURSOR_DIGITS = 18
"""The longest cursor the gateway takes (agent_gateway.servicer.watch)."""


def event_dict(event: common_pb2.SpaceEvent) -> dict[str, Any]:
    """An event as JSON: cursor, kind (lower case, no prefix) and the ids and seqs it names."""
    data: dict[str, Any] = {
        "cursor": event.cursor,
        "kind": common_pb2.EventKind.Name(event.kind).removeprefix("EVENT_KIND_").lower(),
        "session_id": event.session_id,
    }
    if event.HasField("other_session_id"):
        data["other_session_id"] = event.other_session_id
    if event.HasField("first_seq"):
        data["first_seq"], data["last_seq"] = event.first_seq, event.last_seq
    if event.session_ids:
        data["session_ids"] = list(event.session_ids)
    if event.HasField("entry_id"):
        data["entry_id"] = event.entry_id
    return data


def event_line(event: common_pb2.SpaceEvent) -> str:
    """An event as one line: `CURSOR kind SESSION [seq A-B] [-> OTHER] [N sessions]`, or
    `CURSOR kind ENTRY_ID` for a shared memory entry."""
    data = event_dict(event)
    parts = [data["cursor"], data["kind"], data.get("entry_id") or data["session_id"]]
    if "first_seq" in data:
        parts.append(f"seq {data['first_seq']}-{data['last_seq']}")
    if "other_session_id" in data:
        parts.append(f"-> {data['other_session_id']}")
    if "session_ids" in data:
        parts.append(f"({len(data['session_ids'])} sessions)")
    return " ".join(parts)


async def cmd_watch(args: argparse.Namespace) -> int:
    """Print each event of the space as it commits, after --after (default: from now)."""
    check_count("--count", args.count, instead="leave it out to watch until Ctrl-C")
    seen = 0
    async with (
        gateway(args) as client,
        client.using(retry=riding_out()).watch(after_cursor=args.after) as events,
    ):
        async for event in events:
            write(dicts.dumps(event_dict(event)) if args.json else event_line(event))
            seen += 1
            if args.count is not None and seen >= args.count:
                break
    return 0


def riding_out() -> Retry:
    """The watch's retries: a command's few tries (`RETRY_ATTEMPTS`), then on through an
    outage up to `RIDE_OUT_S` (a gateway restarting, a rollout), so a long watch loses and
    repeats nothing across one; the first call (the space settled) reports an absent
    gateway at once, as every command does."""
    from stello_client.calls import Retry

    return Retry(attempts=RETRY_ATTEMPTS, unavailable_for_s=RIDE_OUT_S)
