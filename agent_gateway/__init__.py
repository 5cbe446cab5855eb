"""The agent gateway: fork, send, tool calls, consolidation and the LLM providers.

It composes the storage and tree services over gRPC only, never touching
tables. Its rooms, each a folder, from the RPCs down (a room imports only the
rooms below it; `lint-imports` checks it):

- `servicer/`: proto <-> domain, one domain call per RPC;
- `turns/`: Send, SendStream, SubmitToolResults(Stream) — a turn from request to commit;
- `sessions/`: joined reads over storage and tree, pass-through writes, WatchSpace;
- `tools/`: the built-in tools a turn offers (fork, shared memory, skills);
- `forks/`: CreateRoot, Fork and ImportSession through the provisioning saga;
- `memory/`: the space's shared memory and its index in a turn's context;
- `history/`: a turn's context and token budget, compression, folds, consolidation;
- `background/`: the one runner of work done after answering (claims, budgets, metrics);
- `llm/`: the providers behind one interface, and the configured prompt texts;
- `clients/`: typed clients of storage and tree, the only way to data.

`app` is the composition root (STYLE §3), `config` the gateway's settings (`config_checks`
the checks its validators make), `files` the prompts, profiles and skills files its settings
name, read and checked together at start.
"""

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)
from agent_gateway.app import GatewayClients, create_app
from agent_gateway.clients import Caller, CallPolicy, RequestKey, StorageClient, TreeClient
from agent_gateway.config import GatewaySettings
from agent_gateway.forks.compose import ConfigLayer, ContextMode, PromptMode, Summarizer
from agent_gateway.forks.faults import FAULT_POINTS, ExitFaults, Faults, NoFaults
from agent_gateway.forks.profiles import Profile, ProfileRegistry, load_profiles
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.llm.lazy import LazyProvider
from agent_gateway.llm.prompts.config import SessionPrompts, load_prompts
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
]
