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
from stello.storage.v1 import storage_pb2


async def inherited(
    storage: StorageClient,
    caller: Caller,
    space_id: UUID,
    source_id: UUID,
    until_seq: int | None,
) -> tuple[list[common_pb2.Record], storage_pb2.CompressionCache | None]:
    """The records a child starts with, and the source's newest summary of them in the
    child's numbering (DESIGN §4.3: an INHERIT child starts from the source's summaries):
    it covers the child's first n records, n those copied from at or before its seq.

    Raises:
        stello.errors.NotFound: the source is not a visible session of the space.
    """
    records = await storage.all_records(caller, space_id, source_id, until_seq=until_seq)
    kept = drop_incomplete_tool_groups(records)
    cache: storage_pb2.CompressionCache | None = None
    if kept:
        cut = until_seq if until_seq is not None else records[-1].seq
        found = await storage.get_compression_cache(
            caller, space_id, source_id, at_or_below_seq=cut
        )
        covered = sum(1 for r in kept if found is not None and r.seq <= found.covered_until_seq)
        if found is not None and covered:
            cache = storage_pb2.CompressionCache(
                summary=found.summary, covered_until_seq=covered, lossy=found.lossy
            )
    return [inherited_copy(r) for r in kept], cache


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
