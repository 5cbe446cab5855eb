"""The SDK's examples run against live services: examples/python/*.py and docs/python.md's
quick start, as programs a user runs, connected through STELLO_GATEWAY/KEY/SPACE_ID."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.gateway.conftest import Stack
from tests.sdk.conftest import run_python

pytestmark = [pytest.mark.sql, pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
QUICK_START = "<!-- quick start: tests/sdk/test_examples.py runs this block -->"


async def test_stream_and_fork(stack: Stack, tmp_path: Path) -> None:
    """The asyncio example streams a turn, forks with the records, and shows tree and records."""
    out = await run_python(stack, tmp_path, str(EXAMPLES / "stream_and_fork.py"), "Hi there")
    assert out.splitlines() == [
        "echo: Hi there",
        "[stored: 2 records]",
        "fork: echo: Say it in one line.",
        "Quick start (turns: 1)",
        "  Another angle (turns: 1)",
        "#1 (inherited): Hi there",
        "#2 (inherited): echo: Hi there",
        "#3: Say it in one line.",
        "#4: echo: Say it in one line.",
    ]


async def test_tool_calls(stack: Stack, tmp_path: Path) -> None:
    """The sync example answers the model's tool call and catches SessionArchived."""
    out = await run_python(stack, tmp_path, str(EXAMPLES / "tool_calls.py"))
    lines = out.splitlines()
    assert re.fullmatch(r"answered clock: \d\d:\d\d UTC", lines[0]), lines
    assert re.fullmatch(r"model: tool results: clock: \d\d:\d\d UTC", lines[1]), lines
    assert re.fullmatch(r"refused as expected: SESSION_ARCHIVED \(request [0-9a-f]{32}\)", lines[2])


async def test_the_quick_start_of_the_docs(stack: Stack, tmp_path: Path) -> None:
    """docs/python.md's quick start runs as written: a streamed turn, then the fork's reply."""
    text = (ROOT / "docs" / "python.md").read_text().partition(QUICK_START)[2]
    found = re.search(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert found, "docs/python.md lost its quick start"
    assert len([line for line in found.group(1).splitlines() if line.strip()]) <= 12
    script = tmp_path / "quick_start.py"
    script.write_text(found.group(1))
    out = await run_python(stack, tmp_path, str(script))
    assert out == "echo: Plan a day in Lisbon\necho: And if it rains?\n"
