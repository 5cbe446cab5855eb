"""ClaimJob through the gateway's storage client: retried on UNAVAILABLE, granted once.

A small relay stands between the client and the real storage service: it
passes the first ClaimJob on (storage grants it) and then loses the reply
(UNAVAILABLE), as a connection dropped after the commit would.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.clients import Caller, CallPolicy, StorageClient
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.gateway.conftest import Backends, Stack

pytestmark = pytest.mark.sql

JOB = "SELECT token, runs FROM background_jobs WHERE space_id = $1 AND session_id = $2"


@dataclass(slots=True)
class LosingRelay(storage_pb2_grpc.SessionStorageServicer):
    """Relays ClaimJob to storage; the first `lose` replies are lost after storage answered."""

    storage: Any
    lose: int = 1
    granted: list[bool] = field(default_factory=list)

    async def ClaimJob(self, request: Any, context: Any) -> storage_pb2.ClaimJobResponse:
        """Relay; lose the reply while `lose` lasts."""
        metadata = [(k, v) for k, v in context.invocation_metadata() if k == "authorization"]
        reply: storage_pb2.ClaimJobResponse = await self.storage.ClaimJob(
            request, metadata=metadata
        )
        self.granted.append(reply.granted)
        if self.lose:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the reply was lost")
        return reply


@pytest.fixture(name="relay")
async def _relay(backends: Backends) -> AsyncIterator[tuple[LosingRelay, StorageClient]]:
    upstream = open_channel(backends.storage.address)
    relay = LosingRelay(storage_pb2_grpc.SessionStorageStub(upstream))
    server = grpc.aio.server()
    storage_pb2_grpc.add_SessionStorageServicer_to_server(relay, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}")
    yield relay, StorageClient(channel, CallPolicy(timeout_s=5.0, max_retries=2, backoff_s=0.01))
    await channel.close()
    await server.stop(None)
    await upstream.close()


class TestRetriedClaim:
    async def test_a_lost_claim_reply_is_retried_and_granted_once(
        self, relay: tuple[LosingRelay, StorageClient], stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """The first ClaimJob is granted but its reply lost: the client retries it, and the
        retry is granted the same claim (one run, the token the client sent), not refused
        by its own claim (on main: not retried, the job blocked until the claim expired)."""
        servicer, client = relay
        session = (await stack.root()).id
        reply = await client.claim_job(
            Caller(stack.space.key),
            stack.space.id,
            uuid.UUID(session),
            common_pb2.JOB_KIND_CONSOLIDATE,
            30,
        )
        assert servicer.granted == [True, True]
        assert reply.granted and reply.job.runs == 1
        row = await pool.fetchrow(JOB, stack.space.id, uuid.UUID(session))
        assert row is not None and (str(row["token"]), row["runs"]) == (reply.token, 1)
