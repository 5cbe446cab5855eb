"""Retention (issue #38): a space's policy, applying it now (or a dry run), pinning a session."""

from __future__ import annotations

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.requests import request_of


class RetentionCalls(ClientBase):
    """GetRetention, PutRetention, ApplyRetention, PinSession."""

    async def get_retention(
        self, *, timeout: Timeout = DEFAULT
    ) -> common_pb2.RetentionPolicy | None:
        """The space's retention policy (GetRetention); None when nothing expires: none
        was set, or one with neither step (`put_retention()` with no days, the CLI's
        `retention set --none`), which the gateway answers as an empty policy. An unset
        field of a policy answered: that step never happens."""
        request = request_of(agent_pb2.GetRetentionRequest, space_id=await self.space_id())
        reply: agent_pb2.GetRetentionResponse = await self._unary(
            "GetRetention", request, safe=True, timeout=timeout
        )
        policy = reply.policy
        steps = policy.HasField("archive_after_days") or policy.HasField("delete_after_days")
        return policy if steps else None

    async def put_retention(
        self,
        *,
        archive_after_days: int | None = None,
        delete_after_days: int | None = None,
        timeout: Timeout = DEFAULT,
    ) -> common_pb2.RetentionPolicy:
        """Set the space's retention policy (PutRetention): archive a root's subtree idle
        for `archive_after_days`, delete one archived for `delete_after_days` (None: never;
        both None: nothing expires, and `get_retention` answers None). Answers the policy
        as stored.

        Raises:
            InvalidArgument: days outside 1..36500.
        """
        policy = request_of(
            common_pb2.RetentionPolicy,
            archive_after_days=archive_after_days,
            delete_after_days=delete_after_days,
        )
        request = request_of(
            agent_pb2.PutRetentionRequest, space_id=await self.space_id(), policy=policy
        )
        reply: agent_pb2.PutRetentionResponse = await self._unary(
            "PutRetention", request, safe=True, timeout=timeout
        )
        return reply.policy

    async def apply_retention(
        self,
        *,
        dry_run: bool = False,
        max_batches: int = 0,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
    ) -> agent_pb2.ApplyRetentionResponse:
        """Apply the space's policy now, or with `dry_run` list what it would archive or
        delete (ApplyRetention): `actions` (root, kind, label, last activity, ids), `done`,
        and a dry run's `next_page_token`. Only a dry run is retried: a real run repeated
        after a lost answer would list only what was left, not what the first attempt
        archived or deleted, so its failure is raised instead (read `digests()` to see
        what is left).

        Raises:
            NoRetentionPolicy: the space never had one (one with neither step, which
                `get_retention` answers as None, applies as nothing: no action, `done`).
            InvalidArgument: `page_token` without `dry_run` (a run that changes things
                goes on from where the space's sweep stands), or a malformed one.
        """
        request = request_of(
            agent_pb2.ApplyRetentionRequest,
            space_id=await self.space_id(),
            dry_run=dry_run,
            max_batches=max_batches,
            page_token=page_token,
        )
        reply: agent_pb2.ApplyRetentionResponse = await self._unary(
            "ApplyRetention", request, safe=dry_run, timeout=timeout
        )
        return reply

    async def pin_session(
        self, session_id: str, pinned: bool = True, *, timeout: Timeout = DEFAULT
    ) -> bool:
        """Pin (or unpin) a session: a pinned session keeps its root's subtree from
        retention (PinSession); the flag as stored.

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.PinSessionRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            pinned=pinned,
        )
        reply: agent_pb2.PinSessionResponse = await self._unary(
            "PinSession", request, safe=True, timeout=timeout
        )
        return reply.pinned
