"""The gateway's composition root: clients, profiles, services, servicer (STYLE §3)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import grpc

from agent_gateway.clients import CallPolicy, StorageClient, TreeClient
from agent_gateway.compose import ConfigLayer, Summarizer
from agent_gateway.config import GatewaySettings, targets
from agent_gateway.faults import Faults, faults_from_setting
from agent_gateway.forks import SessionCreator
from agent_gateway.profiles import load_profiles
from agent_gateway.saga import ProvisioningSaga
from agent_gateway.service import SessionService
from agent_gateway.servicer import AgentGatewayServicer
from agent_gateway.summarizer import ProviderSummarizer
from stello.agent.v1 import agent_pb2_grpc
from stello.auth import KeyStore
from stello.server import ServiceApp
from stello.settings import StelloSettings

SERVICE_NAME = "stello.agent.v1.AgentGateway"


@dataclass(frozen=True, slots=True)
class GatewayClients:
    """The gateway's typed clients of the two services (their channels live with them)."""

    storage: StorageClient
    tree: TreeClient

    @classmethod
    def connect(cls, config: GatewaySettings, settings: StelloSettings) -> GatewayClients:
        """Open one channel per service; the caller's key is added per call."""
        policy = CallPolicy(
            timeout_s=config.call_timeout_s,
            max_retries=config.max_retries,
            backoff_s=config.retry_backoff_s,
        )
        storage = _channel(config.storage_address, settings)
        tree = _channel(config.tree_address, settings)
        return cls(StorageClient(storage, policy), TreeClient(tree, policy))


def _channel(address: str, settings: StelloSettings) -> grpc.aio.Channel:
    target = targets(address)
    if not isinstance(target, str):
        target = "ipv4:" + ",".join(target)
    options: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.lb_policy_name", "round_robin"),
        # Subchannels of our own: a gateway never inherits the reconnect backoff that
        # another channel in the process built up against an address now reused.
        ("grpc.use_local_subchannel_pool", 1),
    ]
    return grpc.aio.insecure_channel(target, options=options)


def create_app(
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
    config: GatewaySettings | None = None,
    *,
    faults: Faults | None = None,
    summarizer: Summarizer | None = None,
    clients: GatewayClients | None = None,
) -> ServiceApp:
    """Build the gateway app.

    The gateway reads no table itself: `pool` serves the kernel's key lookups and
    drives health. `faults` defaults to what ``STELLO_GATEWAY_FAULT`` asks for
    (nothing in production); `summarizer` to the configured LLM provider;
    `clients` to channels to ``config``'s addresses.
    """
    config = config or GatewaySettings()
    clients = clients or GatewayClients.connect(config, settings)
    profiles = load_profiles(config.profiles_file)
    defaults = ConfigLayer(
        config.default_system_prompt,
        tuple(config.default_skills) if config.default_skills is not None else None,
    )
    if summarizer is None:
        from agent_gateway.llm import build_provider

        summarizer = ProviderSummarizer(lambda: build_provider(settings))
    saga = ProvisioningSaga(
        clients.tree, clients.storage, faults or faults_from_setting(config.fault)
    )
    creator = SessionCreator(
        clients.tree,
        clients.storage,
        saga,
        profiles,
        defaults,
        config.saga_budget_s,
        summarizer,
    )
    sessions = SessionService(clients.tree, clients.storage)
    servicer = AgentGatewayServicer(creator, sessions, profiles)

    def register(server: grpc.aio.Server) -> None:
        agent_pb2_grpc.add_AgentGatewayServicer_to_server(servicer, server)

    return ServiceApp(
        name="agent_gateway",
        service_names=(SERVICE_NAME,),
        register=register,
        pool=pool,
        keys=keys,
        settings=settings,
    )
