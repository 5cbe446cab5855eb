"""The gateway's composition root: clients, profiles, services, servicer (STYLE §3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import asyncpg
import grpc
from prometheus_client import CollectorRegistry

from agent_gateway.background.runner import BackgroundRunner, RunnerLimits
from agent_gateway.clients import CallPolicy, StorageClient, TreeClient
from agent_gateway.config import GatewaySettings
from agent_gateway.config_checks import targets
from agent_gateway.forks.compose import ConfigLayer, Summarizer
from agent_gateway.forks.creator import SessionCreator
from agent_gateway.forks.faults import Faults, faults_from_setting
from agent_gateway.forks.guard import ForkGuard
from agent_gateway.forks.imports import SessionImporter
from agent_gateway.forks.inputs import SizeLimits
from agent_gateway.forks.profiles import ProfileRegistry, load_profiles
from agent_gateway.forks.saga import ProvisioningSaga
from agent_gateway.history.background_fold import BackgroundFolds
from agent_gateway.history.budget import Calibration, Counter
from agent_gateway.history.compression import TurnCompression
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.history.folding import Folder
from agent_gateway.history.summarizer import ProviderSummarizer
from agent_gateway.llm import (
    LLMProvider,
    Prompts,
)
from agent_gateway.llm.lazy import LazyProvider
from agent_gateway.llm.prompts.config import SessionPrompts, load_prompts
from agent_gateway.memory.index import IndexCaps
from agent_gateway.memory.shared import SharedMemory
from agent_gateway.servicer import AgentGatewayServicer
from agent_gateway.sessions.service import SessionService
from agent_gateway.sessions.watch import Watchers
from agent_gateway.sessions.watch_ends import key_check
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.tools.create_session import CreateSessionTool
from agent_gateway.tools.memory import MemoryTools
from agent_gateway.tools.skills import SkillRegistry, load_skills
from agent_gateway.turns.lease_keeper import LeaseKeeper, LeaseTimes
from agent_gateway.turns.queue import TurnLine
from agent_gateway.turns.requests import ContentLimits
from agent_gateway.turns.service import TurnService
from stello.agent.v1 import agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import ClientTls, open_channel, read_pem
from stello.serving.inproc import LocalChannel, LocalServer
from stello.serving.server import ServiceApp, raw_replies
from stello.settings import StelloSettings

SERVICE_NAME = "stello.agent.v1.AgentGateway"
RAW_REPLIES = frozenset({f"/{SERVICE_NAME}/GetTree"})
"""Methods whose servicer returns the reply's bytes (GetTree passes the tree's on)."""


@dataclass(frozen=True, slots=True)
class GatewayClients:
    """The gateway's typed clients of the two services (their channels live with them)."""

    storage: StorageClient
    tree: TreeClient

    @classmethod
    def connect(
        cls,
        config: GatewaySettings,
        settings: StelloSettings,
        *,
        local: Mapping[str, LocalServer] | None = None,
    ) -> GatewayClients:
        """Open `config.service_connections` channels per service (TLS when configured), taken
        in turn; the caller's key is added per call.

        A service in `local` ("storage", "tree": its server runs in this process) is called
        in-process for its unary methods (`stello.serving.inproc.LocalChannel`), the rest over its
        channel.

        Raises:
            stello.errors.FailedPrecondition: a TLS file cannot be read.
        """
        policy = CallPolicy(
            timeout_s=config.call_timeout_s,
            long_timeout_s=config.long_call_timeout_s,
            max_retries=config.max_retries,
            backoff_s=config.retry_backoff_s,
        )
        tls = services_tls(config)
        local = local or {}
        storage, tree = (
            _channel(address, settings, tls, local.get(name), config.service_connections)
            for name, address in (
                ("storage", config.storage_address),
                ("tree", config.tree_address),
            )
        )
        return cls(
            StorageClient(storage, policy, config.storage_address),
            TreeClient(tree, policy, config.tree_address),
        )


def services_tls(config: GatewaySettings) -> ClientTls | None:
    """The TLS material of the channels to storage and tree; None = plaintext.

    Raises:
        FailedPrecondition: a file cannot be read, named by its variable.
    """
    if config.services_ca_file is None:
        return None
    cert, key = config.services_cert_file, config.services_key_file
    return ClientTls(
        read_pem(config.services_ca_file, "STELLO_GATEWAY_SERVICES_CA_FILE"),
        read_pem(cert, "STELLO_GATEWAY_SERVICES_CERT_FILE") if cert else None,
        read_pem(key, "STELLO_GATEWAY_SERVICES_KEY_FILE") if key else None,
        config.services_server_name or None,
    )


def _channel(
    address: str,
    settings: StelloSettings,
    tls: ClientTls | None,
    local: LocalServer | None,
    connections: int,
) -> grpc.aio.Channel:
    if local is not None:
        connections = 1  # only streams take the network: one connection is plenty
    network = open_channel(
        targets(address),
        max_message_bytes=settings.max_message_bytes,
        tls=tls,
        connections=connections,
    )
    return network if local is None else LocalChannel(local, network)


def create_app(
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
    config: GatewaySettings | None = None,
    *,
    faults: Faults | None = None,
    summarizer: Summarizer | None = None,
    clients: GatewayClients | None = None,
    provider: LLMProvider | None = None,
    prompts: Prompts | None = None,
    profiles: ProfileRegistry | None = None,
    skills: SkillRegistry | None = None,
) -> ServiceApp:
    """Build the gateway app.

    The gateway reads no table itself: `pool` serves the kernel's key lookups and
    drives health. `faults` defaults to what ``STELLO_GATEWAY_FAULT`` asks for
    (nothing in production); `provider` to the one ``STELLO_LLM_PROVIDER`` names
    (built on first use; `echo` reports ``config.echo_max_context_tokens``);
    `summarizer` to the fork-compress prompt over that provider; `clients` to
    channels to ``config``'s addresses; `prompts`, `profiles` and `skills` to what
    ``config`` names (`__main__` reads them before anything starts).

    Raises:
        PromptsFileError, ProfilesFileError, SkillsFileError: a file is not valid.
    """
    config = config or GatewaySettings()
    prompts = prompts or load_prompts(config.prompts, config.prompts_file)
    profiles = profiles if profiles is not None else load_profiles(config.profiles_file)
    clients = clients or GatewayClients.connect(config, settings)
    defaults = ConfigLayer(
        config.default_system_prompt,
        tuple(config.default_skills) if config.default_skills is not None else None,
    )
    owned: tuple[LazyProvider, ...] = ()
    if provider is None:
        from agent_gateway.llm import build_provider, missing_api_key

        echo_window, echo_delay = config.echo_max_context_tokens, config.echo_delay_s
        provider = LazyProvider(
            lambda: build_provider(
                settings, max_context_tokens=echo_window, echo_delay_s=echo_delay
            ),
            missing_key=missing_api_key(settings),
        )
        owned = (provider,)  # a provider passed in belongs to the caller, who closes it
    # One calibration per provider: what its tokenizer counts over the gateway's bound.
    counter = Counter(Calibration())
    folder = Folder(provider, prompts, counter, settings.max_record_bytes, settings.max_slot_bytes)
    if summarizer is None:
        summarizer = ProviderSummarizer(lambda: folder, prompts)
    saga = ProvisioningSaga(
        clients.tree, clients.storage, faults or faults_from_setting(config.fault)
    )
    sizes = SizeLimits(settings.max_record_bytes, settings.max_slot_bytes)
    creator = SessionCreator(
        clients.tree,
        clients.storage,
        saga,
        profiles,
        defaults,
        config.saga_budget_s,
        summarizer,
        prompts=prompts,
        limits=sizes,
    )
    session_prompts = SessionPrompts(clients.tree, prompts)
    memory = SharedMemory(clients.storage, max_body_bytes=settings.max_slot_bytes)
    sessions = SessionService(
        clients.tree,
        clients.storage,
        max_reply_bytes=settings.max_message_bytes,
        max_page_bytes=min(config.max_page_bytes, settings.max_message_bytes // 2),
    )
    apps: list[ServiceApp] = []

    def registry() -> CollectorRegistry | None:
        metrics = apps[0].metrics if apps else None
        return metrics.registry if metrics is not None else None

    runner = BackgroundRunner(
        clients.storage,
        RunnerLimits(
            max_jobs=config.background_max_jobs,
            claim_ttl_s=config.job_claim_ttl_s,
            stop_grace_s=config.background_stop_grace_s,
            call_timeout_s=config.call_timeout_s,
            takeover_key=config.jobs_key.get_secret_value() if config.jobs_key else None,
            takeover_interval_s=config.job_takeover_interval_s,
        ),
        registry=registry,
    )
    folds = BackgroundFolds(
        clients.storage, folder, session_prompts, runner, max_calls=config.fold_max_calls
    )
    consolidator = Consolidator(
        clients.storage,
        folder,
        session_prompts,
        runner,
        every_n_turns=config.consolidate_every_n_turns,
        max_calls=config.consolidate_max_calls,
        registry=registry,
    )
    times = LeaseTimes(config.turn_lease_ttl_s, config.turn_max_s, backoff_s=config.retry_backoff_s)
    leases = LeaseKeeper(clients.storage, times, runner)
    guard = ForkGuard(
        clients.storage,
        prompts,
        min_turns=config.fork_min_turns,
        cooldown_turns=config.fork_cooldown_turns,
    )
    skills = skills if skills is not None else load_skills(config.skills_file)
    builtins = BuiltinTools(
        create_session=(
            CreateSessionTool(creator, profiles, prompts, skills, guard)
            if config.builtin_tools
            else None
        ),
        memory=MemoryTools(memory),
        memory_by_default=config.memory_tools,
        skills=skills,
        tree=clients.tree,
    )
    watchers = Watchers(
        clients.storage,
        config.watch_poll_interval_s,
        ring_events=config.watch_ring_events,
        key_check=key_check(keys),
        recheck_s=settings.auth_cache_ttl_s,
        max_age_s=config.watch_max_age_s,
    )
    line = TurnLine(
        clients.storage,
        leases,
        watchers.session_changes,
        max_waiters=config.turn_queue_max,
        max_wait_s=config.turn_max_s,
    )
    turns = TurnService(
        clients.storage,
        provider,
        builtins,
        consolidator,
        session_prompts,
        TurnCompression(clients.storage, folder, session_prompts, counter),
        folds,
        counter,
        max_tool_rounds=config.max_tool_rounds,
        leases=leases,
        line=line,
        record_bytes=settings.max_record_bytes,
        memory_index=IndexCaps(config.memory_index_max_entries, config.memory_index_max_tokens),
    )
    # A write through this gateway wakes the space's poller at once (DESIGN §4.6).
    clients.storage.after_write = clients.tree.after_write = watchers.wake
    importer = SessionImporter(
        clients.storage, saga, config.saga_budget_s, settings.max_message_bytes
    )
    servicer = AgentGatewayServicer(
        creator,
        sessions,
        profiles,
        turns,
        consolidator,
        watchers,
        importer,
        keys,
        memory,
        builtins,
        clients.tree,
        limits=ContentLimits(config.max_content_bytes, settings.max_record_bytes),
        sizes=sizes,
    )

    def register(server: grpc.aio.Server) -> None:
        agent_pb2_grpc.add_AgentGatewayServicer_to_server(
            servicer, raw_replies(server, RAW_REPLIES)
        )

    app = ServiceApp(
        name="agent_gateway",
        service_names=(SERVICE_NAME,),
        register=register,
        pool=pool,
        keys=keys,
        settings=settings,
        metrics_port=config.metrics_port,
        metrics_setting="STELLO_GATEWAY_METRICS_PORT",
        # Stopped in reverse: the runner's jobs (consolidations, folds, releases still
        # being retried) get their moment and give their claims back before the provider
        # and the channels close.
        background=(*owned, consolidator, runner, watchers),
        at_shutdown=(watchers.close,),
    )
    apps.append(app)
    return app
