"""SearchRecords' and SearchSessions' requests: the scope, the order and the page size.

The query text itself is parsed by the service (`query`), where it can never be a
syntax error.
"""

from __future__ import annotations

from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import not_one_of, page_size, parse_uuid, space_uuid
from storage_service.search.service import RecordSearch

MAX_SEARCH_PAGE = 100
DEFAULT_SEARCH_PAGE = 20


def search_page_size(value: int, v: Violations) -> int:
    """A search's page size: 0 = 20, at most 100 (the kernel's check, in its words)."""
    return page_size(value, v, maximum=MAX_SEARCH_PAGE, default=DEFAULT_SEARCH_PAGE)


def record_search(request: storage_pb2.SearchRecordsRequest, v: Violations) -> RecordSearch:
    """A SearchRecords request as its domain input (the query is parsed by the service)."""
    space_id = space_uuid(request.space_id, v)
    session_id = parse_uuid(request.session_id, "session_id", v) if request.session_id else None
    root_id = parse_uuid(request.root_id, "root_id", v) if request.root_id else None
    if request.session_id and request.root_id:
        v.add("root_id", "must be empty when session_id is set (one scope at most)")
    if request.order not in common_pb2.SearchOrder.values():
        v.add("order", not_one_of(common_pb2.SearchOrder, request.order))
    size = search_page_size(request.page_size, v)
    return RecordSearch(
        space_id=space_id,
        query=request.query,
        session_id=session_id,
        root_id=root_id,
        relevance=request.order == common_pb2.SEARCH_ORDER_RELEVANCE,
        page_size=size,
        page_token=request.page_token,
    )
