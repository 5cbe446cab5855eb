"""Sessions: create (a root, a fork, an import), read one, rename, archive, delete (its slots:
`stello_client.methods.slots`).

Writes that carry a `request_id` (create_root, fork, import_session) get one
from the SDK when the caller gives none, so they are retried safely: the
gateway answers a repeated id with the session the first attempt made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.requests import request_id_or_new, request_of, set_optional
from stello_client.types import (
    ContextName,
    ForkContext,
    SessionStatus,
    SessionSummary,
    SessionView,
    StatusName,
    fork_context,
    session_status,
    several,
    skill_list,
)


class SessionCalls(ClientBase):
    """CreateRoot, Fork, ImportSession, GetSession, UpdateLabel, UpdateSessionMetadata,
    Archive, Unarchive, DeleteSession, PutInsight, PutMemory, Consolidate,
    ResolveSessionPrefix."""

    async def create_root(
        self,
        *,
        label: str | None = None,
        system_prompt: str | None = None,
        skills: Sequence[str] | None = None,
        profile: str | None = None,
        profile_vars: Mapping[str, str] | None = None,
        request_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT,
    ) -> SessionSummary:
        """Create a root session (CreateRoot).

        Args:
            label: its label (default "Root"; 1..200 characters).
            system_prompt: its system prompt (the highest-priority layer).
            skills: the skills it may activate (None: inherit; []: none).
            profile: a fork profile of the gateway (`list_profiles`).
            profile_vars: values of the profile's `{name}` variables.
            request_id: the idempotency key (default: a new one, so retries are safe).
            metadata: its metadata, string keys to string values (at most 16 pairs;
                limits in common.proto's SessionFilter).
            timeout: seconds, retries included (default: the client's).

        Raises:
            InvalidArgument: a bad label, prompt or metadata, a profile variable missing,
                or `profile_vars` without `profile` or naming a variable it does not have
                (`.field` is `profile_vars['NAME']`).
            ProfileNotFound: no such profile.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.CreateRootRequest,
            space_id=await self.space_id(),
            profile_vars=dict(profile_vars or {}),
            request_id=rid,
            metadata=dict(metadata or {}),
        )
        set_optional(request, label=label, system_prompt=system_prompt, profile=profile)
        found = skill_list(skills)
        if found is not None:
            request.skills.CopyFrom(found)
        reply: agent_pb2.CreateRootResponse = await self._unary(
            "CreateRoot", request, safe=True, timeout=timeout, request_id=rid
        )
        return reply.session

    async def fork(
        self,
        source_session_id: str,
        label: str,
        *,
        context: ContextName | ForkContext | None = None,
        inherit_until_seq: int | None = None,
        topology_parent_id: str | None = None,
        profile: str | None = None,
        profile_vars: Mapping[str, str] | None = None,
        system_prompt: str | None = None,
        skills: Sequence[str] | None = None,
        prompt: str | None = None,
        request_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        copy_metadata: bool = False,
        timeout: Timeout = DEFAULT,
    ) -> SessionSummary:
        """Fork a session into a new child (Fork).

        Args:
            source_session_id: the session to fork.
            label: the child's label (required, 1..200 characters).
            context: "none" (no records), "inherit" (the source's records, by
                reference) or "compress" (a model-written summary in the system
                prompt); None: the profile's, else none.
            inherit_until_seq: with "inherit", only the records up to this seq.
            topology_parent_id: place the child under this session, not the source.
            profile: a fork profile of the gateway; profile_vars its variables.
            system_prompt: the child's system prompt (highest priority).
            skills: the skills it may activate (None: inherit; []: none).
            prompt: an opening assistant record.
            request_id: the idempotency key (default: a new one, so retries are safe).
            metadata: the child's metadata.
            copy_metadata: start from the source's metadata (`metadata` on top); a
                fork copies none otherwise.
            timeout: seconds, retries included (default: the client's; a compress
                fork calls the model).

        Raises:
            InvalidArgument: a bad id or label, `inherit_until_seq` without inherit, a
                profile variable missing, or `profile_vars` without `profile` or naming a
                variable it does not have (`.field` is `profile_vars['NAME']`).
            OutOfRange: `inherit_until_seq` beyond the source's last seq (`field` names it;
                the message names that seq); nothing is made.
            NotFound: the source or the parent is not in the space.
            ProfileNotFound: no such profile.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.ForkRequest,
            space_id=await self.space_id(),
            source_session_id=source_session_id,
            label=label,
            context=fork_context(context),
            profile_vars=dict(profile_vars or {}),
            request_id=rid,
            metadata=dict(metadata or {}),
            copy_metadata=copy_metadata,
        )
        set_optional(
            request,
            inherit_until_seq=inherit_until_seq,
            topology_parent_id=topology_parent_id,
            profile=profile,
            system_prompt=system_prompt,
            prompt=prompt,
        )
        found = skill_list(skills)
        if found is not None:
            request.skills.CopyFrom(found)
        reply: agent_pb2.ForkResponse = await self._unary(
            "Fork", request, safe=True, timeout=timeout, request_id=rid
        )
        return reply.session

    async def import_session(
        self,
        label: str,
        *,
        records: Sequence[common_pb2.Record] = (),
        parent_id: str | None = None,
        source_session_id: str | None = None,
        inherit_until_seq: int | None = None,
        status: StatusName | SessionStatus | None = None,
        config: common_pb2.SessionConfig | None = None,
        system_prompt: str | None = None,
        memory: str | None = None,
        insight: str | None = None,
        turn_count: int = 0,
        request_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT,
    ) -> SessionSummary:
        """Create a session with the given records, config and slots (ImportSession).

        Args:
            label: its label (required).
            records: its own records in order (their seq is ignored).
            parent_id: place it under this session (None: a new root).
            source_session_id: the session it was forked from; with
                `inherit_until_seq` it starts with that source's records through it.
            status: "active" (default) or "archived".
            config: stored as given (no defaults, no profile).
            system_prompt, memory, insight: the slots.
            turn_count: committed turns to count.
            request_id: the idempotency key (default: a new one, so retries are safe).
            metadata: its metadata (as exported).
            timeout: seconds, retries included (default: the client's).

        Raises:
            InvalidArgument: a bad record, label, slot or metadata; the whole over the
                message limit.
            NotFound: the parent or the source is not in the space.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.ImportSessionRequest,
            space_id=await self.space_id(),
            label=label,
            status=session_status(status),
            records=several("records", records),
            turn_count=turn_count,
            request_id=rid,
            metadata=dict(metadata or {}),
        )
        set_optional(
            request,
            parent_id=parent_id,
            source_session_id=source_session_id,
            inherit_until_seq=inherit_until_seq,
            system_prompt=system_prompt,
            memory=memory,
            insight=insight,
        )
        if config is not None:
            request.config.CopyFrom(config)
        reply: agent_pb2.ImportSessionResponse = await self._unary(
            "ImportSession", request, safe=True, timeout=timeout, request_id=rid
        )
        return reply.session

    async def get_session(self, session_id: str, *, timeout: Timeout = DEFAULT) -> SessionView:
        """The joined view of one session: topology, meta, config, system prompt, memory and
        insight (GetSession; reading the insight does not consume it).

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.GetSessionRequest, space_id=await self.space_id(), session_id=session_id
        )
        reply: agent_pb2.GetSessionResponse = await self._unary(
            "GetSession", request, safe=True, timeout=timeout
        )
        return reply.session

    async def update_label(
        self, session_id: str, label: str, *, timeout: Timeout = DEFAULT
    ) -> SessionSummary:
        """Rename a session (UpdateLabel); answers it as it now is.

        Raises:
            InvalidArgument: the label is empty or over 200 characters.
            NotFound: the session is not in the space.
            SessionArchived: the session is archived.
        """
        request = request_of(
            agent_pb2.UpdateLabelRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            label=label,
        )
        reply: agent_pb2.UpdateLabelResponse = await self._unary(
            "UpdateLabel", request, safe=False, timeout=timeout
        )
        return reply.session

    async def update_session_metadata(
        self,
        session_id: str,
        set: Mapping[str, str] | None = None,
        remove: Sequence[str] = (),
        *,
        timeout: Timeout = DEFAULT,
    ) -> dict[str, str]:
        """Add or replace the keys of `set` and remove those of `remove`, at once
        (UpdateSessionMetadata); answers the session's metadata as it now is. Applying it
        twice leaves the same metadata, so it is retried safely.

        Raises:
            InvalidArgument: a key or value out of the limits, or the result over 16 pairs
                or 4096 bytes (nothing is changed).
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.UpdateSessionMetadataRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            set=dict(set or {}),
            remove=several("remove", remove),
        )
        reply: agent_pb2.UpdateSessionMetadataResponse = await self._unary(
            "UpdateSessionMetadata", request, safe=True, timeout=timeout
        )
        return dict(reply.metadata)

    async def archive(self, session_id: str, *, timeout: Timeout = DEFAULT) -> SessionSummary:
        """Archive a session: kept, read-only for turns; never cascades (Archive).

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.ArchiveRequest, space_id=await self.space_id(), session_id=session_id
        )
        reply: agent_pb2.ArchiveResponse = await self._unary(
            "Archive", request, safe=False, timeout=timeout
        )
        return reply.session

    async def unarchive(self, session_id: str, *, timeout: Timeout = DEFAULT) -> SessionSummary:
        """Make an archived session active again (Unarchive).

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.UnarchiveRequest, space_id=await self.space_id(), session_id=session_id
        )
        reply: agent_pb2.UnarchiveResponse = await self._unary(
            "Unarchive", request, safe=False, timeout=timeout
        )
        return reply.session

    async def delete_session(self, session_id: str, *, timeout: Timeout = DEFAULT) -> list[str]:
        """Erase a session and its whole subtree with everything that belongs to them
        (DeleteSession); answers the erased ids (those of sessions a racing Fork was
        still making under it too: that Fork answers NotFound).

        Raises:
            NotFound: the session is not in the space (a second delete too).
            ResourceExhausted: the ids would not fit this client's message limit
                (STELLO_MAX_MESSAGE_BYTES); nothing was deleted (`delete_session_counted`
                erases it).
        """
        reply = await self._delete(session_id, timeout, count_only=False)
        return list(reply.deleted_ids)

    async def delete_session_counted(self, session_id: str, *, timeout: Timeout = DEFAULT) -> int:
        """Erase a session and its whole subtree as `delete_session` does, and answer how
        many sessions were erased, not their ids (DeleteSession with `count_only`): for a
        subtree whose ids would not fit a reply (38 bytes each, and 16 for the reply).

        Raises:
            NotFound: the session is not in the space (a second delete too).
        """
        reply = await self._delete(session_id, timeout, count_only=True)
        return reply.deleted_count

    async def _delete(
        self, session_id: str, timeout: Timeout, *, count_only: bool
    ) -> agent_pb2.DeleteSessionResponse:
        """DeleteSession, with this client's message limit as `max_reply_bytes`."""
        request = request_of(
            agent_pb2.DeleteSessionRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            count_only=count_only,
            max_reply_bytes=self._channel.max_message_bytes,
        )
        reply: agent_pb2.DeleteSessionResponse = await self._unary(
            "DeleteSession", request, safe=False, timeout=timeout
        )
        return reply

    async def resolve_session_prefix(
        self, prefix: str, *, limit: int = 0, timeout: Timeout = DEFAULT
    ) -> list[SessionSummary]:
        """The sessions whose id starts with `prefix` (hex digits, hyphens ignored), in id
        order, at most `limit` (0 = 10; ask 2 or more to see the candidates of an ambiguous
        prefix) (ResolveSessionPrefix).

        Raises:
            InvalidArgument: `prefix` empty, not hex or over 32 digits; `limit` out of range.
        """
        request = request_of(
            agent_pb2.ResolveSessionPrefixRequest,
            space_id=await self.space_id(),
            prefix=prefix,
            limit=limit,
        )
        reply: agent_pb2.ResolveSessionPrefixResponse = await self._unary(
            "ResolveSessionPrefix", request, safe=True, timeout=timeout
        )
        return list(reply.sessions)
