"""The SDK's exceptions: each documented gateway error raises its class, with its reason,
field and request id; every stable reason has a class."""

from __future__ import annotations

import ast
import asyncio
import math
import re
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from grpc.aio import Metadata

from agent_gateway.app import GatewayClients
from stello import errors, reasons
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore, new_secret
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello_client import AsyncClient, ConfigurationError, Retry
from stello_client.base import KEY_CHARS, MAX_KEY_CHARS
from stello_client.calls import NO_RETRY, call_options, failure, header_request_id, retryable
from stello_client.connection.flags import MAX_DEADLINE_S
from stello_client.errors import rpc_error_line
from stello_client.exceptions import (
    BY_CODE,
    BY_REASON,
    OVERSIZED_METADATA,
    OVERSIZED_REQUEST,
    CursorExpired,
    DeadlineExceeded,
    InvalidArgument,
    LlmRateLimited,
    NoPendingToolCalls,
    NotFound,
    OutcomeUnknown,
    OutOfRange,
    ProfileNotFound,
    RequestIdReused,
    ResourceExhausted,
    RpcError,
    SessionArchived,
    SessionNotFound,
    SharedMemoryEntryNotFound,
    SpaceNotFound,
    TreeTooLarge,
    TurnInProgress,
    Unauthenticated,
    Unavailable,
    error_class,
    from_rpc_error,
)
from stello_client.types import ForkContext, Record, TextDelta, tool, tool_result
from storage_service.app import create_purger
from storage_service.config import StorageSettings
from tests.cli.processes import client_env, private_env
from tests.gateway.conftest import (  # noqa: F401 (a fixture used by name)
    Backends,
    GatewayStarter,
    Stack,
    StackMaker,
    _make_stack,
    record,
)
from tests.gateway.turns.test_lost_reply import (  # noqa: F401 (a fixture used by name)
    POLICY,
    LoseReplies,
    _losing,
)
from tests.gateway.turns_support import SpyProvider, roles, wait_for
from tests.sdk.conftest import StalledModel, client_of
from tests.support.fixtures import ServerStarter, new_space
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

pytestmark = pytest.mark.sql

REASONS_FILE = Path(reasons.__file__)


def reasons_by_code() -> dict[str, grpc.StatusCode]:
    """Each reason of stello/reasons.py and the status its section (`# ABORTED`) names."""
    found: dict[str, grpc.StatusCode] = {}
    code = None
    for line in REASONS_FILE.read_text().splitlines():
        if line.startswith("# ") and line[2:].strip() in grpc.StatusCode.__members__:
            code = grpc.StatusCode[line[2:].strip()]
        elif "=" in line and not line.startswith((" ", "#", '"')):
            name = ast.literal_eval(line.split("=", 1)[1].strip())
            assert code is not None, f"{name} has no status section"
            found[name] = code
    return found


class TestClasses:
    def test_every_reason_has_its_class(self) -> None:
        """Each stable reason raises a class of its own, a subclass of its status's class (a
        reason added to stello/reasons.py fails here until the SDK names it)."""
        found = reasons_by_code()
        assert found and set(found) == set(BY_REASON)
        for reason, code in found.items():
            cls = error_class(code, reason)
            assert cls is BY_REASON[reason] and issubclass(cls, BY_CODE[code]), reason

    def test_an_unknown_reason_raises_its_status_class(self) -> None:
        """A reason this SDK does not know, or one given with another status, falls back to
        the status's class; a status without a class is Internal."""
        assert (
            error_class(grpc.StatusCode.ABORTED, "SOMETHING_NEW")
            is BY_CODE[grpc.StatusCode.ABORTED]
        )
        assert error_class(grpc.StatusCode.NOT_FOUND, reasons.TURN_IN_PROGRESS) is NotFound
        assert error_class(grpc.StatusCode.UNKNOWN, None).__name__ == "Internal"


class TestOutcomeUnknown:
    def test_retried_only_by_a_call_with_its_own_request_id(self) -> None:
        """OUTCOME_UNKNOWN (the write may have been stored) is retried by a call whose request
        carries its request_id, never by one without; other UNAVAILABLE failures by both."""
        keyed = call_options("k", "Send", timeout=None, retry=Retry(), safe=True, request_id="t")
        unkeyed = call_options("k", "GetTree", timeout=None, retry=Retry(), safe=True)
        assert keyed.keyed and not unkeyed.keyed and unkeyed.request_id
        unknown = OutcomeUnknown("lost", reason=reasons.OUTCOME_UNKNOWN)
        assert retryable(unknown, keyed=True) and not retryable(unknown, keyed=False)
        down = Unavailable("down")
        assert retryable(down, keyed=True) and retryable(down, keyed=False)
        unsafe = call_options("k", "PutMemory", timeout=None, retry=Retry(), safe=False)
        assert unsafe.retry is NO_RETRY

    async def test_a_lost_commit_is_answered_by_the_retry(
        self, make_stack: StackMaker, losing: tuple[LoseReplies, GatewayClients]
    ) -> None:
        """A send whose commit answers got lost (the gateway says OUTCOME_UNKNOWN) is retried
        with its request_id and answers the turn, stored once; without retries it raises
        OutcomeUnknown naming that request_id, and a send with it answers the same turn."""
        lose, clients = losing
        spy = SpyProvider()
        stack = await make_stack(spy, clients=clients)
        async with client_of(stack) as client:
            root = await client.create_root()
            lose.arm("Transact", times=POLICY.max_retries + 1)
            reply = await client.send(root.id, "hello")
            assert len(lose.lost) == POLICY.max_retries + 1
            stored = await stack.records(root.id)
            assert roles(stored) == ["user", "assistant"] and list(reply.records) == stored
            assert len(spy.turns) == 1
        async with client_of(stack, retry=NO_RETRY) as once:
            lose.arm("Transact", times=POLICY.max_retries + 1)
            with pytest.raises(OutcomeUnknown) as caught:
                await once.send(root.id, "again", request_id="lost-turn")
            assert caught.value.request_id == "lost-turn"
            assert caught.value.reason == reasons.OUTCOME_UNKNOWN
            again = await once.send(root.id, "again", request_id="lost-turn")
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant"] * 2 and list(again.records) == stored[2:]
        assert len(spy.turns) == 2


class TestProviderFailures:
    async def test_a_rate_limited_turn_is_tried_once_more_after_its_retry_after(
        self, make_stack: StackMaker
    ) -> None:
        """A turn the provider rate-limits (the gateway has retried it already) is tried once
        more, not 8 times, after the provider's Retry-After, which the error carries as
        RetryInfo (explore10 F6: 8 SDK attempts x 3 gateway tries = 24 provider requests,
        with pauses shorter than the provider asked for)."""
        limited = errors.ResourceExhausted("rate limited", reason=reasons.LLM_RATE_LIMITED)
        limited.retry_after_s = 0.4
        spy = SpyProvider().then(limited, limited, limited)
        stack = await make_stack(spy)
        async with client_of(stack) as client:
            root = await client.create_root()
            began = time.monotonic()
            with pytest.raises(LlmRateLimited) as caught:
                await client.send(root.id, "hi", request_id="limited-1")
            waited = time.monotonic() - began
        assert len(spy.turns) == 2  # the SDK's first attempt and its one retry
        assert caught.value.retry_after_s == pytest.approx(0.4)
        assert waited >= 0.4  # QUICK_RETRY's own first pause is at most 0.05 s

    async def test_a_turn_the_provider_failed_then_answers_is_stored(
        self, make_stack: StackMaker
    ) -> None:
        """The one retry is enough for a provider back within its Retry-After."""
        down = errors.Unavailable("down", reason=reasons.LLM_UNAVAILABLE)
        down.retry_after_s = 0.1
        spy = SpyProvider().then(down)
        stack = await make_stack(spy)
        async with client_of(stack) as client:
            root = await client.create_root()
            reply = await client.send(root.id, "hi", request_id="down-1")
        assert reply.assistant.content == "echo: hi" and len(spy.turns) == 2


class TestRetryArguments:
    @pytest.mark.parametrize(
        ("given", "said"),
        [
            ({"attempts": 0}, r"^Retry\(attempts=0\): expected a whole number of tries, 1 or more"),
            ({"initial_backoff_s": -1}, r"^Retry\(initial_backoff_s=-1\): expected a finite"),
            ({"max_backoff_s": math.nan}, r"^Retry\(max_backoff_s=nan\): expected a finite"),
            ({"multiplier": 0.5}, r"^Retry\(multiplier=0.5\): expected a number of 1 or more"),
            ({"busy_for_s": math.inf}, r"^Retry\(busy_for_s=inf\): expected a finite"),
        ],
    )
    def test_a_retry_no_call_could_follow_is_refused(self, given: Any, said: str) -> None:
        """A Retry field no retry loop can use is a ValueError naming it when the Retry is
        made: attempts=0 or a nan backoff were kept as given (sdk8)."""
        with pytest.raises(ValueError, match=said):
            Retry(**given)

    @pytest.mark.parametrize(
        ("given", "said"),
        [
            ({"attempts": "3"}, r"^Retry\(attempts='3'\): expected a whole number of tries"),
            ({"llm_attempts": 2.5}, r"^Retry\(llm_attempts=2.5\): expected a whole number"),
            ({"attempts": True}, r"^Retry\(attempts=True\): expected a whole number"),
            ({"initial_backoff_s": "1"}, r"^Retry\(initial_backoff_s='1'\): expected a finite"),
            ({"unavailable_for_s": None}, r"^Retry\(unavailable_for_s=None\): expected a"),
            ({"multiplier": "2"}, r"^Retry\(multiplier='2'\): expected a number of 1 or more"),
        ],
    )
    def test_a_retry_field_of_the_wrong_type_is_a_type_error(self, given: Any, said: str) -> None:
        """A Retry field of a type it cannot hold (text, a fraction of a try, None) is a
        TypeError naming it, as every SDK argument of the wrong type is (it was a ValueError;
        attempts="3" once raised TypeError "'>=' not supported ..." at the first failure)."""
        with pytest.raises(TypeError, match=said):
            Retry(**given)

    def test_a_retry_that_is_no_retry_is_refused(self) -> None:
        """`retry=` given anything but a Retry (`retry=3`, meant as attempts) is a TypeError
        naming the argument when the client is made, or `using()` called: it raised
        AttributeError "'int' object has no attribute 'pause'" at the first failed call."""
        three: Any = 3
        said = r"^retry: expected a stello_client.Retry \(Retry\(attempts=3\)\), got 3$"
        with pytest.raises(TypeError, match=said):
            AsyncClient("127.0.0.1:1", "k", "s", retry=three)
        with pytest.raises(TypeError, match=said):
            AsyncClient("127.0.0.1:1", "k", "s").using(retry=three)


class TestLiveErrors:
    async def test_invalid_argument_names_the_keyword(self, client: AsyncClient) -> None:
        """A bad argument is InvalidArgument whose `field` is the keyword that set it."""
        root = await client.create_root()
        with pytest.raises(InvalidArgument) as caught:
            await client.fork(root.id, "x", context="none", inherit_until_seq=1)
        assert caught.value.field == "inherit_until_seq"
        assert caught.value.method == "Fork" and caught.value.request_id

    async def test_a_refused_fork_context_is_told_in_the_sdk_s_words(
        self, client: AsyncClient
    ) -> None:
        """`inherit_until_seq` with a context that is not inherit names the `context` values
        as the SDK takes them (it said "is only allowed with INHERIT context, not NONE", the
        enum's words), the context given by name, as a ForkContext or left out; a number no
        ForkContext has is refused before anything is sent, naming the values (the gateway
        said "unknown ForkContext value 99")."""
        root = await client.create_root()
        for context in ("none", ForkContext.FORK_CONTEXT_NONE, None):
            with pytest.raises(InvalidArgument) as caught:
                await client.fork(root.id, "x", context=context, inherit_until_seq=1)
            assert caught.value.details == (
                "inherit_until_seq: is only allowed with context inherit (this fork's context "
                "is none)"
            )
        numbers: list[Any] = [99, -1]
        for number in numbers:
            with pytest.raises(
                ValueError,
                match=rf"^context: must be one of none, inherit, compress, got {number}$",
            ):
                await client.fork(root.id, "x", context=number)
        assert [node.id for node in await client.get_tree()] == [root.id]

    async def test_out_of_range_names_the_keyword(self, client: AsyncClient) -> None:
        """A fork's inherit_until_seq past the source's last seq is OutOfRange whose `field`
        is the keyword, as InvalidArgument's (it had only `violations`)."""
        root = await client.create_root()
        await client.send(root.id, "hi")
        with pytest.raises(OutOfRange) as caught:
            await client.fork(root.id, "x", context="inherit", inherit_until_seq=3)
        assert caught.value.field == "inherit_until_seq"
        assert "beyond the source's last seq (2)" in caught.value.details

    async def test_not_found_and_archived(self, client: AsyncClient) -> None:
        """An unknown session is NotFound; a turn on an archived one is SessionArchived."""
        with pytest.raises(NotFound):
            await client.get_session(str(uuid.uuid4()))
        root = await client.create_root()
        await client.archive(root.id)
        with pytest.raises(SessionArchived) as caught:
            await client.send(root.id, "hi", request_id="archived-turn")
        assert caught.value.reason == reasons.SESSION_ARCHIVED
        assert caught.value.request_id == "archived-turn"

    async def test_not_found_names_what_is_missing(self, client: AsyncClient) -> None:
        """A NOT_FOUND says by its reason what is missing and names it in `info`: the
        session, a fork's parent, a shared memory slug (explore6 F10: it had no reason)."""
        missing = str(uuid.uuid4())
        with pytest.raises(SessionNotFound) as caught:
            await client.get_session(missing)
        assert caught.value.info == {"session_id": missing}
        with pytest.raises(SessionNotFound) as caught:
            await client.fork(missing, "x")
        assert caught.value.info == {"session_id": missing}
        assert caught.value.reason == reasons.SESSION_NOT_FOUND
        with pytest.raises(SharedMemoryEntryNotFound) as no_entry:
            await client.get_shared_memory_entry("no-such-slug")
        assert no_entry.value.info == {"slug": "no-such-slug"}

    async def test_a_space_that_does_not_exist_is_space_not_found(
        self, stack: Stack, admin_key: str, backends: Backends
    ) -> None:
        """An admin key naming a space id that does not exist is SpaceNotFound, naming it."""
        missing = str(uuid.uuid4())
        async with AsyncClient(stack.gateway.address, admin_key, missing) as client:
            with pytest.raises(SpaceNotFound) as caught:
                await client.get_tree()
        assert caught.value.info == {"space_id": missing}

    async def test_a_space_the_key_does_not_reach_says_what_to_do(
        self, stack: Stack, keys: KeyStore
    ) -> None:
        """A tenant key naming another tenant's space id is SpaceNotFound (the space looks
        as if never made) whose message says to name a space the key reaches and where
        they are listed: it said "space <id> not found" only, which a team whose
        STELLO_SPACE_ID and STELLO_KEY came from two spaces read as the space being gone."""
        other = await new_space(keys)
        async with AsyncClient(stack.gateway.address, other.key, stack.space.sid) as client:
            with pytest.raises(SpaceNotFound) as caught:
                await client.get_tree()
        assert caught.value.info == {"space_id": stack.space.sid}
        assert caught.value.details == (
            f"space {stack.space.sid} not found: name a space this key reaches "
            "(WhoAmI lists them; `stello whoami`)"
        )

    async def test_turn_in_progress_after_the_retries(
        self, client: AsyncClient, stack: Stack
    ) -> None:
        """A session whose lease another turn holds raises TurnInProgress once the retries
        (paused, bounded) are spent."""
        root = await client.create_root()
        await stack.storage.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=stack.space.sid, session_id=root.id, ttl_s=60)
        )
        quick = Retry(attempts=3, initial_backoff_s=0.01, busy_for_s=0)
        async with client_of(stack, retry=quick) as client_once:
            with pytest.raises(TurnInProgress) as caught:
                await client_once.send(root.id, "hi")
        # The `busy` values as the SDK takes them (it said "set busy to BUSY_POLICY_ENQUEUE
        # (wait in line) or BUSY_POLICY_INTERRUPT", the enum's names).
        assert caught.value.details == (
            f"session {root.id} has a turn in progress (busy policy reject); retry after it "
            "ends, or set busy to enqueue (wait in line) or interrupt (stop it and run this turn)"
        )

    async def test_a_dead_gateways_lease_is_waited_out(
        self, client: AsyncClient, stack: Stack
    ) -> None:
        """A session whose turn lease outlives its gateway (here a 2 s lease nobody renews)
        is retried past `attempts` for `busy_for_s`, so the turn runs once the lease ends:
        the default policy's attempts (3.6-7.1 s of pauses) gave up before the gateway's
        10 s lease did (explore4 F3). attempts=1 still never retries."""
        root = await client.create_root()
        await stack.storage.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=stack.space.sid, session_id=root.id, ttl_s=2)
        )
        never = Retry(attempts=1, busy_for_s=30)
        async with client_of(stack, retry=never) as client_never:
            with pytest.raises(TurnInProgress):
                await client_never.send(root.id, "hi")
        patient = Retry(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.3, busy_for_s=10)
        async with client_of(stack, retry=patient) as waiting:
            began = time.monotonic()
            reply = await waiting.send(root.id, "hi")
        assert reply.assistant.content == "echo: hi"
        assert 1.0 < time.monotonic() - began < 10

    async def test_reused_request_id_profile_and_tool_results(self, client: AsyncClient) -> None:
        """RequestIdReused, ProfileNotFound and NoPendingToolCalls, each by its class."""
        await client.create_root(label="a", request_id="same")
        with pytest.raises(RequestIdReused) as reused:
            await client.create_root(label="b", request_id="same")
        assert reused.value.request_id == "same"
        with pytest.raises(ProfileNotFound):
            await client.create_root(profile="nope")
        root = await client.create_root()
        with pytest.raises(NoPendingToolCalls):
            await client.submit_tool_results(root.id, [tool_result("call", "x")])

    async def test_tree_too_large(
        self, start_server: ServerStarter, start_gateway: GatewayStarter, stack: Stack
    ) -> None:
        """GetTree past the tree's cap raises TreeTooLarge."""
        tree = await start_server(partial(tree_app, config=TreeSettings(max_tree_nodes=1)))
        gateway = await start_gateway(tree_address=tree.address)
        async with AsyncClient(
            gateway.address, stack.space.key, stack.space.sid, plaintext=True
        ) as small:
            root = await small.create_root()
            await small.fork(root.id, "child")
            with pytest.raises(TreeTooLarge):
                await small.get_tree()

    async def test_cursor_expired(self, client: AsyncClient, pool: asyncpg.Pool) -> None:
        """Watching after a purged cursor raises CursorExpired (never resumed)."""
        await client.create_root()
        await asyncio.sleep(0.05)
        await create_purger(pool, StorageSettings(event_retention_s=0.01)).run_once()
        await client.create_root()
        with pytest.raises(CursorExpired):
            async for _ in client.watch(after_cursor="0"):
                pass

    async def test_bad_key_and_no_gateway(self, stack: Stack) -> None:
        """A revoked or unknown key is Unauthenticated; no gateway at the address is
        Unavailable once the retries are spent."""
        async with AsyncClient(stack.gateway.address, "stello_nope", stack.space.sid) as bad:
            with pytest.raises(Unauthenticated):
                await bad.get_tree()
        retry = Retry(attempts=2, initial_backoff_s=0.01, unavailable_for_s=0)
        async with AsyncClient("127.0.0.1:1", "k", stack.space.sid, retry=retry) as nowhere:
            with pytest.raises(Unavailable) as caught:
                await nowhere.get_tree()
        assert isinstance(caught.value, RpcError) and caught.value.method == "GetTree"

    async def test_deadline(self, start_gateway: GatewayStarter, stack: Stack) -> None:
        """A call past its `timeout` raises DeadlineExceeded (not retried)."""
        slow = await start_gateway(echo_delay_s=2.0)
        async with AsyncClient(slow.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root()
            with pytest.raises(DeadlineExceeded):
                await client.send(root.id, "hi", timeout=0.3)

    async def test_a_stream_past_its_deadline_after_text_says_what_it_means(
        self, start_gateway: GatewayStarter, stack: Stack
    ) -> None:
        """A stream whose timeout passes after text arrived (gRPC: "Stream removed (Deadline
        Exceeded)") says what a passed deadline means, as `send` does, not gRPC's words
        (explore12 F7)."""
        slow = await start_gateway(provider=StalledModel())
        deltas = 0
        async with AsyncClient(slow.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root()
            with pytest.raises(DeadlineExceeded) as caught:
                async for event in client.stream(root.id, "hello there", timeout=2):
                    deltas += isinstance(event, TextDelta)
        assert deltas == 1
        assert str(caught.value).startswith(
            "DEADLINE_EXCEEDED: the call's deadline passed (timeout=2 s, retries included) "
            "before the gateway answered"
        )

    async def test_an_enqueued_send_past_its_deadline_says_a_retry_is_safe(
        self, start_gateway: GatewayStarter, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """An "enqueue" send whose timeout passes in line raised DeadlineExceeded with gRPC's
        "Deadline Exceeded" (the client's own deadline ends the call before the gateway
        says it left the line): now the message says the call's deadline passed, that a
        turn in line wrote nothing, and that a retry with the same request_id is safe, or
        is the gateway's own, which says nothing was written. The retry stores it once."""
        slow = await start_gateway(echo_delay_s=1.0)
        async with AsyncClient(slow.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root()
            first = asyncio.ensure_future(client.send(root.id, "first"))

            async def first_holds_the_session() -> bool:
                held = "SELECT turn_token FROM sessions WHERE space_id = $1 AND id = $2"
                return await pool.fetchval(held, stack.space.id, uuid.UUID(root.id)) is not None

            await wait_for(first_holds_the_session, within_s=10)
            with pytest.raises(DeadlineExceeded) as caught:
                await client.send(
                    root.id, "second", busy="enqueue", timeout=0.3, request_id="queued"
                )
            await first
            text = str(caught.value)
            if "waited in line" in text:  # the gateway's deadline came first (rarely)
                assert "nothing was written" in text
            else:
                assert text.startswith(
                    "DEADLINE_EXCEEDED: the call's deadline passed (timeout=0.3 s, retries "
                    "included) before the gateway answered: a turn still waiting in the "
                    'session\'s line (busy="enqueue") left it and wrote nothing'
                )
                assert "a retry with the same request_id (queued) is safe" in text
                # The command line's sentence stays its own (it has no request_id to give),
                # naming the timeout that passed: the call's own.
                assert rpc_error_line(caught.value) == (
                    "the gateway did not answer within --timeout 0.3 s, this command's own "
                    "deadline: give it more time with a larger --timeout"
                )
            again = await client.send(root.id, "second", request_id="queued", busy="enqueue")
            assert again.assistant.content == "echo: second"
            stored = [r.content async for r in client.records(root.id)]
        assert stored == ["first", "echo: first", "second", "echo: second"]

    @pytest.mark.parametrize(
        ("method", "safe", "request_id", "said"),
        [
            ("Send", True, "t1", "a retry with the same request_id (t1) is safe: it answers"),
            ("Fork", True, "f1", "whether it was done is not known; a retry with the same "),
            ("GetTree", True, "", "; a read changes nothing: retry it, or give it a longer"),
            ("PutMemory", False, "", "(this call carries no request_id): read the state"),
        ],
    )
    def test_a_deadline_in_grpcs_words_says_what_a_retry_does(
        self, method: str, safe: bool, request_id: str, said: str
    ) -> None:
        """A DEADLINE_EXCEEDED in gRPC's words ("Deadline Exceeded") says the call's
        deadline passed, with its timeout, and what a retry does, by the kind of call; one
        in the gateway's words, or with a reason (LlmTimeout), is left as it is."""
        opts = call_options(
            "k", method, timeout=2.5, retry=Retry(), safe=safe, request_id=request_id
        )
        exc = grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, Metadata(), Metadata(), "Deadline Exceeded"
        )
        error = failure(exc, opts)
        assert isinstance(error, DeadlineExceeded) and error.cause is exc
        assert error.details.startswith(
            "the call's deadline passed (timeout=2.5 s, retries included) before the gateway"
        )
        assert said in error.details and error.method == method
        own = grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, Metadata(), Metadata(), "the saga ran out"
        )
        assert failure(own, opts).details == "the saga ran out"

    async def test_only_the_calls_own_deadline_names_the_timeout(self) -> None:
        """A DEADLINE_EXCEEDED in gRPC's words reads, on the command line, as the command's
        own deadline with its --timeout and how to give it more only when that deadline
        has passed here (`DeadlineExceeded.timeout_s`); one gRPC said earlier came from a
        deadline on the way, which a larger --timeout would not help; a server's own words
        stay as it wrote them. All three said "--timeout sets how long to wait" before,
        without its value, and so did a bound of the gateway's given in gRPC's words."""
        grpc_words = grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, Metadata(), Metadata(), "Deadline Exceeded"
        )
        short = call_options("k", "GetTree", timeout=0.01, retry=Retry(), safe=True)
        await asyncio.sleep(0.02)
        passed = failure(grpc_words, short)
        assert isinstance(passed, DeadlineExceeded) and passed.timeout_s == 0.01
        assert rpc_error_line(passed) == (
            "the gateway did not answer within --timeout 0.01 s, this command's own "
            "deadline: give it more time with a larger --timeout"
        )
        long = call_options("k", "GetTree", timeout=60, retry=Retry(), safe=True)
        early = failure(grpc_words, long)
        assert isinstance(early, DeadlineExceeded) and early.timeout_s is None
        assert rpc_error_line(early) == (
            "the gateway did not answer in time (a deadline on the way passed, not --timeout's)"
        )
        server = grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, Metadata(), Metadata(), "the saga ran out"
        )
        assert rpc_error_line(failure(server, short)) == "the saga ran out"

    async def test_a_space_the_key_does_not_reach(self, stack: Stack, backends: Backends) -> None:
        """A space named that the key does not reach is a ConfigurationError listing its
        spaces, raised by the first call."""
        async with AsyncClient(stack.gateway.address, stack.space.key, "elsewhere") as client:
            with pytest.raises(ConfigurationError, match="no space named 'elsewhere'") as caught:
                await client.get_tree()
        assert caught.value.setting == "space" and stack.space.sid in str(caught.value)

    async def test_an_admin_key_names_other_spaces_by_id(
        self, stack: Stack, admin_key: str, backends: Backends
    ) -> None:
        """An admin key given a name none of its own spaces has is told it reaches other
        spaces by id (it was told it reaches no such space), and by id it does."""
        async with AsyncClient(stack.gateway.address, admin_key, "elsewhere") as client:
            with pytest.raises(ConfigurationError) as caught:
                await client.get_tree()
        assert "an admin key reaches another space by its id, space=ID" in str(caught.value)
        async with AsyncClient(stack.gateway.address, admin_key, stack.space.sid) as client:
            assert await client.get_tree() == []

    @pytest.mark.parametrize("key", ["stello_x\r", "stello x", "ключ"])
    async def test_a_key_no_header_can_carry(self, stack: Stack, key: str) -> None:
        """A key with a character no key has (a pasted line break, a space, non-ASCII) is a
        ConfigurationError naming the key, raised by the client, for `using` too (gRPC
        raised ExecuteBatchError at the first call)."""
        with pytest.raises(ConfigurationError, match="holds a character no key has") as caught:
            AsyncClient(stack.gateway.address, key, stack.space.sid)
        assert caught.value.setting == "key"
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            with pytest.raises(ConfigurationError, match="holds a character no key has"):
                client.using(key=key)

    async def test_a_key_longer_than_any_key_is_refused(self, stack: Stack) -> None:
        """A key longer than any Stello makes is a ConfigurationError naming the key, for
        `using` too: sent, gRPC's metadata limit refused it and the SDK blamed the size of
        a reply ("raise STELLO_MAX_MESSAGE_BYTES"). A key Stello makes fits."""
        assert len(new_secret(uuid.uuid4())) == KEY_CHARS <= MAX_KEY_CHARS
        key = "stello_" + "x" * 20_000
        with pytest.raises(ConfigurationError, match=r"is 20007 characters, longer than any key"):
            AsyncClient(stack.gateway.address, key, stack.space.sid)
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            with pytest.raises(ConfigurationError, match="longer than any key") as caught:
                client.using(key="x" * (MAX_KEY_CHARS + 1))
        assert caught.value.setting == "key"

    async def test_headers_past_grpcs_metadata_limit_are_not_a_large_reply(
        self, stack: Stack
    ) -> None:
        """gRPC's metadata limit (a call's headers of 20 KB) is told from a message past
        STELLO_MAX_MESSAGE_BYTES: the sentence does not advise raising that limit."""
        metadata = (("authorization", "Bearer " + "x" * 20_000),)
        async with grpc.aio.insecure_channel(stack.gateway.address) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.WhoAmI(agent_pb2.WhoAmIRequest(), metadata=metadata)
        error = from_rpc_error(caught.value)
        assert isinstance(error, ResourceExhausted)
        assert error.details == OVERSIZED_METADATA
        line = rpc_error_line(error, stack.gateway.address)
        assert "metadata limit" in line and "raise the limit" not in line

    async def test_a_request_past_this_client_s_limit_is_told_as_the_request(
        self, stack: Stack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A request this client will not send (over its max_message_bytes: gRPC says "Sent
        message larger than max") is told as the request, never as a reply to ask less of
        (explore12 F7: a 70 MB send said so)."""
        monkeypatch.setenv("STELLO_MAX_MESSAGE_BYTES", str(64 * 1024))
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root(label="big")
            with pytest.raises(ResourceExhausted) as caught:
                await client.send(root.id, "x" * 100_000)
        assert caught.value.details == OVERSIZED_REQUEST
        assert "the request was larger" in str(caught.value)

    async def test_an_empty_key_is_refused_not_replaced(
        self, stack: Stack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`key=""` (an unset variable read by the program) is a ConfigurationError naming
        the key: it fell back to STELLO_KEY, so the client acted with a key it was not given.
        So are an empty gateway and space, and `using(key="")`, which called as the
        client's own key (a console serving many users with one client)."""
        monkeypatch.setenv("STELLO_KEY", stack.space.key)
        address, space = stack.gateway.address, stack.space.sid
        for given, setting in (
            ((address, "", space), "key"),
            (("", None, space), "gateway"),
            ((address, None, " "), "space"),
        ):
            with pytest.raises(ConfigurationError, match=rf"^{setting}= is empty") as caught:
                AsyncClient(*given)
            assert caught.value.setting == setting
        async with AsyncClient(address, stack.space.key, space) as client:
            # What using() does with one left out (it said "STELLO_KEY or what `stello up`
            # saved", which using() never reads).
            with pytest.raises(ConfigurationError) as caught:
                client.using(key="")
            assert str(caught.value) == (
                "key= is empty: give one, or leave it out to call with this client's key"
            )
            with pytest.raises(ConfigurationError) as caught:
                client.using(space=" ")
            assert str(caught.value) == (
                "space= is empty: give one, or leave it out to call in this client's space "
                "(another key's: the one space it reaches)"
            )

    async def test_a_keyword_of_the_wrong_type_is_named(self, stack: Stack) -> None:
        """A keyword whose value its field cannot hold raises TypeError (or ValueError past
        a number's range) naming the keyword; protobuf's own "bad argument type for
        built-in operation" named none. Nothing is sent."""
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root()
            with pytest.raises(TypeError, match=r"^label: not a value this field holds, got 5: it"):
                await client.create_root(label=5)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"^set: not a value this field holds"):
                await client.update_session_metadata(root.id, set={"a": 1})  # type: ignore[dict-item]
            with pytest.raises(ValueError, match=r"^max_depth: not a value this field holds"):
                await client.get_tree(max_depth=2**40)
            assert [node.id for node in await client.get_tree()] == [root.id]

    async def test_a_refused_keyword_says_what_its_field_holds(self, client: AsyncClient) -> None:
        """The refusal of a keyword's value says what the field holds, so the caller knows
        what to pass: `import_session(records=[{...}])` (dicts, where Records go) and
        `update_session_metadata(set={"a": 1})` said only "not a value this field holds,
        got ..." (sdk8). Nothing is sent."""
        root = await client.create_root()
        row: Any = {"role": "user", "content": "hi"}
        five: Any = 5
        numbers: Any = {"a": 1}
        text: Any = "no"
        wrong: list[tuple[Any, str]] = [
            (partial(client.create_root, label=five), r"^label: .*, got 5: it holds str$"),
            (
                partial(client.update_session_metadata, root.id, set=numbers),
                r"^set: .*: it holds a mapping of str to str$",
            ),
            (
                partial(client.import_session, "x", records=[row]),
                r"^records: .*: it holds a list of stello_client.types.Record$",
            ),
            (
                partial(client.get_tree, max_depth=2**40),
                r"^max_depth: .*: it holds an int from -2147483648 to 2147483647$",
            ),
            (partial(client.pin_session, root.id, pinned=text), r"^pinned: .*: it holds bool$"),
        ]
        for call, message in wrong:
            with pytest.raises((TypeError, ValueError), match=message):
                await call()
        assert [node.id for node in await client.get_tree()] == [root.id]

    async def test_an_enum_keyword_of_the_wrong_type_is_named(self, client: AsyncClient) -> None:
        """An enum keyword (`status`, `busy`, `context`, `order`, `role`, `kinds`) given a
        value that is no name or number raises TypeError naming the keyword: a list or a
        float raised AttributeError "'list' object has no attribute 'upper'", bytes a
        TypeError about startswith, naming nothing. An unknown kind names its place in
        `kinds` (it said "kind must be one of"). Nothing is sent."""
        root = await client.create_root()
        wrong: list[tuple[str, Any, Any]] = [
            ("status", ["archived"], partial(client.list_session_digests)),
            ("busy", 1.5, partial(client.send, root.id, "x")),
            ("context", {"inherit": 1}, partial(client.fork, root.id, "f")),
            ("order", b"relevance", partial(client.search_records, "x")),
            ("role", ["user"], partial(client.list_records, root.id)),
        ]
        for name, value, call in wrong:
            with pytest.raises(TypeError, match=rf"^{name}: not a value this field holds, got "):
                await call(**{name: value})
        kinds: list[Any] = ["turn_committed", 2.5]
        with pytest.raises(TypeError, match=r"^kinds\[1\]: not a value this field holds"):
            client.watch(kinds=kinds)
        with pytest.raises(ValueError, match=r"^kinds\[1\]: must be one of session_committed, "):
            client.watch(kinds=["turn_committed", "turn_comitted"])
        assert [n.id for n in await client.get_tree()] == [root.id]
        assert (await client.get_session(root.id)).turn_count == 0

    async def test_text_that_is_not_unicode_is_named(self, stack: Stack) -> None:
        """Text with a lone surrogate (what JSON's "\\ud800" decodes to) raises ValueError
        naming the keyword, in a request's fields and in the optional ones set after it
        (the re-raise was TypeError "function takes exactly 5 arguments"). Nothing is sent."""
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root()
            calls: list[tuple[str, Any]] = [
                ("label", partial(client.create_root, label="a\ud800")),
                ("system_prompt", partial(client.create_root, system_prompt="\udfff")),
                ("content", partial(client.send, root.id, "hi\ud800")),
                ("content", partial(client.put_insight, root.id, "x\ud800")),
                ("label", partial(client.fork, root.id, "f\udc00")),
            ]
            for name, call in calls:
                with pytest.raises(ValueError, match=rf"^{name}: is not valid Unicode text"):
                    await call()
            assert [node.id for node in await client.get_tree()] == [root.id]

    async def test_a_digest_filter_of_the_wrong_type_or_name_is_named(self, stack: Stack) -> None:
        """A digest filter whose value is not of its type raises TypeError naming the filter
        (`metadata=["a"]` raised dict()'s "dictionary update sequence element #0 ...", a
        string time AttributeError), and a misspelt filter is refused: it was dropped, so
        the listing answered every session. Nothing is sent."""
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            root = await client.create_root(metadata={"team": "a"})
            await client.create_root()
            refused: list[dict[str, Any]] = [
                {"metadata": ["a"]},
                {"metadata": {"team": 1}},
                {"label_prefix": 5},
                {"roots_only": "yes"},
                {"created_after": "2026-01-01"},
            ]
            for filters in refused:
                (name,) = filters
                with pytest.raises(TypeError, match=rf"^{name}: not a value this filter holds"):
                    await client.list_session_digests(**filters)
            with pytest.raises(TypeError, match=r"^metdata: no such filter; the filters are "):
                await client.list_session_digests(metdata={"team": "a"})  # type: ignore[call-arg]
            reply = await client.list_session_digests(metadata={"team": "a"})
            assert [digest.id for digest in reply.digests] == [root.id]

    async def test_a_naive_datetime_filter_is_refused(self, client: AsyncClient) -> None:
        """A naive datetime as a time filter raises TypeError naming the filter and asking
        for a timezone-aware one, from the listing and from the iterator: it was read as
        UTC, so local time east of UTC listed nothing just created, without a word. An
        aware one, in any zone, lists what it should."""
        root = await client.create_root()
        naive = datetime.now() - timedelta(minutes=5)
        for name in ("created_after", "created_before", "updated_after", "updated_before"):
            filters: dict[str, Any] = {name: naive}
            with pytest.raises(TypeError, match=rf"^{name}: .* a timezone-aware datetime"):
                await client.list_session_digests(**filters)
            with pytest.raises(TypeError, match=rf"^{name}: .* a timezone-aware datetime"):
                [d async for d in client.digests(**filters)]
        east = timezone(timedelta(hours=8))
        aware = (datetime.now(UTC) - timedelta(minutes=5)).astimezone(east)
        assert [d.id async for d in client.digests(created_after=aware)] == [root.id]

    @pytest.mark.parametrize("seconds", [0, -1, math.inf, math.nan])
    async def test_a_timeout_no_call_could_meet(self, stack: Stack, seconds: Any) -> None:
        """0, negative, inf or nan, as the client's timeout or a call's, is a ValueError
        naming the argument (each ended the call in DeadlineExceeded)."""
        address, key, space = stack.gateway.address, stack.space.key, stack.space.sid
        for name in ("timeout", "turn_timeout"):
            with pytest.raises(ValueError, match=rf"^{name}: expected a number of seconds"):
                AsyncClient(address, key, space, **{name: seconds})
        async with AsyncClient(address, key, space) as client:
            with pytest.raises(ValueError, match=r"^timeout: expected a number of seconds"):
                await client.get_tree(timeout=seconds)

    @pytest.mark.parametrize("seconds", ["5", b"5", [5], True])
    async def test_a_timeout_not_a_number_is_a_type_error(self, stack: Stack, seconds: Any) -> None:
        """Text, bytes, a list or a bool as the client's timeout or a call's is a TypeError
        naming the argument, as every SDK argument of the wrong type is (it was a ValueError,
        which says the type was right and the value not)."""
        address, key, space = stack.gateway.address, stack.space.key, stack.space.sid
        got = re.escape(repr(seconds))
        for name in ("timeout", "turn_timeout"):
            said = rf"^{name}: expected a number of seconds or None, got {got}$"
            with pytest.raises(TypeError, match=said):
                AsyncClient(address, key, space, **{name: seconds})
        said = rf"^timeout: expected a number of seconds or None, got {got}$"
        async with AsyncClient(address, key, space) as client:
            with pytest.raises(TypeError, match=said):
                await client.get_tree(timeout=seconds)
            with pytest.raises(TypeError, match=said):
                [r async for r in client.records("s", timeout=seconds)]

    async def test_a_timeout_past_grpcs_range_is_refused(self, stack: Stack) -> None:
        """A timeout over a year (1e10 s, meant as "no limit") is a ValueError saying the
        longest and that None means none: gRPC's deadline overflowed and ended the call at
        once as DeadlineExceeded, "whether it was done is not known", though nothing was
        sent. A year itself is a deadline like any other."""
        address, key, space = stack.gateway.address, stack.space.key, stack.space.sid
        longest = r"expected at most 31,622,400 seconds \(a year\), or None for no deadline"
        for name in ("timeout", "turn_timeout"):
            huge: dict[str, Any] = {name: 1e10}
            with pytest.raises(ValueError, match=rf"^{name}: {longest}, got 10000000000.0$"):
                AsyncClient(address, key, space, **huge)
        async with AsyncClient(address, key, space, timeout=MAX_DEADLINE_S) as client:
            with pytest.raises(ValueError, match=rf"^timeout: {longest}"):
                await client.get_tree(timeout=MAX_DEADLINE_S + 1)
            root = await client.create_root(label="a year", timeout=MAX_DEADLINE_S)
            assert [n.id for n in await client.get_tree()] == [root.id]

    async def test_one_value_where_a_list_is_expected_is_named(self, client: AsyncClient) -> None:
        """A str (or one message) where a list is expected raises TypeError naming the
        keyword, before anything is sent: `remove="team"` removed the keys "t", "a" and
        "m" and left "team"; `skills="tides"` sent the skills t, i, d, e, s; one tool
        raised "'ToolDefinition' object is not iterable", naming nothing."""
        root = await client.create_root(metadata={"team": "search", "t": "1", "a": "2"})
        one_value: list[tuple[str, Any]] = [
            ("remove", partial(client.update_session_metadata, root.id, remove="team")),
            ("skills", partial(client.create_root, skills="tides")),
            ("skills", partial(client.fork, root.id, "child", skills="tides")),
            ("tools", partial(client.send, root.id, "hi", tools=tool("look", "looks"))),  # type: ignore[arg-type]
            ("records", partial(client.import_session, "copy", records=record("user", "x"))),  # type: ignore[arg-type]
            ("results", partial(client.submit_tool_results, root.id, tool_result("c1", "ok"))),  # type: ignore[arg-type]
        ]
        for name, call in one_value:
            with pytest.raises(TypeError, match=rf"^{name}: expected a list, got one value "):
                await call()
        with pytest.raises(TypeError, match=r"^kinds: expected a list, got one value 'turn_c"):
            client.watch(kinds="turn_committed")
        assert [n.id for n in await client.get_tree()] == [root.id]
        view = await client.get_session(root.id)
        assert dict(view.metadata) == {"team": "search", "t": "1", "a": "2"}
        assert view.turn_count == 0

    async def test_a_session_where_its_id_is_expected_says_pass_its_id(
        self, client: AsyncClient
    ) -> None:
        """A session (the SessionSummary create_root answers) passed where its id goes
        raises TypeError naming the keyword, the message's type and `.id`: it quoted the
        message's text cut at 60 characters, over three lines ("got id: \"...\"\nlabel:
        \"Root\"\nst…"). Nothing is sent."""
        root = await client.create_root()
        view: Any = await client.get_session(root.id)
        summary: Any = root
        said = (
            r"not a value this field holds, got a SessionSummary: it holds str \(pass its \.id\)$"
        )
        calls: list[tuple[str, Any]] = [
            ("session_id", partial(client.send, summary, "hi")),
            ("session_id", partial(client.get_session, summary)),
            ("source_session_id", partial(client.fork, summary, "x")),
            ("topology_parent_id", partial(client.fork, root.id, "x", topology_parent_id=summary)),
            ("session_id", partial(client.list_records, summary)),
        ]
        for name, call in calls:
            with pytest.raises(TypeError, match=rf"^{name}: {said}"):
                await call()
        with pytest.raises(
            TypeError, match=r"^session_id: .*SessionView: .* \(pass its \.node\.id\)$"
        ):
            await client.get_session(view)
        assert (await client.get_session(root.id)).turn_count == 0

    async def test_a_digest_root_that_is_not_a_root_names_no_internal_rpc(
        self, client: AsyncClient
    ) -> None:
        """`list_session_digests(root_id=...)` naming a child says to give the root of its
        tree, the last of its lineage (`get_lineage`): it said "the last of GetAncestors",
        the tree service's own RPC, which no gateway client has."""
        root = await client.create_root()
        child = await client.fork(root.id, "child")
        with pytest.raises(InvalidArgument) as caught:
            await client.list_session_digests(root_id=child.id)
        assert caught.value.field == "filter.root_id"
        assert caught.value.details == (
            f"filter.root_id: names session {child.id}, which is not a root (its parent is "
            f"{root.id}): give the root of its tree (the last of its lineage), or "
            "filter.parent_id"
        )

    async def test_an_imported_record_without_a_role_names_the_roles(
        self, client: AsyncClient
    ) -> None:
        """An imported record with no role (or a number no role has) names the roles, as
        the SDK's `role=` takes them: it said "must be a record role, got UNSPECIFIED", the
        enum's word."""
        records = [Record(content="hi"), Record(role=common_pb2.RECORD_ROLE_USER, content="x")]
        unknown: Any = 9
        records.append(Record(role=unknown, content="y"))
        with pytest.raises(InvalidArgument) as caught:
            await client.import_session("copy", records=records)
        assert [(v.field, v.description) for v in caught.value.violations] == [
            ("records[0].role", "must be one of system, user, assistant, tool, got none (unset)"),
            ("records[2].role", "must be one of system, user, assistant, tool, got 9"),
        ]

    async def test_a_watch_cursor_that_is_not_text_is_named(self, client: AsyncClient) -> None:
        """`watch(after_cursor=123)` (a cursor kept as a number) raises TypeError naming
        `after_cursor` when the watch is made; its first event raised protobuf's "bad
        argument type for built-in operation", naming nothing."""
        number: Any = 123
        with pytest.raises(
            TypeError, match=r"^after_cursor: not a value this field holds, got 123: it holds str$"
        ):
            client.watch(after_cursor=number)

    async def test_no_tool_results_is_refused_before_any_call(self) -> None:
        """`submit_tool_results` (and its stream) given no results raises ValueError naming
        `results` and what it must hold, before any call (here: none could be made, the
        gateway's address is closed and the space a name WhoAmI would settle); it was the
        gateway's raw INVALID_ARGUMENT "results: must answer the pending tool calls (none
        given)", even where no tool call was pending (NoPendingToolCalls otherwise)."""
        said = (
            r"^results: is empty: give one tool_result\(tool_call_id, content\) per tool call "
            r"the turn is waiting for \(its pending_tool_calls\)$"
        )
        once = Retry(attempts=1, unavailable_for_s=0)
        async with AsyncClient("127.0.0.1:1", "k", "a-space", retry=once) as client:
            nothing: list[Any] = [[], (), iter([])]
            for empty in nothing:
                with pytest.raises(ValueError, match=said):
                    await client.submit_tool_results(str(uuid.uuid4()), empty)
                with pytest.raises(ValueError, match=said):
                    async for _ in client.submit_tool_results_stream(str(uuid.uuid4()), empty):
                        pass

    @pytest.mark.parametrize("request_id", ["café-42", "line\nbreak", "tab\tid", "Ключ"])
    async def test_a_request_id_no_header_can_carry_is_sent_encoded(
        self, client: AsyncClient, request_id: str
    ) -> None:
        """A request_id with a character a header cannot hold (non-ASCII, a line break, a
        tab) goes out percent-encoded in `x-request-id` and as it is in the request: the
        gateway takes it, and a replay answers the stored turn. gRPC raised its own
        ExecuteBatchError ("Illegal header value"), which is no RpcError."""
        root = await client.create_root()
        first = await client.send(root.id, "hello", request_id=request_id)
        again = await client.send(root.id, "hello", request_id=request_id)
        assert again == first and first.assistant.content == "echo: hello"
        assert (await client.get_session(root.id)).turn_count == 1

    def test_the_header_carries_printable_ascii_as_it_is(self) -> None:
        """`x-request-id`: printable ASCII as it is (a percent sign included), anything
        else percent-encoded as UTF-8."""
        assert header_request_id("req-1 %x~") == "req-1 %x~"
        assert header_request_id("café\n") == "caf%C3%A9%0A"

    async def test_no_space_named_is_the_keys_one(self, stack: Stack, tmp_path: Path) -> None:
        """With no space given anywhere, the client acts in the one space the key reaches
        (a program with only STELLO_GATEWAY and STELLO_KEY set, nothing saved)."""
        env = private_env(tmp_path / "home")
        env.update(STELLO_GATEWAY=stack.gateway.address, STELLO_KEY=stack.space.key)
        code = (
            "import asyncio; from stello_client import AsyncClient\n"
            "async def main():\n"
            "    async with AsyncClient() as client:\n"
            "        print(await client.space_id())\n"
            "asyncio.run(main())\n"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, env=client_env(env), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(process.communicate(), 60)
        assert (process.returncode, out.decode().strip()) == (0, stack.space.sid)


class TestToolArguments:
    def test_a_tool_schema_that_is_not_json_names_where(self) -> None:
        """A tool's `parameters` holding what JSON has not (a set, a datetime) raises
        TypeError naming `parameters` and the place in it: it was protobuf's ValueError
        "Unexpected type", naming nothing; one that is not a mapping said "cannot convert
        dictionary update sequence element #0 to a sequence"."""
        not_json: list[tuple[Any, str]] = [
            (
                {"type": "object", "properties": {"a": {"enum": {1, 2}}}},
                r"^parameters: \['properties'\]\['a'\]\['enum'\] holds \{1, 2\}, which JSON "
                r"has not \(a schema holds dicts, lists, str, numbers, bool and None\)$",
            ),
            (
                {"default": [1, datetime(2026, 1, 1, tzinfo=UTC)]},
                r"^parameters: \['default'\]\[1\] holds datetime.datetime\(2026, ",
            ),
            ({1: "x"}, r"^parameters: holds the key 1, which JSON has not \(its keys are str\)"),
            ([1, 2], r"^parameters: expected a JSON schema as a dict, got \[1, 2\]$"),
        ]
        for parameters, said in not_json:
            with pytest.raises(TypeError, match=said):
                tool("look", "looks", parameters)

    def test_a_tool_result_of_the_wrong_type_is_named(self) -> None:
        """`tool_result` given a value its field cannot hold raises TypeError naming the
        argument: content 5 raised protobuf's "bad argument type for built-in operation"."""
        five: Any = 5
        with pytest.raises(
            TypeError, match=r"^content: not a value this field holds, got 5: it holds str$"
        ):
            tool_result("call", five)
        with pytest.raises(TypeError, match=r"^tool_call_id: .*, got 5: it holds str$"):
            tool_result(five, "x")
        with pytest.raises(TypeError, match=r"^name: .*, got 5: it holds str$"):
            tool(five)
