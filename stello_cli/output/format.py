"""How the client commands show gateway replies as lines of text (`--json`: `stello_client.dicts`).

Text lines take a `Style` (colour on a terminal only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.output.style import (
    PLAIN,
    Style,
    ago,
    display_width,
    one_line,
    plural,
    short_id,
    shown,
)
from stello_client.dicts import is_inherited, optional, profile_dict, role_name, status_name

PREVIEW_COLUMNS = 60


def _status(status: int, turns: int) -> str:
    return f"[{status_name(status)}, {plural(turns, 'turn')}]"


def session_lines(session: common_pb2.SessionSummary) -> list[str]:
    """A created or changed session as `name: value` lines (the style of `stello up`)."""
    lines = [f"id: {session.id}", f"label: {one_line(session.label)}"]
    if session.HasField("parent_id"):
        lines.append(f"parent_id: {session.parent_id}")
    lines += [f"status: {status_name(session.status)}", f"turns: {session.turn_count}"]
    return lines


def record_text(record: common_pb2.Record) -> str:
    """A record's text, or the tools it calls when it has none."""
    return record.content or ", ".join(f"→ {call.name}" for call in record.tool_calls)


def preview(record: common_pb2.Record | None, width: int = PREVIEW_COLUMNS) -> str:
    """`role: text` of a record on one line, cut to `width` terminal columns."""
    if record is None:
        return ""
    return one_line(f"{role_name(record.role)}: {record_text(record)}", width)


MAX_COLUMN = 48
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def visible_width(text: str) -> int:
    """The columns `text` takes on a terminal (its colour codes take none, a CJK character
    or an emoji two)."""
    return display_width(_ANSI.sub("", text))


def table(rows: Sequence[Sequence[str]], gap: str = "  ", cap: int = MAX_COLUMN) -> list[str]:
    """Rows as aligned columns: each column as wide as its widest cell (colour codes not
    counted) up to `cap` (a wider cell overflows on its own row only: a deep tree's last
    label does not push every row's status to the right), `gap` between columns, empty
    cells and trailing spaces left out.

    The one renderer of the listings (`tree`, `digests`, `lineage`): widths come from the data.
    """
    widths: list[int] = []
    for row in rows:
        for column, cell in enumerate(row):
            width = visible_width(cell)
            if column == len(widths):
                widths.append(width)
            else:
                widths[column] = max(widths[column], width)
    widths = [min(width, cap) for width in widths]
    lines = []
    for row in rows:
        cells = [cell + " " * max(widths[i] - visible_width(cell), 0) for i, cell in enumerate(row)]
        while cells and not cells[-1].strip():
            cells.pop()
        lines.append(gap.join(cells).rstrip())
    return lines


def tree_lines(
    nodes: Sequence[common_pb2.TreeNode],
    style: Style = PLAIN,
    previews: Mapping[str, str] | None = None,
    mark: str | None = None,
) -> list[str]:
    """The forest in pre-order as an indented tree, in aligned columns: label, status,
    turns, short id, preview (`table`).

    Built with an explicit stack, so a chain thousands deep draws as well as a
    bush. `mark` (a session id) gets a `◀` after it (the chat's current session).
    """
    known = {node.id for node in nodes}
    children: dict[str, list[common_pb2.TreeNode]] = {}
    roots: list[common_pb2.TreeNode] = []
    for node in nodes:
        if node.HasField("parent_id") and node.parent_id in known:
            children.setdefault(node.parent_id, []).append(node)
        else:
            roots.append(node)
    rows: list[list[str]] = []
    # (node, prefix of its own line, prefix its children continue with)
    stack: list[tuple[common_pb2.TreeNode, str, str]] = [(root, "", "") for root in reversed(roots)]
    while stack:
        node, prefix, carry = stack.pop()
        row = [f"{prefix}{style.bold(one_line(node.label))}", _status(node.status, node.turn_count)]
        row.append(style.dim(short_id(node.id)))
        shown = previews.get(node.id, "") if previews else ""
        tail = [style.dim(shown)] if shown else []
        if mark == node.id:
            tail.append("◀")
        row.append("  ".join(tail))
        rows.append(row)
        kids = children.get(node.id, [])
        for position, child in reversed(list(enumerate(kids))):
            last = position == len(kids) - 1
            stack.append(
                (child, carry + ("└─ " if last else "├─ "), carry + ("   " if last else "│  "))
            )
    return table(rows)


def metadata_text(pairs: Mapping[str, str]) -> str:
    """A session's metadata on one line: `key=value` pairs by key."""
    return "  ".join(f"{key}={one_line(value, 100)}" for key, value in sorted(pairs.items()))


def digests_lines(digests: Sequence[common_pb2.SessionDigest], style: Style = PLAIN) -> list[str]:
    """Digests as aligned columns (short id, label, status and turns), each followed by its
    memory and insight when set."""
    rows = [
        [
            style.dim(short_id(d.id)),
            style.bold(one_line(d.label)),
            _status(d.status, d.turn_count) + _pin(d.pinned),
        ]
        for d in digests
    ]
    lines = []
    for digest, line in zip(digests, table(rows), strict=True):
        lines.append(line)
        if digest.metadata:
            lines.append(f"    metadata: {metadata_text(digest.metadata)}")
        for name in ("memory", "insight"):
            if digest.HasField(name):
                lines.append(f"    {name}: {_slot_line(getattr(digest, name))}")
    return lines


def _slot_line(text: str) -> str:
    """A memory or insight on one line, cut to 200 columns; "(empty)" when set to "" (as
    `show` says)."""
    return one_line(text, 200) if text else "(empty)"


def record_lines(
    record: common_pb2.Record,
    style: Style = PLAIN,
    now: datetime | None = None,
    *,
    width: int = 0,
) -> list[str]:
    """`[seq] role · 5 min ago: content`, continuation lines indented, then its tool calls.

    Records a fork inherited say so (`· inherited`). With `width`, one line: the
    content collapsed and cut to that many terminal columns.
    """
    head = f"[{record.seq}] {style.role(role_name(record.role))}"
    if record.HasField("tool_call_id"):
        head += f" ({one_line(record.tool_call_id)})"
    head += style.dim(f" · {ago(record.created_at, now)}")
    if is_inherited(record):
        head += style.dim(" · inherited")
    if width:
        return [f"{head}: {one_line(record_text(record), width)}"]
    text_lines = shown(record.content).splitlines() or [""]
    lines = [f"{head}: {text_lines[0]}"]
    lines += [f"    {line}" for line in text_lines[1:]]
    for call in record.tool_calls:
        called = f"{one_line(call.name)}({one_line(call.arguments_json)})"
        lines.append(f"    → {called}  {style.dim(one_line(call.id))}")
    return lines


def _block(name: str, text: str | None) -> list[str]:
    if text is None:
        return [f"{name}: (none)"]
    if not text:
        return [f"{name}: (empty)"]
    return [f"{name}:", *(f"    {line}" for line in shown(text).splitlines())]


def _skills(config: common_pb2.SessionConfig) -> str:
    if not config.HasField("skills"):
        return "inherited"
    return ", ".join(config.skills.names) or "none"


def _pin(pinned: bool) -> str:
    """What a line about a session adds when it is pinned (retention keeps its subtree)."""
    return ", pinned" if pinned else ""


def view_lines(view: agent_pb2.SessionView, style: Style = PLAIN) -> list[str]:
    """GetSession's joined view for people: topology, meta with relative times, config, slots."""
    node = view.node
    lines = [
        f"{style.bold(one_line(node.label))}  {style.dim(node.id)}",
        f"status: {status_name(node.status)}, {plural(view.turn_count, 'turn')}, "
        f"last active {ago(view.last_active_at)}, created {ago(view.created_at)}"
        + _pin(view.pinned),
        f"parent: {node.parent_id if node.HasField('parent_id') else '(a root)'}",
    ]
    if node.HasField("source_session_id"):
        lines.append(f"forked from: {node.source_session_id}")
    if node.children:
        lines.append(f"children: {', '.join(short_id(c) for c in node.children)}")
    if node.refs:
        lines.append(f"refs: {', '.join(short_id(r) for r in node.refs)}")
    if view.metadata:
        lines.append(f"metadata: {metadata_text(view.metadata)}")
    if view.HasField("config"):
        lines.append(f"skills: {_skills(view.config)}")
        for name in ("compressor_prompt", "consolidator_prompt"):
            if view.config.HasField(name):
                lines.append(
                    f"{name.replace('_', ' ')}: {one_line(getattr(view.config, name), 100)}"
                )
    else:
        lines.append("config: (none stored)")
    lines += progress_lines(view.progress) if view.HasField("progress") else []
    lines += _block("system prompt", optional(view, "system_prompt"))
    lines += _block("memory", optional(view, "memory"))
    lines += _block("insight", optional(view, "insight"))
    return lines


def progress_lines(progress: common_pb2.HistoryProgress) -> list[str]:
    """How far the summaries and the memory cover the records, and each background job:
    `progress: seq 60; summary to 47 (lossy, complete to 40); memory to 30 (version 3)`
    and `jobs: fold done to 47 (2 runs, 5 model calls)`; nothing for a session without
    records."""
    if not progress.last_seq:
        return []
    parts = [f"seq {progress.last_seq}"]
    if progress.summary_covered_until_seq:
        complete = progress.complete_summary_covered_until_seq
        lossy = f" (lossy, complete to {complete})" if progress.summary_lossy else ""
        parts.append(f"summary to {progress.summary_covered_until_seq}{lossy}")
    memory = progress.memory_covered_until_seq
    covers = f"memory to {memory}" if memory else "memory covers no record"
    parts.append(f"{covers} (version {progress.memory_version})")
    lines = [f"progress: {'; '.join(parts)}"]
    if progress.jobs:
        lines.append("jobs: " + ", ".join(_job(job) for job in progress.jobs))
    return lines


def progress_dict(progress: common_pb2.HistoryProgress) -> dict[str, object]:
    """GetSession's `progress` as a plain dict (seqs as numbers, kinds and states as words)."""
    fields = (
        "last_seq",
        "summary_covered_until_seq",
        "summary_lossy",
        "complete_summary_covered_until_seq",
        "memory_covered_until_seq",
        "memory_version",
    )
    jobs = [
        {
            "kind": _kind(job),
            "status": _job_status(job),
            "covered_until_seq": job.covered_until_seq,
            "model_calls": job.model_calls,
            "tokens": job.tokens,
            "runs": job.runs,
            "claimed": job.claimed,
        }
        for job in progress.jobs
    ]
    return {**{name: getattr(progress, name) for name in fields}, "jobs": jobs}


def _kind(job: common_pb2.BackgroundJob) -> str:
    return common_pb2.JobKind.Name(job.kind).removeprefix("JOB_KIND_").lower()


def _job_status(job: common_pb2.BackgroundJob) -> str:
    return common_pb2.JobStatus.Name(job.status).removeprefix("JOB_STATUS_").lower()


def _job(job: common_pb2.BackgroundJob) -> str:
    kind, status = _kind(job), _job_status(job)
    to = f" to {job.covered_until_seq}" if job.covered_until_seq else ""
    runs = f"{plural(job.runs, 'run')}, {plural(job.model_calls, 'model call')}"
    return f"{kind} {status}{to} ({runs})"


def profile_lines(profile: agent_pb2.ProfileInfo, style: Style = PLAIN) -> list[str]:
    """One profile: its name and what a fork or root using it gets."""
    info = profile_dict(profile)
    lines = [style.bold(profile.name)]
    if info["system_prompt"] is not None:
        lines.append(f"    system prompt ({info['system_prompt_mode']}): {info['system_prompt']}")
    if info["variables"]:
        lines.append(f"    variables: {', '.join(info['variables'])}  (give each with --var)")
    if info["context"]:
        lines.append(f"    context: {info['context']}")
    if info["prompt"] is not None:
        lines.append(f"    opening message: {info['prompt']}")
    if info["skills"] is not None:
        lines.append(f"    skills: {', '.join(info['skills']) or 'none'}")
    for name in ("compressor_prompt", "consolidator_prompt"):
        if info[name] is not None:
            lines.append(f"    {name.replace('_', ' ')}: {info[name]}")
    return lines
