"""The Python SDK of Stello's gateway, and what the `stello` command and the console share.

    from stello_client import AsyncClient   # or Client, without asyncio

    async with AsyncClient() as client:     # STELLO_GATEWAY, STELLO_KEY, or `stello up`'s
        root = await client.create_root(label="Research")
        async for event in client.stream(root.id, "Hello"):
            ...

- `AsyncClient` / `Client`: one method per gateway RPC (`aio`, `sync`, over
  `base`, `channel`, `requests` and `calls`: key, request ids, deadlines, safe retries),
  mixed in from `sessions`, `slots`, `turns`, `reads`, `shared_memory`, `retention`
  and `watching` (`watch()`);
- `exceptions`: what a failed call raises, by status and ErrorInfo reason;
- `types`: the generated messages the methods take and answer, enum names;
- `target`, `credentials`: where to connect (arguments, environment, `stello up`'s file);
- `errors`, `flags`, `dicts`: for the command line and the console — a failure as
  one sentence, the connection flags, replies as plain dicts.

Names are loaded on first use (`import stello_client` loads no grpc), so a
program that imports it to answer ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.calls import Retry
    from stello_client.connection.target import TlsFiles
    from stello_client.exceptions import (
        ConfigurationError,
        InvalidArgument,
        NotFound,
        RpcError,
        StelloClientError,
    )
    from stello_client.methods.watching import Watch
    from stello_client.sync import Client
    from stello_client.types import tool, tool_result

_WHERE = {
    "AsyncClient": "stello_client.aio",
    "Client": "stello_client.sync",
    "Retry": "stello_client.calls",
    "TlsFiles": "stello_client.connection.target",
    "Watch": "stello_client.methods.watching",
    "StelloClientError": "stello_client.exceptions",
    "ConfigurationError": "stello_client.exceptions",
    "RpcError": "stello_client.exceptions",
    "InvalidArgument": "stello_client.exceptions",
    "NotFound": "stello_client.exceptions",
    "tool": "stello_client.types",
    "tool_result": "stello_client.types",
}

__all__ = [
    "AsyncClient",
    "Client",
    "ConfigurationError",
    "InvalidArgument",
    "NotFound",
    "Retry",
    "RpcError",
    "StelloClientError",
    "TlsFiles",
    "Watch",
    "tool",
    "tool_result",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'stello_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
