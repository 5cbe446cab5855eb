"""The Citus plan of docs/scaling.md, read from its SQL: which tables are distributed, which not.

The tests take the table lists from the document, so the document and the
schema cannot drift apart: a new table that is not in it fails the catalog test.
The lists' source is the code (`stello.distribution.apply`, which applies them):
`code_plan()` is the same plan read from it, and test_distribution_plan.py
checks that the document's block says the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from stello.distribution import plan as distribution_plan

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
MARKER = "<!-- citus plan: read by tests/distribution/test_catalog.py -->"


@dataclass(frozen=True, slots=True)
class CitusPlan:
    """The tables docs/scaling.md distributes by space_id and those it replicates, and the
    shared functions with the argument each is distributed by (None: only propagated)."""

    distributed: frozenset[str]
    reference: frozenset[str]
    colocated_with: dict[str, str]
    functions: dict[str, str | None] = field(default_factory=dict)


def read_plan(doc: Path = DOC) -> CitusPlan:
    """Parse the SQL block after the plan marker."""
    text = doc.read_text(encoding="utf-8")
    block = text.partition(MARKER)[2].partition("```sql")[2].partition("```")[0]
    reference = re.findall(r"create_reference_table\('(\w+)'\)", block)
    distributed: list[str] = []
    colocated: dict[str, str] = {}
    for table, column, rest in re.findall(
        r"create_distributed_table\('(\w+)', '(\w+)'([^)]*)\)", block
    ):
        assert column == "space_id", f"{table} is distributed by {column}, not space_id"
        distributed.append(table)
        with_ = re.search(r"colocate_with => '(\w+)'", rest)
        if with_:
            colocated[table] = with_.group(1)
    functions: dict[str, str | None] = {}
    for signature, argument, rest in re.findall(
        r"create_distributed_function\('([^']+)'(?:, '(\w+)')?([^)]*)\)", block
    ):
        if argument:
            assert "colocate_with => 'sessions'" in rest, f"{signature}: not co-located"
        functions[signature] = argument or None
    return CitusPlan(frozenset(distributed), frozenset(reference), colocated, functions)


def code_plan() -> CitusPlan:
    """The plan `stello.distribution.apply.distribute` applies."""
    return CitusPlan(
        frozenset(distribution_plan.DISTRIBUTED_TABLES),
        frozenset(distribution_plan.REFERENCE_TABLES),
        dict.fromkeys(distribution_plan.DISTRIBUTED_TABLES[1:], distribution_plan.COLOCATE_WITH),
        dict(distribution_plan.FUNCTIONS),
    )
