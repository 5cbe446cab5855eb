"""`stello watch`: the space's changes as they commit (WatchSpace, DESIGN §4.6).

Kept apart from `stello.client_cli` so the command is one module: the
connection comes from the same flags, environment and saved credentials.
"""

from __future__ import annotations

import argparse
from typing import Any

import grpc

from stello import client_format as fmt
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from stello.client_cli import ClientError, resolve_target, write
from stello.common.v1 import common_pb2

HELP = "stream the space's changes as they commit (Ctrl-C stops)"


def add_watch_command(command: Any) -> None:
    """Register `stello watch` with the client commands' `command` helper."""
    watch = command("watch", cmd_watch, HELP)
    watch.add_argument("--after", metavar="CURSOR", help="resume after this cursor (default: now)")
    watch.add_argument("--count", type=int, metavar="N", help="stop after N events")


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
    return data


def event_line(event: common_pb2.SpaceEvent) -> str:
    """An event as one line: `CURSOR kind SESSION [seq A-B] [-> OTHER] [N sessions]`."""
    data = event_dict(event)
    parts = [data["cursor"], data["kind"], data["session_id"]]
    if "first_seq" in data:
        parts.append(f"seq {data['first_seq']}-{data['last_seq']}")
    if "other_session_id" in data:
        parts.append(f"-> {data['other_session_id']}")
    if "session_ids" in data:
        parts.append(f"({len(data['session_ids'])} sessions)")
    return " ".join(parts)


async def cmd_watch(args: argparse.Namespace) -> int:
    """Print each event of the space as it commits, after --after (default: from now)."""
    target = resolve_target(args)
    request = agent_pb2.WatchSpaceRequest(space_id=target.space_id)
    if args.after is not None:
        request.after_cursor = args.after
    seen = 0
    async with open_channel(target.gateway, tls=target.tls) as channel:
        stub = agent_pb2_grpc.AgentGatewayStub(channel)
        try:
            async for message in stub.WatchSpace(request, metadata=target.metadata):
                write(
                    fmt.dumps(event_dict(message.event)) if args.json else event_line(message.event)
                )
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        except grpc.aio.AioRpcError as err:
            raise ClientError(fmt.rpc_error_line(err, target.gateway)) from None
    return 0
