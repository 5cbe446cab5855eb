"""`stello records` pages through a session (in process, against a real gateway)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stello_cli.parser import build_parser
from stello_client.errors import ClientError
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


@pytest.fixture(name="session")
async def _session(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A root with 7 records (m1..m7); no saved credentials are read."""
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    root = await stack.root(label="Paged")
    await stack.append(root.id, *(record("user", f"m{n}") for n in range(1, 8)))
    return root.id


async def run_records(stack: Stack, session: str, *flags: str) -> int:
    """Run `stello records SESSION FLAGS` on the stack's gateway; its ListRecords calls."""
    args = build_parser().parse_args(
        [
            "records",
            session,
            "--gateway",
            stack.gateway.address,
            "--key",
            stack.space.key,
            "--space",
            stack.space.sid,
            *flags,
        ]
    )
    before = list_records_calls(stack)
    assert await args.run(args) == 0
    return list_records_calls(stack) - before


def said(capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    """(seq, text) of each printed `[seq] user · <when>: text` line."""
    found = []
    for line in capsys.readouterr().out.splitlines():
        head, _, text = line.partition(": ")
        seq, role = head.split(" · ")[0].split(" ")
        assert role == "user", line
        found.append((int(seq.strip("[]")), text))
    return found


def list_records_calls(stack: Stack) -> int:
    """How many ListRecords calls the gateway has answered."""
    metrics = stack.gateway.app.metrics
    assert metrics is not None
    return sum(
        int(sample.value)
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "stello_rpc_calls_total"
        and sample.labels["method"].endswith("ListRecords")
    )


class TestRecordsCommand:
    async def test_every_page(
        self, stack: Stack, session: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --limit it prints every record, oldest first, one page per call."""
        assert await run_records(stack, session, "--page-size", "2") == 4
        assert said(capsys) == [(n, f"m{n}") for n in range(1, 8)]

    async def test_json_and_newest(
        self, stack: Stack, session: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--json lists them all; --limit N the newest N, chronological, over several pages."""
        await run_records(stack, session, "--json", "--page-size", "3")
        assert [r["seq"] for r in json.loads(capsys.readouterr().out)] == list(range(1, 8))
        assert await run_records(stack, session, "--limit", "5", "--page-size", "2") == 3
        assert said(capsys) == [(n, f"m{n}") for n in range(3, 8)]

    @pytest.mark.parametrize(
        "flags",
        [("--page-size", "0"), ("--page-size", "1001"), ("--limit", "-1"), ("--limit", "0")],
    )
    async def test_bad_sizes(self, stack: Stack, session: str, flags: tuple[str, str]) -> None:
        """A page size outside 1..1000 or a limit below 1 is refused before any call."""
        with pytest.raises(ClientError, match=flags[0]):
            await run_records(stack, session, *flags)
