"""SearchRecords' `root_id` scope names a root (storage.proto: "records owned by the sessions of
that root's tree"): another session's id is refused, naming its root, rather than answered
with an empty page."""

from __future__ import annotations

import grpc
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2
from tests.storage.helpers import rec, rpc_error
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import Stub, found, search
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql


async def test_a_root_id_that_is_no_root_is_named(
    stub: Stub, space: TestSpace, make_session: MakeSession
) -> None:
    """A child's id as root_id is INVALID_ARGUMENT naming `root_id` and the child's root (it
    answered an empty page: no record's owner has a child as its root, so the search a
    client meant, the child's tree, silently found nothing); its root's id finds both."""
    root = await make_session()
    child = await make_session(parent=root)
    for sid in (root, child):
        await append(stub, space, sid, rec("scoped word"))
    error = await rpc_error(
        stub.SearchRecords(
            storage_pb2.SearchRecordsRequest(space_id=space.sid, query="scoped", root_id=str(child))
        )
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    [violation] = field_violations(error)
    assert violation.field == "root_id"
    assert str(root) in violation.description
    assert found(await search(stub, space, "scoped", root_id=str(root))) == {
        (str(root), 1),
        (str(child), 1),
    }
