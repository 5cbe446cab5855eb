"""The slots' request fields: BatchGetSlots' ids, reply budget and slot selection,
and GetSession's.

A batch names at most MAX_BATCH_IDS sessions, so one call's reads stay bounded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import not_one_of, parse_uuid
from storage_service.models import SlotName

MAX_BATCH_IDS = 1000


def batch_ids(values: Sequence[str], v: Violations) -> list[uuid.UUID]:
    """BatchGetSlots' ids: at most 1000, each a UUID."""
    if len(values) > MAX_BATCH_IDS:
        v.add("session_ids", f"must list at most {MAX_BATCH_IDS} ids, got {len(values)}")
        return []
    return [parse_uuid(value, f"session_ids[{i}]", v) for i, value in enumerate(values)]


def max_reply_bytes(value: int, v: Violations) -> int:
    """A reply's byte budget: 0 (the server's limit) or more."""
    if value < 0:
        v.add("max_reply_bytes", "must not be negative (0 = the server's message limit)")
    return max(value, 0)


SLOT_KINDS: dict[int, SlotName] = {
    storage_pb2.SLOT_KIND_SYSTEM_PROMPT: "system_prompt",
    storage_pb2.SLOT_KIND_MEMORY: "memory",
    storage_pb2.SLOT_KIND_INSIGHT: "insight",
}


def slot_kinds(values: Sequence[int], v: Violations) -> frozenset[SlotName]:
    """BatchGetSlots' slot selection: the named slots, or all three when none is named."""
    if not values:
        return frozenset(SLOT_KINDS.values())
    for i, value in enumerate(values):
        if value not in SLOT_KINDS:
            v.add(f"slots[{i}]", not_one_of(storage_pb2.SlotKind, value))
    return frozenset(SLOT_KINDS[value] for value in values if value in SLOT_KINDS)


def session_slots(values: Sequence[int], v: Violations) -> frozenset[SlotName]:
    """GetSession's slot selection: the named slots, none when none is named."""
    return slot_kinds(values, v) if values else frozenset()
