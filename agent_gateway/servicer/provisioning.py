"""The RPCs that make a session through the provisioning saga: CreateRoot, Fork,
ImportSession (DESIGN §4.1, §4.4).

Mixed into `gateway.AgentGatewayServicer`, like its other RPCs thin: the logic is
`forks.creator.SessionCreator`'s and `forks.imports.SessionImporter`'s. A request_id
makes a create safe to retry: its fingerprint (the request without the id) is stored
with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.forks.creator import SessionCreator
from agent_gateway.forks.import_requests import import_input
from agent_gateway.forks.imports import SessionImporter
from agent_gateway.forks.inputs import DEFAULT_ROOT_LABEL, ForkInput, RootInput, SizeLimits
from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.servicer.metadata import check_metadata
from agent_gateway.servicer.replies import CONTEXTS
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.tools.skills import SkillRegistry
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS, fingerprint

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


def _request_id(value: str, violations: Violations) -> str:
    if len(value) > MAX_REQUEST_ID_CHARS:
        violations.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return value


def _request_hash(request: agent_pb2.CreateRootRequest | agent_pb2.ForkRequest) -> bytes:
    """The fingerprint of the request without its request_id (b"" when it has none)."""
    return fingerprint(request) if request.request_id else b""


def _skills(
    message: agent_pb2.CreateRootRequest | agent_pb2.ForkRequest,
    configured: SkillRegistry,
    violations: Violations,
) -> tuple[str, ...] | None:
    """The allow-list asked for; a name no skill can have, or that no configured skill has,
    is a violation (it was stored, and the session then matched no skill, without a word)."""
    if not message.HasField("skills"):
        return None
    names = tuple(message.skills.names)
    for index, name in enumerate(names):
        field = f"skills.names[{index}]"
        if (
            validation.skill_name(name, field, violations)
            and (unknown := configured.unknown(name)) is not None
        ):
            violations.add(field, unknown)
    return names


class ProvisioningRpcs:
    """CreateRoot, Fork, ImportSession."""

    _creator: SessionCreator
    _importer: SessionImporter
    _builtins: BuiltinTools
    _sizes: SizeLimits

    async def CreateRoot(
        self, request: agent_pb2.CreateRootRequest, context: Context
    ) -> agent_pb2.CreateRootResponse:
        """Create a root session through the provisioning saga."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        label = request.label if request.HasField("label") else DEFAULT_ROOT_LABEL
        validation.label(label, violations)
        request_id = _request_id(request.request_id, violations)
        check_metadata(dict(request.metadata), violations)
        skills = _skills(request, self._builtins.skills, violations)
        violations.raise_if_any()
        root = RootInput(
            space_id=space_id,
            label=label,
            system_prompt=request.system_prompt if request.HasField("system_prompt") else None,
            skills=skills,
            profile=request.profile if request.HasField("profile") else None,
            profile_vars=dict(request.profile_vars),
            request_id=request_id,
            request_hash=_request_hash(request),
            metadata=dict(request.metadata),
        )
        session = await self._creator.create_root(_caller(context), root)
        return agent_pb2.CreateRootResponse(session=session)

    async def Fork(
        self, request: agent_pb2.ForkRequest, context: Context
    ) -> agent_pb2.ForkResponse:
        """Fork a session through the provisioning saga."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        source_id = validation.parse_uuid(
            request.source_session_id, "source_session_id", violations
        )
        validation.label(request.label, violations)
        parent_id = None
        if request.HasField("topology_parent_id"):
            parent_id = validation.parse_uuid(
                request.topology_parent_id, "topology_parent_id", violations
            )
        if request.context not in CONTEXTS:
            violations.add(
                "context", validation.not_one_of(common_pb2.ForkContext, request.context)
            )
        until = request.inherit_until_seq if request.HasField("inherit_until_seq") else None
        if until is not None and until < 0:
            violations.add("inherit_until_seq", "must not be negative")
        request_id = _request_id(request.request_id, violations)
        check_metadata(dict(request.metadata), violations)
        skills = _skills(request, self._builtins.skills, violations)
        violations.raise_if_any()
        fork = ForkInput(
            space_id=space_id,
            source_id=source_id,
            label=request.label,
            topology_parent_id=parent_id,
            profile=request.profile if request.HasField("profile") else None,
            profile_vars=dict(request.profile_vars),
            system_prompt=request.system_prompt if request.HasField("system_prompt") else None,
            skills=skills,
            context=CONTEXTS[request.context],
            inherit_until_seq=until,
            prompt=request.prompt if request.HasField("prompt") else None,
            request_id=request_id,
            request_hash=_request_hash(request),
            metadata=dict(request.metadata),
            copy_metadata=request.copy_metadata,
        )
        session = await self._creator.fork(_caller(context), fork)
        return agent_pb2.ForkResponse(session=session)

    async def ImportSession(
        self, request: agent_pb2.ImportSessionRequest, context: Context
    ) -> agent_pb2.ImportSessionResponse:
        """Create a session from given records, config and slots through the saga."""
        imported = import_input(request, limits=self._sizes)
        session = await self._importer.import_session(_caller(context), imported)
        return agent_pb2.ImportSessionResponse(session=session)
