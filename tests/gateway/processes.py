"""`python -m agent_gateway` as a real process over the in-process storage and tree."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.gateway.conftest import Backends


@asynccontextmanager
async def gateway_process(
    backends: Backends, database_env: dict[str, str], fault: str, **settings: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`python -m agent_gateway` over the in-process storage and tree, with a fault set ("" =
    none) and more variables (`settings`, by their full names)."""
    env = {
        **os.environ,
        **database_env,
        "STELLO_AUTH_CACHE_TTL_S": "0",
        "STELLO_GATEWAY_PORT": "0",
        "STELLO_GATEWAY_STORAGE_ADDRESS": backends.storage.address,
        "STELLO_GATEWAY_TREE_ADDRESS": backends.tree.address,
        "STELLO_GATEWAY_PROVISIONING_TTL_S": str(backends.tree_config.provisioning_ttl_s),
        "STELLO_GATEWAY_FAULT": fault,
        **settings,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_gateway",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await process.stderr.readline()).decode()
                lines.append(line)
                found = re.search(r"listening on port (\d+)", line)
                if found:
                    break
                if not line:
                    raise AssertionError("gateway process ended early:\n" + "".join(lines))
        drain = asyncio.create_task(process.stderr.read())
        try:
            yield process, f"127.0.0.1:{found.group(1)}"
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()
            await drain
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
