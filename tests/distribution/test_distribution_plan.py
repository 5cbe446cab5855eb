"""One source for the distribution plan: docs/scaling.md says what stello.distribution.apply
does."""

from __future__ import annotations

from stello.distribution import plan as distribution_plan
from tests.distribution.plan import code_plan, read_plan


class TestPlan:
    def test_document_block_is_the_code(self) -> None:
        """docs/scaling.md's plan block holds stello.distribution.apply's tables and functions."""
        assert read_plan() == code_plan()

    def test_sessions_comes_first(self) -> None:
        """sessions is distributed first: every other tenant table is co-located with it."""
        assert (
            distribution_plan.DISTRIBUTED_TABLES[0] == distribution_plan.COLOCATE_WITH == "sessions"
        )

    def test_no_table_in_both_lists(self) -> None:
        """A table is either replicated or distributed, never both, and listed once."""
        tables = distribution_plan.REFERENCE_TABLES + distribution_plan.DISTRIBUTED_TABLES
        assert len(set(tables)) == len(tables)
