"""Transact's operations that are not another RPC's request: RememberResultOp,
InheritRecordsOp and CopySystemPromptOp, checked under their `operations[i]` path.

The other operations are validated as their RPC would (`storage_service.parse`).
"""

from __future__ import annotations

import uuid

from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import parse_uuid
from storage_service.keys.wire import remembered_key
from storage_service.slots.wire import MAX_BATCH_IDS
from storage_service.transact.operations import CopyPromptOp, InheritOp, RememberOp

MAX_REQUEST_HASH_BYTES = 64


def remember(
    message: storage_pb2.Operation.RememberResultOp, path: str, v: Violations
) -> RememberOp:
    """A RememberResultOp: a valid key, a 1..64-byte request hash, the ids of the sessions
    it holds data of."""
    remembered_key(message.scope, message.request_id, path, v)
    if not 1 <= len(message.request_hash) <= MAX_REQUEST_HASH_BYTES:
        v.add(f"{path}.request_hash", f"must be 1..{MAX_REQUEST_HASH_BYTES} bytes")
    if len(message.session_ids) > MAX_BATCH_IDS:
        v.add(f"{path}.session_ids", f"must list at most {MAX_BATCH_IDS} ids")
    sessions = tuple(
        parse_uuid(value, f"{path}.session_ids[{i}]", v)
        for i, value in enumerate(message.session_ids[:MAX_BATCH_IDS])
    )
    return RememberOp(
        message.scope,
        message.request_id,
        message.request_hash,
        message.response,
        message.require_new,
        tuple(dict.fromkeys(sessions)),
    )


def other_source(session_id: uuid.UUID, value: str, path: str, v: Violations) -> uuid.UUID:
    """The `source_id` of an operation that reads another session into `session_id`."""
    source = parse_uuid(value, path, v)
    if value and source == session_id:
        v.add(path, "must name another session than session_id")
    return source


def inherit_op(
    session_id: uuid.UUID,
    message: storage_pb2.Operation.InheritRecordsOp,
    path: str,
    v: Violations,
) -> InheritOp:
    """An InheritRecordsOp: a source other than the session, a non-negative until_seq."""
    source = other_source(session_id, message.source_id, f"{path}.source_id", v)
    until = message.until_seq if message.HasField("until_seq") else None
    if until is not None and until < 0:
        v.add(f"{path}.until_seq", "must not be negative")
    return InheritOp(session_id, source, until)


def copy_prompt_op(
    session_id: uuid.UUID,
    message: storage_pb2.Operation.CopySystemPromptOp,
    path: str,
    v: Violations,
) -> CopyPromptOp:
    """A CopySystemPromptOp: a source other than the session."""
    return CopyPromptOp(
        session_id, other_source(session_id, message.source_id, f"{path}.source_id", v)
    )
