"""`stello search` prints the hits of a query like `stello records` prints records (in
process, against a real gateway): plain text in a pipe, the match highlighted on a
terminal, --json, --limit over pages, --session / --root, bad queries as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stello_cli.output.style import Style
from stello_cli.parser import build_parser
from stello_cli.space.search import hit_lines
from stello_client.errors import ClientError, UsageError
from tests.gateway.conftest import (  # noqa: F401 (fixtures used by name)
    Stack,
    _backends,
    _local_calls,
    _profiles_file,
    _provisioning_ttl_s,
    _stack,
    _start_gateway,
    _summarizer,
    record,
)

pytestmark = pytest.mark.sql


@pytest.fixture(name="roots")
async def _roots(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two roots: "Alpha" with 3 records saying kettle, "Beta" with one and 水壶."""
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    alpha = await stack.root(label="Alpha")
    beta = await stack.root(label="Beta")
    await stack.append(alpha.id, *(record("user", f"kettle number {n}") for n in range(1, 4)))
    await stack.append(beta.id, record("assistant", "the kettle 水壶 boils"))
    return [alpha.id, beta.id]


async def run_search(stack: Stack, *words: str) -> int:
    args = build_parser().parse_args(
        [
            "search",
            "--gateway",
            stack.gateway.address,
            "--key",
            stack.space.key,
            "--space",
            stack.space.sid,
            *words,
        ]
    )
    result: int = await args.run(args)
    return result


class TestSearchCommand:
    async def test_hits_print_newest_first_like_records(
        self, stack: Stack, roots: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert await run_search(stack, "kettle") == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split(": ", 1)[1] for line in lines] == [
            "the kettle 水壶 boils",
            "kettle number 3",
            "kettle number 2",
            "kettle number 1",
        ]
        assert lines[0].startswith(f"Beta {roots[1][:8]} [1] assistant · ")
        assert "\x1b[" not in "".join(lines)

    async def test_limit_scope_and_json(
        self, stack: Stack, roots: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert await run_search(stack, "kettle", "--limit", "2", "--root", roots[0][:8]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 2
        assert await run_search(stack, "水壶", "--session", roots[1], "--json") == 0
        [hit] = json.loads(capsys.readouterr().out)
        assert (hit["session_id"], hit["seq"], hit["label"]) == (roots[1], 1, "Beta")
        assert hit["snippet"][slice(*hit["matches"][0])] == "水壶"
        assert await run_search(stack, "teapot") == 0
        assert capsys.readouterr().out.strip() == "no records match"

    async def test_bad_input_is_one_line(self, stack: Stack, roots: list[str]) -> None:
        with pytest.raises(ClientError, match="QUERY"):
            await run_search(stack, "--", "-kettle")
        with pytest.raises(UsageError, match="--root: not with --session"):
            await run_search(stack, "kettle", "--session", roots[0], "--root", roots[1])


def test_a_terminal_sees_the_match_highlighted() -> None:
    from stello.common.v1 import common_pb2

    hit = common_pb2.RecordHit(
        session_id="0" * 32,
        label="L",
        seq=2,
        role=common_pb2.RECORD_ROLE_USER,
        snippet="a kettle here",
        matches=[common_pb2.TextMatch(start=2, end=8)],
    )
    [line] = hit_lines(hit, Style(True))
    assert "\x1b[1;33mkettle\x1b[0m here" in line
    [plain] = hit_lines(hit, Style(False))
    assert plain.endswith(": a kettle here")


def test_a_snippet_never_drives_the_terminal() -> None:
    """A stored escape sequence in a hit prints escaped, around and inside the highlight
    (it recoloured the terminal, NO_COLOR or not); the match is still painted."""
    from stello.common.v1 import common_pb2

    hit = common_pb2.RecordHit(
        session_id="0" * 32,
        label="L",
        seq=2,
        role=common_pb2.RECORD_ROLE_USER,
        snippet="\x1b[31mred kettle\x1b[2J\nnext\tline",
        matches=[common_pb2.TextMatch(start=9, end=19)],
    )
    [plain, rest] = hit_lines(hit, Style(False))
    assert plain.endswith(": \\x1b[31mred kettle\\x1b[2J")
    assert rest == "    next\tline"
    [line, _] = hit_lines(hit, Style(True))
    assert line.endswith(": \\x1b[31mred \x1b[1;33mkettle\\x1b[2J\x1b[0m")
