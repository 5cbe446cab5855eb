"""A client tool the model may call, answered by this program: the SDK without asyncio.

The model decides to call `clock`; the turn stops with the call pending; this
program runs the tool and submits its result, and the turn continues. With
`stello up`'s offline `echo` model, a message `/tool clock {}` makes that
call (a real model calls it when the question needs the time). Errors are
exceptions by what went wrong (`stello_client.exceptions`).

    python examples/python/tool_calls.py "/tool clock {}"
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from stello_client import Client
from stello_client.exceptions import SessionArchived
from stello_client.types import SendResponse, SubmitToolResultsResponse, tool, tool_result

CLOCK = tool("clock", "The current time in UTC", {"type": "object", "properties": {}})


def main(message: str) -> None:
    """One turn with the clock tool, answered until the model needs nothing more."""
    with Client() as client:
        session = client.create_root(label="Tools")
        turn: SendResponse | SubmitToolResultsResponse
        turn = client.send(session.id, message, tools=[CLOCK])
        while turn.pending_tool_calls:
            now = datetime.now(UTC).strftime("%H:%M UTC")
            results = [tool_result(call.id, now) for call in turn.pending_tool_calls]
            print(f"answered {', '.join(c.name for c in turn.pending_tool_calls)}: {now}")
            turn = client.submit_tool_results(session.id, results, tools=[CLOCK])
        print(f"model: {turn.assistant.content}")
        client.archive(session.id)
        try:
            client.send(session.id, "still there?")
        except SessionArchived as exc:
            print(f"refused as expected: {exc.reason} (request {exc.request_id})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tool clock {}")
