"""What CreateRoot and Fork take once validated (`RootInput`, `ForkInput`) and the sizes
storage accepts (`SizeLimits`), checked before anything is written
(`agent_gateway.forks.creator`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_gateway.forks.compose import ContextMode
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.settings import MIB

DEFAULT_ROOT_LABEL = "Root"


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """What storage accepts (``STELLO_MAX_RECORD_BYTES``, ``STELLO_MAX_SLOT_BYTES``)."""

    record_bytes: int = MIB
    slot_bytes: int = MIB

    def check_request(self, system_prompt: str | None, prompt: str | None) -> None:
        """Refuse the client's own fields over the limits (before anything is read)."""
        v = Violations()
        if system_prompt is not None:
            self._slot(system_prompt, "system_prompt", "", v)
        if prompt is not None:
            self._record(assistant_record(prompt), "prompt", v)
        v.raise_if_any()

    def check_plan(self, system_prompt: str | None, opening: str | None, opening_from: str) -> None:
        """Refuse a composed session that storage would refuse (before the saga writes):
        its system prompt (with profile and defaults), its opening record (named by
        `opening_from`, the field it came from: ``prompt`` or ``profile``)."""
        v = Violations()
        if system_prompt is not None:
            self._slot(system_prompt, "system_prompt", " as composed", v)
        if opening:
            self._record(assistant_record(opening), opening_from, v)
        v.raise_if_any()

    def _slot(self, text: str, name: str, how: str, v: Violations) -> None:
        size = len(text.encode())
        if size > self.slot_bytes:
            v.add(name, f"is {size} bytes{how}, over the limit of {self.slot_bytes}")

    def _record(self, record: common_pb2.Record, name: str, v: Violations) -> None:
        size = record.ByteSize()
        if size > self.record_bytes:
            v.add(name, f"makes a record of {size} bytes, over the limit of {self.record_bytes}")


@dataclass(frozen=True, slots=True)
class RootInput:
    """A validated CreateRoot request."""

    space_id: uuid.UUID
    label: str = DEFAULT_ROOT_LABEL
    system_prompt: str | None = None
    skills: tuple[str, ...] | None = None
    profile: str | None = None
    profile_vars: Mapping[str, str] = field(default_factory=dict)
    request_id: str = ""
    request_hash: bytes = b""
    """Fingerprint of the request without its request_id (when it has one)."""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ForkInput:
    """A validated Fork request (context None = the profile's, else NONE)."""

    space_id: uuid.UUID
    source_id: uuid.UUID
    label: str
    topology_parent_id: uuid.UUID | None = None
    profile: str | None = None
    profile_vars: Mapping[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    skills: tuple[str, ...] | None = None
    context: ContextMode | None = None
    inherit_until_seq: int | None = None
    prompt: str | None = None
    request_id: str = ""
    request_hash: bytes = b""
    """Fingerprint of the request without its request_id (when it has one)."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    copy_metadata: bool = False
    """Start from the source's metadata (`metadata` on top)."""


def assistant_record(text: str) -> common_pb2.Record:
    """An assistant record of `text` (a session's opening prompt)."""
    return common_pb2.Record(role=common_pb2.RECORD_ROLE_ASSISTANT, content=text)
