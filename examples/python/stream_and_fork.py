"""Stream a turn, fork the session, and walk the tree: the SDK's quick start, asyncio.

Run it against a running Stello (`stello up` in another shell): with nothing
set it reads what `stello up` saved; STELLO_GATEWAY, STELLO_KEY and
STELLO_SPACE_ID override that.

    python examples/python/stream_and_fork.py "What is a fork?"
"""

from __future__ import annotations

import asyncio
import sys

from stello_client import AsyncClient
from stello_client.types import SendResponse, TextDelta, ToolCall


async def main(question: str) -> None:
    """Create a root, stream a turn on it, fork it with its records, ask the fork again."""
    async with AsyncClient() as client:
        root = await client.create_root(label="Quick start")
        async for event in client.stream(root.id, question):
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
            elif isinstance(event, ToolCall):
                print(f"\n[tool call: {event.name}]")
            elif isinstance(event, SendResponse):
                print(f"\n[stored: {len(event.records)} records]")
        fork = await client.fork(root.id, "Another angle", context="inherit")
        reply = await client.send(fork.id, "Say it in one line.")
        print(f"fork: {reply.assistant.content}")
        for node in await client.get_tree(root_id=root.id):
            print(f"{'  ' * node.depth}{node.label} (turns: {node.turn_count})")
        async for record in client.records(fork.id):
            mark = " (inherited)" if record.inherited else ""
            print(f"#{record.seq}{mark}: {record.content}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "What is a fork?"))
