"""GetSession, PutSession and ListSessions (STELLO-SPEC §6.1 items 1-3, 6 with DESIGN §5)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rpc_error
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED
SYSTEM_PROMPT = storage_pb2.SLOT_KIND_SYSTEM_PROMPT
MEMORY = storage_pb2.SLOT_KIND_MEMORY
INSIGHT = storage_pb2.SLOT_KIND_INSIGHT


async def get(stub: Stub, space: TestSpace, session_id: uuid.UUID) -> common_pb2.SessionMeta:
    reply = await stub.GetSession(
        storage_pb2.GetSessionRequest(space_id=space.sid, session_id=str(session_id))
    )
    meta: common_pb2.SessionMeta = reply.session
    return meta


class TestGetSession:
    async def test_unknown_id_is_not_found(self, stub: Stub, space: TestSpace) -> None:
        """A session id that was never created answers NOT_FOUND (DESIGN §5.1, spec §6.1.1)."""
        err = await rpc_error(get(stub, space, uuid.uuid4()))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_meta_round_trips(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A created session answers its id, label, status, turn count and timestamps."""
        session_id = await make_session(label="Planning")
        meta = await get(stub, space, session_id)
        assert meta.id == str(session_id)
        assert (meta.label, meta.status, meta.turn_count) == ("Planning", ACTIVE, 0)
        assert meta.created_at.seconds > 0
        assert meta.updated_at == meta.created_at == meta.last_active_at

    async def test_provisional_session_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A provisional session reads as absent until the tree commits it (DESIGN §4.1)."""
        session_id = await make_session(provisional=True)
        err = await rpc_error(get(stub, space, session_id))
        assert err.code() == grpc.StatusCode.NOT_FOUND


class TestGetSessionWithSlots:
    """GetSession with `slots`: the meta and the slots asked for, in one call."""

    async def test_answers_the_meta_and_the_slots_asked_for(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The meta is plain GetSession's; the slots asked for are BatchGetSlots', the others
        unset; a stored "" is answered set."""
        session_id = await make_session(label="Planning")
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(session_id)}
        await stub.PutSystemPrompt(storage_pb2.PutSystemPromptRequest(**target, content="p"))
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**target, content="m"))
        await stub.PutInsight(storage_pb2.PutInsightRequest(**target, content=""))
        every = [SYSTEM_PROMPT, MEMORY, INSIGHT]
        reply = await stub.GetSession(storage_pb2.GetSessionRequest(**target, slots=every))
        batch = await stub.BatchGetSlots(
            storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=[str(session_id)])
        )
        assert reply.session == await get(stub, space, session_id)
        assert reply.HasField("slots") and reply.slots == batch.slots[0]
        assert (reply.slots.system_prompt, reply.slots.memory, reply.slots.insight) == (
            "p",
            "m",
            "",
        )
        narrow = await stub.GetSession(
            storage_pb2.GetSessionRequest(**target, slots=[MEMORY, MEMORY])
        )
        assert narrow.slots.memory == "m"
        assert not narrow.slots.HasField("system_prompt")
        assert not narrow.slots.HasField("insight")

    async def test_no_slots_asked_leaves_them_unset(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Without `slots` the reply carries the meta only (no slot is read)."""
        session_id = await make_session()
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(session_id)}
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**target, content="m"))
        reply = await stub.GetSession(storage_pb2.GetSessionRequest(**target))
        assert not reply.HasField("slots")

    async def test_a_session_without_slots_answers_them_unset(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session that never had a slot answers `slots` set (its id) with every slot unset."""
        session_id = await make_session()
        reply = await stub.GetSession(
            storage_pb2.GetSessionRequest(
                space_id=space.sid, session_id=str(session_id), slots=[MEMORY, INSIGHT]
            )
        )
        assert reply.slots == storage_pb2.SessionSlots(session_id=str(session_id))

    async def test_unknown_id_is_not_found(self, stub: Stub, space: TestSpace) -> None:
        """An unknown session answers NOT_FOUND with slots asked for too."""
        err = await rpc_error(
            stub.GetSession(
                storage_pb2.GetSessionRequest(
                    space_id=space.sid, session_id=str(uuid.uuid4()), slots=[MEMORY]
                )
            )
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND


class TestPutSession:
    async def test_replaces_label_and_status(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A put changes label and status, bumps updated_at and keeps created_at (spec §6.1.3)."""
        session_id = await make_session(label="Old")
        before = await get(stub, space, session_id)
        reply = await stub.PutSession(
            storage_pb2.PutSessionRequest(
                space_id=space.sid,
                session=common_pb2.SessionMeta(id=str(session_id), label="New", status=ARCHIVED),
            )
        )
        after = await get(stub, space, session_id)
        assert reply.session == after
        assert (after.label, after.status) == ("New", ARCHIVED)
        assert after.created_at == before.created_at
        assert after.updated_at.ToDatetime() > before.updated_at.ToDatetime()

    async def test_output_only_fields_are_ignored(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """turn_count and the timestamps of a put are ignored: the stored ones stay."""
        session_id = await make_session()
        meta = common_pb2.SessionMeta(id=str(session_id), label="L", status=ACTIVE, turn_count=9)
        meta.created_at.FromSeconds(1)
        reply = await stub.PutSession(
            storage_pb2.PutSessionRequest(space_id=space.sid, session=meta)
        )
        assert reply.session.turn_count == 0
        assert reply.session.created_at.seconds > 1

    async def test_unknown_id_is_not_found_and_creates_nothing(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """An id the tree never created is NOT_FOUND (no upsert), naming only the session."""
        session_id = uuid.uuid4()
        err = await rpc_error(
            stub.PutSession(
                storage_pb2.PutSessionRequest(
                    space_id=space.sid,
                    session=common_pb2.SessionMeta(id=str(session_id), label="X", status=ACTIVE),
                )
            )
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert err.details() == f"session {session_id} not found"
        assert (await rpc_error(get(stub, space, session_id))).code() == grpc.StatusCode.NOT_FOUND

    async def test_allowed_on_provisional(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A put on a provisional session is accepted (writes are, DESIGN §4.1)."""
        session_id = await make_session(provisional=True)
        reply = await stub.PutSession(
            storage_pb2.PutSessionRequest(
                space_id=space.sid,
                session=common_pb2.SessionMeta(id=str(session_id), label="Fork", status=ACTIVE),
            )
        )
        assert reply.session.label == "Fork"


class TestListSessions:
    async def test_filters_orders_and_leaves_out_provisional(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Committed sessions list in creation order, by status; provisional ones are left out."""
        first = await make_session(label="a")
        second = await make_session(label="b", status="archived")
        await make_session(label="hidden", provisional=True)
        third = await make_session(label="c")
        every = await stub.ListSessions(storage_pb2.ListSessionsRequest(space_id=space.sid))
        assert [s.id for s in every.sessions] == [str(first), str(second), str(third)]
        assert every.next_page_token == ""
        archived = await stub.ListSessions(
            storage_pb2.ListSessionsRequest(space_id=space.sid, status=ARCHIVED)
        )
        assert [s.id for s in archived.sessions] == [str(second)]

    async def test_pages_cover_every_session_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Paging by 2 over 5 sessions yields 2, 2, 1 and an empty token on the last page."""
        made = [str(await make_session(label=f"s{i}")) for i in range(5)]
        seen: list[str] = []
        sizes = []
        token = ""
        while True:
            page = await stub.ListSessions(
                storage_pb2.ListSessionsRequest(space_id=space.sid, page_size=2, page_token=token)
            )
            seen.extend(s.id for s in page.sessions)
            sizes.append(len(page.sessions))
            token = page.next_page_token
            if not token:
                break
        assert seen == made
        assert sizes == [2, 2, 1]

    async def test_other_space_is_not_listed(
        self, stub: Stub, space: TestSpace, other_space: TestSpace, make_session: MakeSession
    ) -> None:
        """Another space's sessions never appear in a listing (spec §6.1.6)."""
        await make_session(space_id=other_space.id)
        mine = await make_session()
        page = await stub.ListSessions(storage_pb2.ListSessionsRequest(space_id=space.sid))
        assert [s.id for s in page.sessions] == [str(mine)]

    @pytest.mark.parametrize(
        "edit",
        [
            pytest.param({"at": 2**63 - 1}, id="at-past-9999"),
            pytest.param({"at": 1e300}, id="at-float"),
            pytest.param({"id": 7}, id="id-number"),
        ],
    )
    async def test_an_edited_token_is_invalid(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, edit: dict[str, Any]
    ) -> None:
        """A page token edited to a time or id no session has is INVALID_ARGUMENT on
        page_token, never INTERNAL."""
        for _ in range(3):
            await make_session()
        page = await stub.ListSessions(
            storage_pb2.ListSessionsRequest(space_id=space.sid, page_size=1)
        )
        token = page.next_page_token
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        edited = base64.urlsafe_b64encode(json.dumps({**payload, **edit}).encode()).decode()
        err = await rpc_error(
            stub.ListSessions(
                storage_pb2.ListSessionsRequest(space_id=space.sid, page_size=1, page_token=edited)
            )
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert [v.field for v in field_violations(err)] == ["page_token"]

    async def test_token_of_another_filter_is_invalid(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A page token reused with a different status filter is INVALID_ARGUMENT on page_token."""
        for _ in range(3):
            await make_session()
        page = await stub.ListSessions(
            storage_pb2.ListSessionsRequest(space_id=space.sid, page_size=1)
        )
        err = await rpc_error(
            stub.ListSessions(
                storage_pb2.ListSessionsRequest(
                    space_id=space.sid, status=ACTIVE, page_token=page.next_page_token
                )
            )
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == ["page_token"]
