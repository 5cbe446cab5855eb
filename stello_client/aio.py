"""`AsyncClient`: the gateway's API for asyncio programs, one method per RPC.

The methods live in their groups (`sessions`, `turns`, `reads`,
`shared_memory`, `watching`) over `base.ClientBase` (the connection, the
caller, deadlines and retries); this class puts them together.
"""

from __future__ import annotations

from stello_client.methods.reads import ReadCalls
from stello_client.methods.retention import RetentionCalls
from stello_client.methods.sessions import SessionCalls
from stello_client.methods.shared_memory import SharedMemoryCalls
from stello_client.methods.slots import SlotCalls
from stello_client.methods.turns import TurnCalls
from stello_client.methods.watching import WatchCalls

# One method per AgentGateway RPC (tests/sdk check that every RPC of the proto has one).
RPC_METHODS = {
    "CreateRoot": "create_root",
    "Fork": "fork",
    "Send": "send",
    "SendStream": "stream",
    "SubmitToolResults": "submit_tool_results",
    "SubmitToolResultsStream": "submit_tool_results_stream",
    "Consolidate": "consolidate",
    "ListSessionDigests": "list_session_digests",
    "GetSession": "get_session",
    "GetLineage": "get_lineage",
    "GetTree": "get_tree",
    "ListRecords": "list_records",
    "SearchRecords": "search_records",
    "SearchSessions": "search_sessions",
    "PutInsight": "put_insight",
    "PutMemory": "put_memory",
    "ListSharedMemory": "list_shared_memory",
    "GetSharedMemoryEntry": "get_shared_memory_entry",
    "UpsertSharedMemoryEntry": "upsert_shared_memory_entry",
    "RemoveSharedMemoryEntry": "remove_shared_memory_entry",
    "Archive": "archive",
    "Unarchive": "unarchive",
    "DeleteSession": "delete_session",
    "ListProfiles": "list_profiles",
    "ListSkills": "list_skills",
    "WatchSpace": "watch",
    "UpdateLabel": "update_label",
    "UpdateSessionMetadata": "update_session_metadata",
    "ResolveSessionPrefix": "resolve_session_prefix",
    "WhoAmI": "who_am_i",
    "ImportSession": "import_session",
    "GetRetention": "get_retention",
    "PutRetention": "put_retention",
    "ApplyRetention": "apply_retention",
    "PinSession": "pin_session",
}
"""Each RPC's method; `records`, `digests`, `lineage` and `shared_memory` walk the pages."""


class AsyncClient(
    SessionCalls,
    SlotCalls,
    TurnCalls,
    ReadCalls,
    SharedMemoryCalls,
    WatchCalls,
    RetentionCalls,
):
    """The Stello gateway for asyncio: ``async with AsyncClient() as client: ...``.

    Connection from the arguments, else STELLO_GATEWAY / STELLO_KEY /
    STELLO_SPACE_ID (and STELLO_CA_FILE... for TLS), else what `stello up`
    saved (see `ClientBase.__init__`). Every call carries the key and a
    deadline; reads and writes with a request_id are retried on UNAVAILABLE;
    failures raise `stello_client.exceptions.RpcError` subclasses.
    """
