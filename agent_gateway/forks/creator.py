"""CreateRoot and Fork: validate, read the source, compose, then run the saga (DESIGN §4.1).

Everything that can refuse a request (an unknown profile, a missing template
variable, profile_vars given without a profile or naming a variable it does not
have, a bad option, a system prompt or opening prompt over storage's limits, an
unknown source or parent, a failed COMPRESS summary) does so before anything is
written. The COMPRESS summary's model calls are made knowing the caller's deadline
(`agent_gateway.llm.deadlines`): a provider's wait past it fails the fork at once, with
the provider's status. The whole operation has a time budget of at most half the provisioning
TTL, so a saga never outlives its provisional session.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent_gateway.clients import Caller, RequestKey, StorageClient, TreeClient
from agent_gateway.forks.compose import (
    ConfigLayer,
    ContextMode,
    ProfileLayer,
    Summarizer,
    compose,
    effective_context,
    opening_prompt,
)
from agent_gateway.forks.inputs import (
    ForkInput,
    RootInput,
    SizeLimits,
    assistant_record,
)
from agent_gateway.forks.profiles import ProfileRegistry, each_variable
from agent_gateway.forks.saga import ProvisioningSaga, SessionPlan
from agent_gateway.llm import Prompts
from agent_gateway.llm.deadlines import bounded
from stello.common.v1 import common_pb2
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    OutOfRange,
)
from stello.reasons import PROVIDER_NOT_CONFIGURED
from stello.storage.v1 import storage_pb2

# Internal ids get a scope prefix and suffixes (/again1/storage): keep them short.
MAX_PLAIN_REQUEST_ID = 120


@dataclass(frozen=True, slots=True)
class _Tail:
    """What a COMPRESS fork summarises: the source's newest summary and the records after
    it (the newest `FORK_TAIL_RECORDS` at most; `omitted` older ones between them)."""

    summary: str | None = None
    records: Sequence[common_pb2.Record] = ()
    omitted: int = 0


@dataclass(frozen=True, slots=True)
class _Source:
    config: ConfigLayer
    tail: _Tail = _Tail()
    """COMPRESS: what to summarise (INHERIT reads nothing: storage inherits by reference)."""


FORK_TAIL_RECORDS = 1000
"""A COMPRESS fork reads at most this many of the source's newest records (one page)."""


def internal_request_id(rpc: str, client_request_id: str) -> str:
    """The id the saga's internal calls use: scoped per RPC; generated when the client gave none."""
    if not client_request_id:
        return f"agent.{rpc}/gen-{uuid.uuid4().hex}"
    if len(client_request_id) > MAX_PLAIN_REQUEST_ID:
        digest = hashlib.sha256(client_request_id.encode()).hexdigest()
        return f"agent.{rpc}/sha256-{digest}"
    return f"agent.{rpc}/{client_request_id}"


def client_key(rpc: str, client_request_id: str, request_hash: bytes) -> RequestKey | None:
    """The key a request is remembered under; None without a client request_id."""
    if not client_request_id:
        return None
    if not request_hash:
        raise ValueError("a request with a request_id needs its fingerprint")
    return RequestKey(f"agent.{rpc}", client_request_id, request_hash)


class SessionCreator:
    """CreateRoot and Fork over the storage and tree clients."""

    def __init__(
        self,
        tree: TreeClient,
        storage: StorageClient,
        saga: ProvisioningSaga,
        profiles: ProfileRegistry,
        defaults: ConfigLayer,
        budget_s: float,
        summarizer: Summarizer | None = None,
        *,
        prompts: Prompts,
        limits: SizeLimits | None = None,
    ) -> None:
        """Set up CreateRoot and Fork.

        Args:
            tree: the tree client.
            storage: the storage client.
            saga: runs the provisioning protocol.
            profiles: the configured fork profiles.
            defaults: the gateway's defaults layer.
            budget_s: the time a CreateRoot/Fork may take.
            summarizer: summarises a compress fork's source; None = such forks refused
                (create_app always gives one).
            prompts: the configured texts (the `parent_context` block).
            limits: the record and slot sizes storage accepts (checked before writing).
        """
        self._limits = limits or SizeLimits()
        self._tree = tree
        self._storage = storage
        self._saga = saga
        self._profiles = profiles
        self._defaults = defaults
        self._budget_s = budget_s
        self._summarizer = summarizer
        self._prompts = prompts

    async def create_root(self, caller: Caller, request: RootInput) -> common_pb2.SessionSummary:
        """Create a root session: defaults -> profile -> request; the profile's prompt opens it."""
        self._limits.check_request(request.system_prompt, None)
        profile = self._profile(request.profile, request.profile_vars)
        options = ConfigLayer(request.system_prompt, request.skills)
        config = compose(self._defaults, ConfigLayer(), profile, options)
        opening = opening_prompt(None, profile)
        plan = SessionPlan(
            space_id=request.space_id,
            label=request.label,
            config=config.to_proto(),
            system_prompt=config.system_prompt or None,
            records=(assistant_record(opening),) if opening else (),
            metadata=tuple(sorted(request.metadata.items())),
        )
        self._limits.check_plan(plan.system_prompt, opening, "profile")
        request_id = internal_request_id("CreateRoot", request.request_id)
        key = client_key("CreateRoot", request.request_id, request.request_hash)
        return await self._within_budget(
            self._create_root(caller.within(self._budget_s), plan, request_id, key)
        )

    async def _create_root(
        self,
        caller: Caller,
        plan: SessionPlan,
        request_id: str,
        key: RequestKey | None,
    ) -> common_pb2.SessionSummary:
        earlier = await self._saga.replay(caller, plan.space_id, key) if key else None
        return earlier or await self._saga.run(caller, plan, request_id, key)

    async def fork(self, caller: Caller, request: ForkInput) -> common_pb2.SessionSummary:
        """Fork `request.source_id` into a new session (STELLO-SPEC §4.4, DESIGN §4.1)."""
        self._limits.check_request(request.system_prompt, request.prompt)
        profile = self._profile(request.profile, request.profile_vars)
        context = effective_context(request.context, profile)
        if request.inherit_until_seq is not None and context is not ContextMode.INHERIT:
            raise InvalidArgument.field(
                "inherit_until_seq",
                f"is only allowed with context inherit (this fork's context is {context})",
            )
        if context is ContextMode.COMPRESS and self._summarizer is None:
            raise FailedPrecondition(
                # In the words clients write (context="compress", `--context compress`).
                "a fork with context compress needs an LLM provider, and none is configured",
                reason=PROVIDER_NOT_CONFIGURED,
            )
        request_id = internal_request_id("Fork", request.request_id)
        key = client_key("Fork", request.request_id, request.request_hash)
        return await self._within_budget(
            self._fork(caller.within(self._budget_s), request, profile, context, request_id, key)
        )

    async def _fork(
        self,
        caller: Caller,
        request: ForkInput,
        profile: ProfileLayer | None,
        context: ContextMode,
        request_id: str,
        key: RequestKey | None,
    ) -> common_pb2.SessionSummary:
        options = ConfigLayer(request.system_prompt, request.skills)
        # A request seen before is answered from what it made (even if the source has changed
        # or gone since): looked up beside the reads, so it costs no time.
        earlier, source = await asyncio.gather(
            self._saga.replay(caller, request.space_id, key) if key else _none(),
            self._read_source(caller, request, context),
            return_exceptions=True,
        )
        if isinstance(earlier, BaseException):
            raise earlier
        if earlier is not None:
            return earlier
        if isinstance(source, BaseException):
            raise source
        config = compose(self._defaults, source.config, profile, options)
        records: list[common_pb2.Record] = []
        if context is ContextMode.COMPRESS and (source.tail.records or source.tail.summary):
            assert self._summarizer is not None  # checked in fork()
            tail = source.tail
            summary = tail.summary or ""
            if tail.records:
                # Made knowing the caller's deadline, as a turn's compression is: a
                # provider's wait past it fails the fork at once, before anything is written.
                with bounded(caller.deadline):
                    summary = await self._summarizer.summarize_for_fork(
                        tail.records, summary=tail.summary, omitted=tail.omitted
                    )
            prompt = self._prompts.with_parent_context(config.system_prompt, summary)
            config = replace(config, system_prompt=prompt)
        opening = opening_prompt(request.prompt, profile)
        if opening:
            records.append(assistant_record(opening))
        plan = SessionPlan(
            space_id=request.space_id,
            label=request.label,
            parent_id=request.topology_parent_id or request.source_id,
            source_id=request.source_id,
            config=config.to_proto(),
            # Only a non-empty prompt is written (spec §4.4.4 step 2); when no layer gives
            # one the child keeps the source's slot, copied by the saga's Transact.
            system_prompt=config.system_prompt or None,
            copy_system_prompt=config.system_prompt is None,
            inherit=context is ContextMode.INHERIT,
            inherit_until_seq=request.inherit_until_seq,
            records=tuple(records),
            metadata=tuple(sorted(request.metadata.items())),
            copy_metadata=request.copy_metadata,
        )
        opening_from = "prompt" if request.prompt is not None else "profile"
        self._limits.check_plan(plan.system_prompt, opening, opening_from)
        return await self._saga.run(caller, plan, request_id, key)

    async def _read_source(
        self, caller: Caller, request: ForkInput, context: ContextMode
    ) -> _Source:
        """Read the source's config and COMPRESS tail (as needed) at once.

        Neither the prompt slot nor (INHERIT) a record is read: storage copies the
        slot when no layer gives a prompt and gives the child the source's records
        by reference, both in the saga's Transact (DESIGN §4.1, §4.4).
        """
        space, source = request.space_id, request.source_id
        reads: list[Any] = [self._tree.get_config(caller, space, source)]
        if context is ContextMode.COMPRESS:
            reads.append(self._tail(caller, space, source))
        else:
            reads.append(_none())
        until = request.inherit_until_seq
        reads.append(
            source_last_seq(self._storage, caller, space, source) if until is not None else _none()
        )
        parent = request.topology_parent_id
        if parent is not None and parent != source:
            # Fails early (NOT_FOUND) before any LLM call when the parent is unknown: its
            # config, two key probes (its node would read its children and refs, as many
            # as forks were placed under it).
            reads.append(self._tree.get_config(caller, space, parent))
        config, found, last, *_ = await asyncio.gather(*reads)
        if until is not None and last is not None:
            check_cut(until, last)  # before any write: the saga has not started (issue 36)
        layer = ConfigLayer.from_proto(config)
        return _Source(layer, found if isinstance(found, _Tail) else _Tail())

    async def _tail(self, caller: Caller, space: uuid.UUID, source: uuid.UUID) -> _Tail:
        """The source's newest summary and its newest records after it (bounded reads)."""
        cache = await self._storage.get_compression_cache(caller, space, source)
        covered = cache.covered_until_seq if cache else 0
        newest = storage_pb2.ListRecordsRequest(
            space_id=str(space),
            session_id=str(source),
            after_seq=covered,
            newest_first=True,
            limit=FORK_TAIL_RECORDS,
        )
        page = await self._storage.list_records(caller, newest)
        omitted = 0
        if page.next_page_token and page.records:
            oldest = storage_pb2.ListRecordsRequest(
                space_id=str(space), session_id=str(source), after_seq=covered, limit=1
            )
            first = (await self._storage.list_records(caller, oldest)).records[0].seq
            omitted = page.records[0].seq - first
        return _Tail(cache.summary if cache else None, list(page.records), omitted)

    def _profile(self, name: str | None, values: Mapping[str, str]) -> ProfileLayer | None:
        """The request's profile, rendered with its `profile_vars`; None without one.

        Raises:
            InvalidArgument: `profile_vars` without a profile (nothing would read
                them), or not matching the profile's template variables.
            FailedPrecondition: reason PROFILE_NOT_FOUND.
        """
        if name is None:
            if values:
                raise InvalidArgument.fields(
                    each_variable(
                        values,
                        "is given without a profile (profile_vars fill the {name} variables "
                        "of a profile's template): name the profile, or leave it out",
                    )
                )
            return None
        return self._profiles.require(name).resolve(values)

    async def _within_budget(
        self, work: Coroutine[Any, Any, common_pb2.SessionSummary]
    ) -> common_pb2.SessionSummary:
        return await within_budget(self._budget_s, work)


async def source_last_seq(
    storage: StorageClient, caller: Caller, space: uuid.UUID, source: uuid.UUID
) -> int:
    """The last seq ever assigned in the source (its counter, HistoryProgress.last_seq; 0
    = none): one storage GetSession, no record read, whatever the history's length."""
    _, _, progress = await storage.get_session_with_slots(caller, space, source, (), progress=True)
    return int(progress.last_seq)


def check_cut(until: int, last: int) -> None:
    """A cut of a source's records (`inherit_until_seq`) is at most its last seq.

    Raises:
        OutOfRange: `until` is beyond `last`.
    """
    if until > last:
        raise OutOfRange.field(
            "inherit_until_seq", f"{until} is beyond the source's last seq ({last})"
        )


async def within_budget(
    budget_s: float, work: Coroutine[Any, Any, common_pb2.SessionSummary]
) -> common_pb2.SessionSummary:
    """Await a session creation; DEADLINE_EXCEEDED once it has taken `budget_s`.

    Raises:
        DeadlineExceeded: the budget ran out (nothing was made visible).
    """
    try:
        async with asyncio.timeout(budget_s):
            return await work
    except TimeoutError as exc:
        raise DeadlineExceeded(
            f"session creation did not finish within its {budget_s:g} s budget; "
            "nothing was made visible, retry with the same request_id"
        ) from exc


async def _none() -> None:
    return None
