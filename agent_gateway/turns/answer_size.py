"""An answer too large to store (DESIGN §4.3, explore10 F7).

Each assistant record (the model's text and the tool calls it stores) is
measured as storage measures a record, as soon as the model answered it: one
over the record limit (a provider that did not keep to max_tokens) is
RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE, the model's side, with nothing written
— not storage's INVALID_ARGUMENT at the commit, which blamed the caller's valid
request and named a field of storage's Transact — and none of its built-in tool
calls is run (their writes would stay though the turn fails).
"""

from __future__ import annotations

import logging

from agent_gateway.turns.state import Plan
from stello.common.v1 import common_pb2
from stello.errors import ResourceExhausted, new_error_id
from stello.reasons import LLM_ANSWER_TOO_LARGE

log = logging.getLogger(__name__)


def check_answer(plan: Plan, record: common_pb2.Record, record_bytes: int) -> None:
    """Refuse an assistant `record` over `record_bytes` (see the module docstring).

    Raises:
        ResourceExhausted: reason LLM_ANSWER_TOO_LARGE; its sizes logged under an error id.
    """
    size = record.ByteSize()
    if size <= record_bytes:
        return
    error_id = new_error_id()
    calls = sum(call.ByteSize() for call in record.tool_calls)
    log.warning(
        "the model's answer in a turn of session %s makes a record of %d bytes (text %d, "
        "%d tool call(s) %d), over STELLO_MAX_RECORD_BYTES=%d: the provider did not keep "
        "to max_tokens; nothing of the turn was stored (error id %s)",
        plan.session_id,
        size,
        len(record.content.encode()),
        len(record.tool_calls),
        calls,
        record_bytes,
        error_id,
    )
    raise ResourceExhausted(
        f"the model's answer is {size} bytes, over the {record_bytes} bytes a record may "
        f"hold; nothing of the turn was stored (error id {error_id})",
        reason=LLM_ANSWER_TOO_LARGE,
        metadata={"answer_bytes": str(size), "record_bytes": str(record_bytes)},
    )
