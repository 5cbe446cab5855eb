"""WatchSpace (DESIGN §4.6): its request validated (`watch_input`), the events streamed
after the cursor it starts from, which is sent first as metadata.

Mixed into `gateway.AgentGatewayServicer`; the delivery is `sessions.watch.Watchers`'.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.sessions.watch import Watchers, WatchInput
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.channels import WATCH_CURSOR_METADATA
from stello.common.v1 import common_pb2
from stello.enum_words import one_of
from stello.errors import Violations

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


def watch_input(request: agent_pb2.WatchSpaceRequest) -> WatchInput:
    """WatchSpace's request, validated: the space, the cursor's position, the kinds kept."""
    violations = Violations()
    space_id = validation.space_uuid(request.space_id, violations)
    after = None
    if request.HasField("after_cursor"):
        cursor = request.after_cursor
        if cursor.isascii() and cursor.isdigit() and len(cursor) <= 18:
            after = int(cursor)
        elif not cursor:
            # Set but empty: what a client's "saved cursor or empty" gives on a first start.
            violations.add(
                "after_cursor",
                "is set but empty: leave it unset to start at the present, or give a cursor "
                "WatchSpace sent (SpaceEvent.cursor)",
            )
        else:
            violations.add(
                "after_cursor",
                "must be a cursor WatchSpace sent (SpaceEvent.cursor); leave it unset to start "
                "at the present",
            )
    listed = ""  # the first unknown kind lists the kinds; the others point to it
    for index, kind in enumerate(request.kinds):
        if kind not in common_pb2.EventKind.values() or kind == common_pb2.EVENT_KIND_UNSPECIFIED:
            if listed:
                refusal = one_of([f"the kinds listed for {listed}"], kind)
            else:
                listed, refusal = (
                    f"kinds[{index}]",
                    validation.not_one_of(common_pb2.EventKind, kind),
                )
            violations.add(f"kinds[{index}]", refusal)
    violations.raise_if_any()
    return WatchInput(space_id, after, frozenset(request.kinds))


class WatchRpcs:
    """WatchSpace."""

    _watchers: Watchers

    async def WatchSpace(
        self, request: agent_pb2.WatchSpaceRequest, context: Context
    ) -> AsyncIterator[agent_pb2.WatchSpaceResponse]:
        """Stream the space's events after the cursor (sent first as metadata), then live ones."""

        async def started(position: int) -> None:
            await context.send_initial_metadata(((WATCH_CURSOR_METADATA, str(position)),))

        async for event in self._watchers.watch(_caller(context), watch_input(request), started):
            yield agent_pb2.WatchSpaceResponse(event=event)
