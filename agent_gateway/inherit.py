"""How a new session inherits another's records: Fork INHERIT and ImportSession (DESIGN §4.4).

Both get them from `inherited_records` alone, so when inheritance becomes a
lineage by reference (DESIGN §4.4: storage keeps the source's rows and the
child reads them through its segments) both change together. Until then the
child gets copies: the source's records through the cut, an incomplete
tool-call group left out, timestamps and metadata kept, renumbered from 1.
"""

from __future__ import annotations

from uuid import UUID

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.compose import drop_incomplete_tool_groups, inherited_copy
from stello.common.v1 import common_pb2


async def inherited_records(
    storage: StorageClient,
    caller: Caller,
    space_id: UUID,
    source_id: UUID,
    until_seq: int | None,
) -> list[common_pb2.Record]:
    """The records a child of `source_id` starts with (all, or those with seq <= `until_seq`).

    Raises:
        stello.errors.NotFound: the source is not a visible session of the space.
    """
    records = await storage.all_records(caller, space_id, source_id, until_seq=until_seq)
    return [inherited_copy(r) for r in drop_incomplete_tool_groups(records)]
