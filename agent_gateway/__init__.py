"""The agent gateway: fork, send, tool calls, consolidation and the LLM providers.

It composes the storage and tree services over gRPC only (`clients`), never
touching tables; CreateRoot and Fork run as a provisioning saga (`saga`);
Send, SendStream and SubmitToolResults run as leased turns committed in one
storage Transact (`turns`), under leases kept alive while they run
(`lease_keeper`); Consolidate rewrites memory (`consolidation`). The
texts the gateway adds to model calls are one configured set
(`prompt_config`, `llm.prompt_texts`).
"""

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)
from agent_gateway.app import GatewayClients, LazyProvider, create_app
from agent_gateway.clients import Caller, CallPolicy, RequestKey, StorageClient, TreeClient
from agent_gateway.config import GatewaySettings
from agent_gateway.forks.compose import ConfigLayer, ContextMode, PromptMode, Summarizer
from agent_gateway.forks.faults import FAULT_POINTS, ExitFaults, Faults, NoFaults
from agent_gateway.forks.profiles import Profile, ProfileRegistry, load_profiles
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.llm.prompt_config import SessionPrompts, load_prompts
from agent_gateway.reconcile import reconcile
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.turns.lease_keeper import LeaseKeeper, LeaseTimes
from agent_gateway.turns.service import TurnService
from agent_gateway.turns.state import SendInput, SubmitInput, ToolResultInput, TurnDone

__all__ = [
    "FAULT_POINTS",
    "BuiltinTools",
    "CallPolicy",
    "Caller",
    "ConfigLayer",
    "Consolidator",
    "ContextMode",
    "ExitFaults",
    "Faults",
    "GatewayClients",
    "GatewaySettings",
    "LazyProvider",
    "LeaseKeeper",
    "LeaseTimes",
    "NoFaults",
    "Profile",
    "ProfileRegistry",
    "PromptMode",
    "RequestKey",
    "SendInput",
    "SessionPrompts",
    "StorageClient",
    "SubmitInput",
    "Summarizer",
    "ToolResultInput",
    "TreeClient",
    "TurnDone",
    "TurnService",
    "create_app",
    "load_profiles",
    "load_prompts",
    "reconcile",
]
