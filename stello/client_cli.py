"""The `stello` client commands: root, fork, send, chat, tree, digests, records, reconcile.

They talk to a running gateway (the tree service for `reconcile`) with the
endpoint and key `stello up` saved; ``--gateway``/``--key``/``--space`` or
``STELLO_GATEWAY``/``STELLO_KEY``/``STELLO_SPACE_ID`` override them. ``--ca-file``
(``STELLO_CA_FILE``) turns TLS on, ``--cert-file``/``--key-file`` add a client
certificate (mutual TLS); `stello up` itself is plaintext. Output is
readable text, or JSON with ``--json``. A failed call is one line on stderr
(status code and details) and a non-zero exit, raised here as `ClientError`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from stello import client_format as fmt
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import ClientTls, bearer_metadata, open_channel
from stello.common.v1 import common_pb2
from stello.up import Credentials, load_credentials

CONTEXTS = {
    "unspecified": common_pb2.FORK_CONTEXT_UNSPECIFIED,
    "none": common_pb2.FORK_CONTEXT_NONE,
    "inherit": common_pb2.FORK_CONTEXT_INHERIT,
    "compress": common_pb2.FORK_CONTEXT_COMPRESS,
}
MAX_RECORDS_PAGE = 1000  # the gateway's largest ListRecords limit

STATUSES = {
    "all": common_pb2.SESSION_STATUS_UNSPECIFIED,
    "active": common_pb2.SESSION_STATUS_ACTIVE,
    "archived": common_pb2.SESSION_STATUS_ARCHIVED,
}


class ClientError(Exception):
    """Raised when a client command cannot do its work; the message is the one line shown."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a client command connects, as whom, and over TLS or not (`tls` None)."""

    gateway: str
    key: str
    space_id: str
    tls: ClientTls | None = None

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Per-call metadata with the key.

        Passed on every call: `open_channel(key=...)` authenticates unary calls only
        (grpc.aio files its one interceptor object under unary-unary alone).
        """
        return bearer_metadata(self.key)


def _pick(flag: str | None, env: str, saved: str | None) -> str:
    return flag or os.environ.get(env, "").strip() or (saved or "")


def resolve_target(args: argparse.Namespace) -> Target:
    """Flags first, then the environment, then what `stello up` saved."""
    saved: Credentials | None = load_credentials()
    gateway = _pick(args.gateway, "STELLO_GATEWAY", saved.gateway if saved else None)
    key = _pick(args.key, "STELLO_KEY", saved.key if saved else None)
    space = _pick(args.space, "STELLO_SPACE_ID", saved.space_id if saved else None)
    for value, what, flag, env in (
        (gateway, "gateway address", "--gateway", "STELLO_GATEWAY"),
        (key, "API key", "--key", "STELLO_KEY"),
        (space, "space id", "--space", "STELLO_SPACE_ID"),
    ):
        if not value:
            raise ClientError(f"no {what}: run `stello up` first, or pass {flag} / set {env}")
    return Target(gateway, key, space, resolve_tls(args))


def resolve_tls(args: argparse.Namespace) -> ClientTls | None:
    """TLS from the flags, else the environment; None (plaintext) without a CA file.

    Raises:
        ClientError: a certificate without its key, or without a CA file.
        stello.errors.FailedPrecondition: a file cannot be read.
    """
    ca = _pick(args.ca_file, "STELLO_CA_FILE", None)
    cert = _pick(args.cert_file, "STELLO_CERT_FILE", None)
    key = _pick(args.key_file, "STELLO_KEY_FILE", None)
    if bool(cert) != bool(key):
        raise ClientError(
            "a client certificate needs its private key: pass both --cert-file and --key-file "
            "(STELLO_CERT_FILE, STELLO_KEY_FILE), or neither"
        )
    if cert and not ca:
        raise ClientError(
            "--cert-file needs --ca-file (STELLO_CA_FILE): the CA that verifies the server"
        )
    server_name = _pick(getattr(args, "server_name", None), "STELLO_SERVER_NAME", None)
    if server_name and not ca:
        raise ClientError(
            "--server-name needs --ca-file (STELLO_CA_FILE): it is checked against the "
            "server's certificate"
        )
    return ClientTls.from_files(ca, cert or None, key or None, server_name or None) if ca else None


def write(text: str = "", *, end: str = "\n", stream: Any = None) -> None:
    """Write `text` and flush (deltas show as they arrive)."""
    out = stream or sys.stdout
    out.write(text + end)
    out.flush()


def _vars(pairs: list[str] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ClientError(f"--var wants NAME=VALUE, got {pair!r}")
        result[name] = value
    return result


Work = Callable[[agent_pb2_grpc.AgentGatewayStub, Target], Awaitable[int]]


async def _with_gateway(args: argparse.Namespace, work: Work) -> int:
    target = resolve_target(args)
    async with open_channel(target.gateway, tls=target.tls) as channel:
        try:
            return await work(agent_pb2_grpc.AgentGatewayStub(channel), target)
        except grpc.aio.AioRpcError as err:
            raise ClientError(fmt.rpc_error_line(err, target.gateway)) from None


def _show_session(args: argparse.Namespace, session: common_pb2.SessionSummary) -> None:
    if args.json:
        write(fmt.dumps(fmt.session_dict(session)))
    elif args.quiet:
        write(session.id)
    else:
        for line in fmt.session_lines(session):
            write(line)


async def cmd_root(args: argparse.Namespace) -> int:
    """Create a root session."""

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        request = agent_pb2.CreateRootRequest(
            space_id=target.space_id, profile_vars=_vars(args.var), request_id=uuid.uuid4().hex
        )
        if args.label is not None:
            request.label = args.label
        if args.system_prompt is not None:
            request.system_prompt = args.system_prompt
        if args.profile is not None:
            request.profile = args.profile
        reply = await stub.CreateRoot(request, timeout=args.timeout, metadata=target.metadata)
        _show_session(args, reply.session)
        return 0

    return await _with_gateway(args, work)


async def cmd_fork(args: argparse.Namespace) -> int:
    """Fork a session into a new child."""

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        request = agent_pb2.ForkRequest(
            space_id=target.space_id,
            source_session_id=args.source,
            label=args.label,
            profile_vars=_vars(args.var),
            context=CONTEXTS[args.context or "unspecified"],
            request_id=uuid.uuid4().hex,
        )
        for field, value in (
            ("topology_parent_id", args.parent),
            ("profile", args.profile),
            ("system_prompt", args.system_prompt),
            ("inherit_until_seq", args.up_to),
            ("prompt", args.prompt),
        ):
            if value is not None:
                setattr(request, field, value)
        reply = await stub.Fork(request, timeout=args.timeout, metadata=target.metadata)
        _show_session(args, reply.session)
        return 0

    return await _with_gateway(args, work)


async def _stream_turn(
    stub: agent_pb2_grpc.AgentGatewayStub, target: Target, args: argparse.Namespace, text: str
) -> None:
    """One SendStream turn: deltas printed as they arrive (or the final turn as JSON)."""
    request = agent_pb2.SendStreamRequest(
        space_id=target.space_id,
        session_id=args.session,
        content=text,
        request_id=uuid.uuid4().hex,
    )
    at_line_start = True
    done: agent_pb2.SendResponse | None = None
    async for event in stub.SendStream(
        request, timeout=args.stream_timeout, metadata=target.metadata
    ):
        kind = event.WhichOneof("event")
        if kind == "text_delta" and not args.json and event.text_delta.text:
            write(event.text_delta.text, end="")
            at_line_start = event.text_delta.text.endswith("\n")
        elif kind == "tool_call" and not args.json:
            if not at_line_start:
                write()
            write(f"→ {event.tool_call.name}({event.tool_call.arguments_json})")
            at_line_start = True
        elif kind == "done":
            done = event.done
    if args.json:
        write(fmt.dumps(fmt.turn_dict(done) if done is not None else None))
        return
    if not at_line_start:
        write()
    if done is not None and done.pending_tool_calls:
        names = ", ".join(call.name for call in done.pending_tool_calls)
        write(f"(waiting for tool results: {names})", stream=sys.stderr)


async def cmd_send(args: argparse.Namespace) -> int:
    """Send one message and stream the reply."""
    text = sys.stdin.read() if args.message == "-" else args.message

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        await _stream_turn(stub, target, args, text)
        return 0

    return await _with_gateway(args, work)


async def _stdin_lines() -> AsyncIterator[str]:
    """Lines of stdin, read by a daemon thread so Ctrl-C never waits for a pending read."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed first
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="stello-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


async def cmd_chat(args: argparse.Namespace) -> int:
    """Talk to a session line by line until EOF or /quit."""
    interactive = sys.stdin.isatty()

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        failed = 0
        if interactive:
            write(f"chatting with {args.session} (/quit or Ctrl-D to leave)")
            write("> ", end="")
        async for line in _stdin_lines():
            text = line.strip()
            if text in ("/quit", "/exit"):
                break
            if text:
                try:
                    await _stream_turn(stub, target, args, text)
                except grpc.aio.AioRpcError as err:
                    failed += 1
                    write(f"stello: {fmt.rpc_error_line(err, target.gateway)}", stream=sys.stderr)
            if interactive:
                write("> ", end="")
        return 1 if failed else 0

    return await _with_gateway(args, work)


async def cmd_tree(args: argparse.Namespace) -> int:
    """Show the forest as an indented tree."""

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        request = agent_pb2.GetTreeRequest(space_id=target.space_id)
        if args.root is not None:
            request.root_id = args.root
        if args.depth is not None:
            request.max_depth = args.depth
        reply = await stub.GetTree(request, timeout=args.timeout, metadata=target.metadata)
        if args.json:
            write(fmt.dumps([fmt.node_dict(node) for node in reply.nodes]))
        elif not reply.nodes:
            write("no sessions yet: create one with `stello root`")
        else:
            write("\n".join(fmt.tree_lines(reply.nodes)))
        return 0

    return await _with_gateway(args, work)


async def cmd_digests(args: argparse.Namespace) -> int:
    """List every session's digest, all pages."""

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        digests: list[common_pb2.SessionDigest] = []
        token = ""
        while True:
            reply = await stub.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=target.space_id,
                    status=STATUSES[args.status],
                    page_size=1000,
                    page_token=token,
                ),
                timeout=args.timeout,
                metadata=target.metadata,
            )
            digests.extend(reply.digests)
            token = reply.next_page_token
            if not token:
                break
        if args.json:
            write(fmt.dumps([fmt.digest_dict(digest) for digest in digests]))
        else:
            for digest in digests:
                write("\n".join(fmt.digest_lines(digest)))
        return 0

    return await _with_gateway(args, work)


async def cmd_records(args: argparse.Namespace) -> int:
    """Show every record of a session page by page, or the newest N with --limit."""
    if not 1 <= args.page_size <= MAX_RECORDS_PAGE:
        raise ClientError(f"--page-size must be between 1 and {MAX_RECORDS_PAGE}")
    if args.limit is not None and args.limit < 0:
        raise ClientError("--limit must not be negative")

    async def work(stub: agent_pb2_grpc.AgentGatewayStub, target: Target) -> int:
        newest = args.limit is not None
        request = agent_pb2.ListRecordsRequest(
            space_id=target.space_id, session_id=args.session, newest_first=newest
        )
        pages: list[list[common_pb2.Record]] = []
        taken = 0
        while not newest or taken < args.limit:
            request.limit = min(args.page_size, args.limit - taken) if newest else args.page_size
            reply = await stub.ListRecords(request, timeout=args.timeout, metadata=target.metadata)
            taken += len(reply.records)
            if newest or args.json:
                pages.append(list(reply.records))
            else:
                _write_records(reply.records)  # oldest first: printed as the pages come
            if not reply.next_page_token:
                break
            request.page_token = reply.next_page_token
        if newest:
            pages.reverse()  # newest-first pages, each chronological
        kept = [record for page in pages for record in page]
        if args.json:
            write(fmt.dumps([fmt.record_dict(record) for record in kept]))
        else:
            _write_records(kept)
        return 0

    return await _with_gateway(args, work)


def _write_records(records: Sequence[common_pb2.Record]) -> None:
    for record in records:
        write("\n".join(fmt.record_lines(record)))


async def cmd_reconcile(args: argparse.Namespace) -> int:
    """Remove provisional sessions no saga will commit (the tree's SweepProvisional)."""
    from agent_gateway.reconcile import reconcile
    from stello.errors import StelloError

    saved = load_credentials()
    tree = _pick(args.tree, "STELLO_TREE", saved.tree if saved else None)
    admin_key = _pick(args.admin_key, "STELLO_ADMIN_KEY", None)
    if not tree:
        raise ClientError(
            "no tree address: run `stello up` first, or pass --tree / set STELLO_TREE"
        )
    if not admin_key:
        raise ClientError(
            "reconcile needs an admin key: create one with `stello keys create --admin`, "
            "then pass --admin-key or set STELLO_ADMIN_KEY"
        )
    tls = resolve_tls(args)
    try:
        removed = await reconcile(
            tree, admin_key, args.older_than, args.dry_run, timeout_s=args.timeout, tls=tls
        )
    except StelloError as exc:
        raise ClientError(f"{exc.code.name}: {fmt.one_line(exc.message)}") from None
    if args.json:
        write(fmt.dumps({"dry_run": args.dry_run, "removed_ids": removed}))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    write(f"{verb} {len(removed)} provisional session{'' if len(removed) == 1 else 's'}")
    for session_id in removed:
        write(f"  {session_id}")
    return 0
