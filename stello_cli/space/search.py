"""search: the records of the space that match a text query, newest first.

Each hit prints like `stello records` prints a record, headed by its session's
label and short id; on a terminal the matched words are highlighted (plain
text otherwise, so a pipe gets the snippet as stored, its control characters
escaped as `stello records` shows them).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from stello_cli.gateway import gateway, session_id
from stello_cli.output.style import Style, ago, one_line, short_id, shown, write
from stello_cli.parser import Commands, check_count, int32
from stello_client import dicts
from stello_client.errors import UsageError

if TYPE_CHECKING:
    from stello_client.types import RecordHit

MAX_PAGE = 100  # the gateway's largest SearchRecords page
SYNTAX = """\
QUERY: words (all must match; English words match their stems, and the most
common ones, such as "the" or "what", are left out), "a phrase", -word (must
not match), a or b, prefix*; Chinese/Japanese/Korean text matches as written,
no spaces needed. At most 1,000 characters and 64 terms. A query starting
with - goes after --: stello search -- "-draft report"."""


def highlighted(hit: RecordHit, style: Style) -> str:
    """The hit's snippet with its matches painted (plain when `style` has no colour)."""
    parts: list[str] = []
    at = 0
    for match in hit.matches:
        parts.append(shown(hit.snippet[at : match.start]))
        parts.append(style.paint(shown(hit.snippet[match.start : match.end]), "bold", "yellow"))
        at = match.end
    parts.append(shown(hit.snippet[at:]))
    text = "".join(parts)
    if hit.snippet_offset:
        text = "…" + text
    return text


def hit_lines(hit: RecordHit, style: Style) -> list[str]:
    """`label (id8) [seq] role · 5 min ago: snippet`, continuation lines indented."""
    head = f"{style.bold(one_line(hit.label))} {style.dim(short_id(hit.session_id))} [{hit.seq}] "
    head += style.role(dicts.role_name(hit.role))
    head += style.dim(f" · {ago(hit.created_at)}")
    if hit.reader_count > 1:
        head += style.dim(f" · read by {hit.reader_count} sessions")
    lines = highlighted(hit, style).splitlines() or [""]
    return [f"{head}: {lines[0]}", *(f"    {line}" for line in lines[1:])]


async def cmd_search(args: argparse.Namespace) -> int:
    """Print the hits of QUERY, newest first (or best first), up to --limit."""
    check_count("--limit", args.limit)
    if args.session and args.root:
        raise UsageError("--root: not with --session: give one or the other")
    style = Style.of(sys.stdout)
    hits: list[RecordHit] = []
    async with gateway(args) as client:
        session = await session_id(client, args.session, "--session") if args.session else ""
        root = await session_id(client, args.root, "--root") if args.root else ""
        token = ""
        while len(hits) < args.limit:
            page = await client.search_records(
                args.query,
                order=args.order,
                page_size=min(MAX_PAGE, args.limit - len(hits)),
                page_token=token,
                session_id=session,
                root_id=root,
            )
            hits += page.hits
            token = page.next_page_token
            if not token:
                break
    if args.json:
        write(dicts.dumps([dicts.hit_dict(hit) for hit in hits]))
    elif not hits:
        write("no records match")
    else:
        for hit in hits:
            write("\n".join(hit_lines(hit, style)))
    return 0


def register(commands: Commands) -> None:
    """search."""
    search = commands.client(
        "search",
        cmd_search,
        "find the records that match a text query, newest first",
        "Find the space's records whose text matches QUERY, newest first.\n\n" + SYNTAX,
        flags={"query": "QUERY", "session_id": "--session", "root_id": "--root"},
    )
    search.add_argument("query", metavar="QUERY", help="what to find (syntax above)")
    search.add_argument("--session", metavar="S", help="only this session's records")
    search.add_argument("--root", metavar="S", help="only the tree under this root")
    search.add_argument(
        "--limit", type=int32, default=20, metavar="N", help="at most N hits (default 20)"
    )
    search.add_argument(
        "--order",
        choices=("newest", "relevance"),
        default="newest",
        help="newest first (the default) or best match first among the 1,000 newest matches",
    )
