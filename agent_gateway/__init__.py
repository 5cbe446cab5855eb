"""The agent gateway: fork, send, tool calls, consolidation and the LLM providers.

It composes the storage and tree services over gRPC only (`clients`), never
touching tables; CreateRoot and Fork run as a provisioning saga (`saga`).
"""

from agent_gateway.app import GatewayClients, create_app
from agent_gateway.clients import Caller, CallPolicy, StorageClient, TreeClient
from agent_gateway.compose import ConfigLayer, ContextMode, PromptMode, Summarizer
from agent_gateway.config import GatewaySettings
from agent_gateway.faults import FAULT_POINTS, ExitFaults, Faults, NoFaults
from agent_gateway.profiles import Profile, ProfileRegistry, load_profiles
from agent_gateway.reconcile import reconcile

__all__ = [
    "FAULT_POINTS",
    "CallPolicy",
    "Caller",
    "ConfigLayer",
    "ContextMode",
    "ExitFaults",
    "Faults",
    "GatewayClients",
    "GatewaySettings",
    "NoFaults",
    "Profile",
    "ProfileRegistry",
    "PromptMode",
    "StorageClient",
    "Summarizer",
    "TreeClient",
    "create_app",
    "load_profiles",
    "reconcile",
]
