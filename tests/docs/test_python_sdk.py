"""docs/python.md's table of methods covers every RPC of the gateway, and each method it names
is on both clients.

An RPC added to agent.proto with its SDK method but no row leaves a newcomer to find the
method by reading the code; a method renamed leaves a row naming nothing.
"""

from __future__ import annotations

import re

from stello.agent.v1 import agent_pb2
from stello_client import AsyncClient, Client
from tests.docs.test_references import REPO

HEADER = "| RPC | method | answers |"


def table_rows(text: str) -> list[tuple[str, str]]:
    """The (RPC, method) cells of the table's rows."""
    table = text[text.index(HEADER) :].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return [(row[0].lstrip("| "), row[1]) for row in rows]


def rpcs_named(cell: str) -> set[str]:
    """The RPCs a first cell names: `A, B`, and `Get/Upsert/RemoveThing` for three."""
    names: set[str] = set()
    for part in cell.split(", "):
        verbs, _, noun = part.rpartition("/")
        if verbs:
            first, *others = verbs.split("/")
            stem = re.sub(r"^[A-Z][a-z]+", "", noun)
            names |= {first + stem, *(other + stem for other in others), noun}
        else:
            names.add(part)
    return names


def methods_named(cell: str) -> set[str]:
    """The methods a second cell names: its spans outside parentheses."""
    outside = cell
    while (inner := re.sub(r"\([^()]*\)", "", outside)) != outside:
        outside = inner
    return set(re.findall(r"`([a-z_]+)`", outside))


def test_every_rpc_has_a_row_and_every_method_exists() -> None:
    rows = table_rows((REPO / "docs/python.md").read_text())
    documented = set().union(*(rpcs_named(rpc) for rpc, _ in rows))
    service = agent_pb2.DESCRIPTOR.services_by_name["AgentGateway"]
    assert sorted({method.name for method in service.methods} - documented) == []
    methods = set().union(*(methods_named(method) for _, method in rows))
    assert len(methods) > 30
    missing = {name for name in methods if not hasattr(AsyncClient, name)}
    missing |= {name for name in methods if not hasattr(Client, name)}
    assert sorted(missing) == []


def test_the_cells_are_read_as_written() -> None:
    assert rpcs_named("Get/Upsert/RemoveSharedMemoryEntry") == {
        "GetSharedMemoryEntry",
        "UpsertSharedMemoryEntry",
        "RemoveSharedMemoryEntry",
    }
    assert rpcs_named("UpdateLabel, Archive") == {"UpdateLabel", "Archive"}
    cell = "`digests` (filters: `label_prefix`, `x` (`y`)), `records` (every page)"
    assert methods_named(cell) == {"digests", "records"}
