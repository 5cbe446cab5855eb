"""CreateSession (the only id birthplace), CommitSession, status, label, metadata and
config: each one unit of work."""

from __future__ import annotations

import uuid
from dataclasses import replace

from stello.errors import (
    FailedPrecondition,
    NotFound,
    Violations,
    session_archived,
    session_not_found,
)
from stello.rules import metadata
from stello.stored.idempotency import Answered, answer_of
from tree_service.encoding import config_from_json, config_to_json, decode_node, encode_node
from tree_service.models import (
    CHILD_LABEL,
    ROOT_LABEL,
    MetadataChange,
    NewSession,
    Node,
    SessionConfig,
    SessionSpec,
    Status,
)
from tree_service.nodes.service import visible_node
from tree_service.unit import TreeRepository, TreeTx

CREATE_SCOPE = "tree.CreateSession"


class SessionService:
    """Creation, commit and a session's own fields, over a repository."""

    def __init__(self, repository: TreeRepository, *, provisioning_ttl_s: float) -> None:
        self._repo = repository
        self._provisioning_ttl_s = provisioning_ttl_s

    async def create_session(self, new: NewSession) -> Node:
        """Create a root or a child (visible at once, or provisional); the only id birthplace."""
        label = new.label
        if label is None:
            label = ROOT_LABEL if new.parent_id is None else CHILD_LABEL
        spec = SessionSpec(
            parent_id=new.parent_id,
            label=label,
            source_id=new.source_session_id,
            provisional_ttl_s=self._provisioning_ttl_s if new.provisional else None,
            config=None if new.config is None else config_to_json(new.config),
            metadata=new.metadata,
            copy_source_metadata=new.copy_source_metadata,
        )

        if not new.request_id:
            return await self._repo.transaction(lambda tx: self._create(tx, new, spec))
        try:
            return await self._repo.transaction(lambda tx: self._create_once(tx, new, spec))
        except Answered as answered:
            return decode_node(answered.response)
        except (NotFound, FailedPrecondition):
            # A retry whose work can no longer succeed (its parent went since) still gets
            # the first call's answer.
            entry = await self._repo.stored(new.space_id, CREATE_SCOPE, new.request_id)
            if entry is None:
                raise
            return decode_node(answer_of(entry, new.request_id, new.request_hash))

    @staticmethod
    async def _create(tx: TreeTx, new: NewSession, spec: SessionSpec) -> Node:
        if new.parent_id is not None and not new.provisional:
            # A visible child takes its index now, under the parent's row lock.
            if not await tx.sessions.lock_parent(new.space_id, new.parent_id):
                raise session_not_found(new.parent_id, "parent session")
        if spec.copy_source_metadata and new.source_session_id is not None:
            copied = await tx.sessions.metadata(new.space_id, new.source_session_id)
            pairs = metadata.merged(copied, spec.metadata, ())
            violations = Violations()
            metadata.check_size(pairs, violations, "metadata", merged_with="its source's pairs")
            violations.raise_if_any()
            spec = replace(spec, metadata=pairs)
        return await tx.sessions.create_session(new.space_id, uuid.uuid4(), spec)

    @classmethod
    async def _create_once(cls, tx: TreeTx, new: NewSession, spec: SessionSpec) -> Node:
        """The work, then its key in one insert; a live key (a retry, or a concurrent call
        that committed first: the insert waits for it) rolls the work back for its answer."""
        node = await cls._create(tx, new, spec)
        await tx.remember_or_answer(
            new.space_id,
            CREATE_SCOPE,
            new.request_id,
            new.request_hash,
            encode_node(node),
            sessions=(node.id,),
        )
        return node

    async def commit_session(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, dict[str, str]]:
        """Make a provisional session visible with the next index; idempotent. Its node and
        its metadata."""

        async def work(tx: TreeTx) -> tuple[Node, dict[str, str]]:
            locked = await tx.sessions.lock_for_commit(space_id, session_id)
            if locked is None:
                raise session_not_found(session_id)
            provisional, metadata = locked
            if provisional:
                return await tx.sessions.commit_session(space_id, session_id), metadata
            node = await tx.nodes.node(space_id, session_id)
            assert node is not None
            return node, metadata

        return await self._repo.transaction(work)

    async def set_status(
        self, space_id: uuid.UUID, session_id: uuid.UUID, status: Status, *, linked: bool = True
    ) -> Node:
        """Archive or unarchive one session (never cascades); idempotent. Its node, without
        its children and refs unless `linked`."""

        async def work(tx: TreeTx) -> Node:
            await tx.sessions.set_status(space_id, session_id, status)
            return await visible_node(tx, space_id, session_id, linked=linked)

        return await self._repo.transaction(work)

    async def update_label(
        self, space_id: uuid.UUID, session_id: uuid.UUID, label: str, *, linked: bool = True
    ) -> Node:
        """Replace the label of an active session; its node, without its children and refs
        unless `linked`."""

        async def work(tx: TreeTx) -> Node:
            status = await tx.sessions.lock_status(space_id, session_id)
            if status is None:
                raise session_not_found(session_id)
            if status == "archived":
                raise session_archived(session_id, "is archived; unarchive it to rename it")
            node = await tx.sessions.set_label(space_id, session_id, label, linked=linked)
            return node or await visible_node(tx, space_id, session_id, linked=linked)

        return await self._repo.transaction(work)

    async def update_metadata(self, change: MetadataChange) -> dict[str, str]:
        """Write and remove a visible session's metadata in one transaction, the limits
        checked on the result first; the metadata as it now is."""

        async def work(tx: TreeTx) -> dict[str, str]:
            if not await tx.sessions.lock_metadata(change.space_id, change.session_id):
                raise session_not_found(change.session_id)
            current = await tx.sessions.metadata(change.space_id, change.session_id)
            result = metadata.merged(current, change.set, change.remove)
            if result == current:
                return current
            violations = Violations()
            metadata.check_size(result, violations, "set", merged_with="its own pairs")
            violations.raise_if_any()
            written = {k: v for k, v in change.set.items() if current.get(k) != v}
            removed = [k for k in change.remove if k in current]
            await tx.sessions.change_metadata(change.space_id, change.session_id, written, removed)
            return result

        return await self._repo.transaction(work)

    async def get_config(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionConfig | None:
        """The stored config, or None when none was ever written."""
        visible, stored = await self._repo.sessions.config(space_id, session_id)
        if not visible:
            raise session_not_found(session_id)
        return None if stored is None else config_from_json(stored)

    async def put_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID, config: SessionConfig
    ) -> SessionConfig:
        """Overwrite the whole config; the config as stored."""

        async def work(tx: TreeTx) -> SessionConfig:
            stored = await tx.sessions.put_config(space_id, session_id, config_to_json(config))
            if stored is None:
                raise session_not_found(session_id)
            return config_from_json(stored)

        return await self._repo.transaction(work)
