"""Domain values -> the gateway's reply messages (the servicer's converters that outgrew it)."""

from __future__ import annotations

from agent_gateway.background.jobs import Outcome
from agent_gateway.forks.compose import ContextMode, PromptMode
from agent_gateway.forks.profiles import Profile
from agent_gateway.history.consolidation import Consolidated
from agent_gateway.sessions.service import SessionDetails
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2

# ForkContext values -> ContextMode (UNSPECIFIED: the profile's, else NONE).
CONTEXTS = {
    common_pb2.FORK_CONTEXT_UNSPECIFIED: None,
    common_pb2.FORK_CONTEXT_NONE: ContextMode.NONE,
    common_pb2.FORK_CONTEXT_INHERIT: ContextMode.INHERIT,
    common_pb2.FORK_CONTEXT_COMPRESS: ContextMode.COMPRESS,
}
_CONTEXT_ENUMS = {mode: value for value, mode in CONTEXTS.items() if mode is not None}
_MODES = {
    PromptMode.PRESET: agent_pb2.SYSTEM_PROMPT_MODE_PRESET,
    PromptMode.PREPEND: agent_pb2.SYSTEM_PROMPT_MODE_PREPEND,
    PromptMode.APPEND: agent_pb2.SYSTEM_PROMPT_MODE_APPEND,
}


def profile_info(profile: Profile) -> agent_pb2.ProfileInfo:
    """A configured profile as ListProfiles answers it."""
    info = agent_pb2.ProfileInfo(
        name=profile.name,
        system_prompt_mode=_MODES[profile.mode],
        context=(
            _CONTEXT_ENUMS[profile.context]
            if profile.context
            else common_pb2.FORK_CONTEXT_UNSPECIFIED
        ),
        variables=list(profile.variables),
    )
    if profile.system_prompt is not None:
        info.system_prompt = profile.system_prompt
    if profile.prompt is not None:
        info.prompt = profile.prompt
    if profile.skills is not None:
        info.skills.names.extend(profile.skills)
        info.skills.SetInParent()
    if profile.compressor_prompt is not None:
        info.compressor_prompt = profile.compressor_prompt
    if profile.consolidator_prompt is not None:
        info.consolidator_prompt = profile.consolidator_prompt
    return info


def consolidate_response(outcome: Outcome) -> agent_pb2.ConsolidateResponse:
    """Consolidate's reply: the memory and how far the consolidation got."""
    result = outcome.result
    assert isinstance(result, Consolidated)
    return agent_pb2.ConsolidateResponse(
        memory=result.memory,
        status=outcome.status,
        covered_until_seq=outcome.covered_until_seq,
        last_seq=result.last_seq,
        model_calls=outcome.model_calls,
    )


def session_view(details: SessionDetails) -> agent_pb2.SessionView:
    """GetSession's joined view of one session."""
    view = agent_pb2.SessionView(
        node=details.node,
        turn_count=details.meta.turn_count,
        created_at=details.meta.created_at,
        updated_at=details.meta.updated_at,
        last_active_at=details.meta.last_active_at,
        progress=details.progress,
        pinned=details.meta.pinned,
        metadata=details.metadata,
    )
    if details.config is not None:
        view.config.CopyFrom(details.config)
    slots = details.slots
    for name in ("system_prompt", "memory", "insight"):
        if slots.HasField(name):
            setattr(view, name, getattr(slots, name))
    return view
