"""API keys, spaces and principals: creation, hashing, lookup with a TTL cache.

A key is ``stello_<key id hex>_<secret>``; only SHA-256 of the whole key is
stored (the secret carries 256 random bits, so a slow hash adds nothing).
A tenant key reaches exactly one space; an admin key reaches every space and
the admin RPCs.

A resolved key is cached in memory for ``STELLO_AUTH_CACHE_TTL_S`` (the
revocation lag), keyed by the key text itself: the digest a hit costs is the
dict's own string hash (keyed per process), an exact comparison settles a
collision, and SHA-256 runs only on a miss, for the lookup. The text stays in
this process's memory, where each call's metadata holds it anyway.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import asyncpg

from stello.db.maintenance import across_spaces
from stello.db.pool import in_statement, in_transaction
from stello.errors import space_not_found

Scope = Literal["tenant", "admin"]
KEY_PREFIX = "stello_"
DEFAULT_PRINCIPAL = "default"


# Every space with its owner and its sessions counted (`stello spaces list`).
SPACES_WITH_COUNTS = """
SELECT sp.id, sp.name, p.name AS principal, COALESCE(c.sessions, 0) AS sessions
FROM spaces sp JOIN principals p ON p.id = sp.principal_id
LEFT JOIN (SELECT space_id, count(*) AS sessions FROM sessions GROUP BY space_id) c
    ON c.space_id = sp.id
ORDER BY sp.created_at, sp.id
"""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the key's id, owner, scope and (tenant keys) space."""

    key_id: uuid.UUID
    principal_id: uuid.UUID
    scope: Scope
    space_id: uuid.UUID | None

    @property
    def is_admin(self) -> bool:
        """Whether this key has the admin scope."""
        return self.scope == "admin"

    def may_access(self, space_id: uuid.UUID) -> bool:
        """Whether this key may touch `space_id` (others' spaces must look absent)."""
        return self.is_admin or self.space_id == space_id

    def check_space(self, space_id: uuid.UUID, shown: str | None = None) -> None:
        """NotFound, as if the space did not exist, unless this key may touch `space_id`
        (named in the message as `shown`, the request's text, when given): existence
        must not leak across tenants. Every call's chain and every WatchSpace stream's
        recheck use this one rule."""
        if not self.may_access(space_id):
            raise space_not_found(shown if shown is not None else space_id)


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A key just created: the secret is shown once and never stored."""

    key_id: uuid.UUID
    secret: str
    scope: Scope
    space_id: uuid.UUID | None
    space_created: bool = False
    """Whether the space was made for this key (no space of the owner had that name)."""


@dataclass(frozen=True, slots=True)
class SpaceInfo:
    """A space as `stello spaces list` shows it."""

    id: uuid.UUID
    name: str
    principal: str
    sessions: int


@dataclass(frozen=True, slots=True)
class SpaceContents:
    """A space as `stello spaces delete` names it before erasing it: its sessions counted up
    to a bound (`sessions` > the bound means more), and its keys (live or revoked)."""

    id: uuid.UUID
    name: str
    principal: str
    sessions: int
    keys: int


# The spaces with id $1 or name $2 (`stello spaces delete`), then per space its sessions
# counted up to $2 (one range of an index of the space, on its shard) and its keys.
SPACES_NAMED = """
SELECT sp.id, sp.name, p.name AS principal
FROM spaces sp JOIN principals p ON p.id = sp.principal_id
WHERE sp.id = $1 OR sp.name = $2
ORDER BY sp.created_at, sp.id
"""
SESSIONS_UP_TO = "SELECT count(*) FROM (SELECT 1 FROM sessions WHERE space_id = $1 LIMIT $2) s"
KEYS_OF_SPACE = "SELECT count(*) FROM api_keys WHERE space_id = $1"


def hash_key(secret: str) -> bytes:
    """The stored form of a key."""
    return hashlib.sha256(secret.encode()).digest()


def new_secret(key_id: uuid.UUID) -> str:
    """A fresh key string carrying its id (for humans) and 256 random bits."""
    return f"{KEY_PREFIX}{key_id.hex[:12]}_{secrets.token_urlsafe(32)}"


SPACE_EXISTS = "SELECT EXISTS (SELECT 1 FROM spaces WHERE id = $1)"

LOOKUP = """
SELECT k.id, k.principal_id, k.scope, k.space_id
FROM api_keys k
WHERE k.key_hash = $1 AND k.revoked_at IS NULL
"""

UPSERT_PRINCIPAL = """
INSERT INTO principals (id, name) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING id
"""

INSERT_SPACE = """
INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, $3)
ON CONFLICT (principal_id, name) DO NOTHING
RETURNING id
"""

SPACE_OF = "SELECT id FROM spaces WHERE principal_id = $1 AND name = $2"

INSERT_KEY = """
INSERT INTO api_keys (id, key_hash, principal_id, space_id, scope, name)
VALUES ($1, $2, $3, $4, $5, $6)
"""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a key belongs to and the spaces it reaches (id, name), in creation order."""

    principal: str
    spaces: tuple[tuple[uuid.UUID, str], ...]


# An admin key reaches every space of its principal (IDENTITY), a tenant key its one
# space ($2: TENANT_IDENTITY, one probe of its key; `$2 IS NULL OR s.id = $2` made a plan
# that knows no parameter read every space of the principal).
_IDENTITY = """
SELECT p.name AS principal, s.id, s.name
FROM principals p
LEFT JOIN spaces s ON s.principal_id = p.id{space}
WHERE p.id = $1
ORDER BY s.created_at, s.id
"""
IDENTITY = _IDENTITY.format(space="")
TENANT_IDENTITY = _IDENTITY.format(space=" AND s.id = $2")

REVOKE = "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL"

# Every key, oldest first (never a secret: only its hash is stored).
KEYS = """
SELECT k.id, k.scope, k.name, s.name AS space, k.created_at, k.revoked_at
FROM api_keys k LEFT JOIN spaces s ON s.id = k.space_id
ORDER BY k.created_at, k.id
"""


class KeyStore:
    """SQL for keys, spaces and principals (the kernel's own small repository)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        cache_ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._ttl = cache_ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._spaces: dict[uuid.UUID, float] = {}  # spaces found, until when

    async def resolve(self, secret: str) -> Principal | None:
        """The principal of a live key, or None; cached for the TTL (revocation lag)."""
        now = self._clock()
        if self._ttl > 0:
            hit = self._cache.get(secret)
            if hit is not None and hit[0] > now:
                return hit[1]
        digest = hash_key(secret)

        async def lookup(con: asyncpg.Connection) -> asyncpg.Record | None:
            return await con.fetchrow(LOOKUP, digest)

        row = await in_statement(self._pool, lookup)
        principal = (
            None
            if row is None
            else Principal(row["id"], row["principal_id"], row["scope"], row["space_id"])
        )
        if self._ttl > 0:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[secret] = (now + self._ttl, principal)
        return principal

    async def check_space(
        self, principal: Principal, space_id: uuid.UUID, shown: str | None = None
    ) -> None:
        """`principal.check_space`, and for an admin key (which reaches every space) that
        the space exists: NotFound otherwise, as a tenant's key gets for a space not its
        own (a space never made or deleted answered empty reads, writes failing on a foreign
        key). A space found is remembered for the TTL (a deleted one is found that long)."""
        principal.check_space(space_id, shown)
        if principal.is_admin and not await self._space_exists(space_id):
            raise space_not_found(shown if shown is not None else space_id)

    async def _space_exists(self, space_id: uuid.UUID) -> bool:
        now = self._clock()
        if self._spaces.get(space_id, now) > now:
            return True

        async def lookup(con: asyncpg.Connection) -> bool:
            return bool(await con.fetchval(SPACE_EXISTS, space_id))

        found = await in_statement(self._pool, lookup)
        if found and self._ttl > 0:
            if len(self._spaces) > 10_000:
                self._spaces.clear()
            self._spaces[space_id] = now + self._ttl
        return found

    async def identity(self, principal: Principal) -> Identity:
        """The principal's name and the spaces `principal`'s key reaches."""

        async def lookup(con: asyncpg.Connection) -> list[asyncpg.Record]:
            if principal.space_id is None:
                return list(await con.fetch(IDENTITY, principal.principal_id))
            return list(
                await con.fetch(TENANT_IDENTITY, principal.principal_id, principal.space_id)
            )

        rows = await in_statement(self._pool, lookup)
        name = rows[0]["principal"] if rows else ""
        return Identity(name, tuple((r["id"], r["name"]) for r in rows if r["id"] is not None))

    async def create_key(
        self,
        *,
        space: str | None,
        scope: Scope = "tenant",
        principal: str = DEFAULT_PRINCIPAL,
        name: str = "",
    ) -> CreatedKey:
        """Create a key (and its principal and space when missing)."""

        async def work(con: asyncpg.Connection) -> CreatedKey:
            principal_id = await con.fetchval(UPSERT_PRINCIPAL, uuid.uuid4(), principal)
            space_id, created = None, False
            if space is not None:
                # An existing space is kept (ON CONFLICT: a concurrent insert is waited for).
                space_id = await con.fetchval(INSERT_SPACE, uuid.uuid4(), principal_id, space)
                created = space_id is not None
                if space_id is None:
                    space_id = await con.fetchval(SPACE_OF, principal_id, space)
            key_id = uuid.uuid4()
            secret = new_secret(key_id)
            await con.execute(
                INSERT_KEY,
                key_id,
                hash_key(secret),
                principal_id,
                space_id if scope == "tenant" else None,
                scope,
                name,
            )
            return CreatedKey(key_id, secret, scope, space_id, created)

        return await in_transaction(self._pool, work)

    async def revoke(self, key_id: uuid.UUID) -> bool:
        """Revoke a key by id; False when no live key has that id."""

        async def work(con: asyncpg.Connection) -> str:
            return str(await con.execute(REVOKE, key_id))

        status = await in_statement(self._pool, work)
        self._cache.clear()
        return bool(status.endswith(" 1"))

    async def list_keys(self) -> list[asyncpg.Record]:
        """Every key's id, scope, space name and state (never a secret)."""

        async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
            return list(await con.fetch(KEYS))

        return await in_statement(self._pool, work)

    async def list_spaces(self) -> list[SpaceInfo]:
        """Every space with its owner and session count. The counts are one aggregate
        grouped by space (a multi-shard one on Citus, which refuses a subquery per space
        correlated with its reference tables)."""

        async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await across_spaces(con)  # every space's sessions counted: multi-shard
            return list(await con.fetch(SPACES_WITH_COUNTS))

        rows = await in_transaction(self._pool, work)
        return [SpaceInfo(r["id"], r["name"], r["principal"], r["sessions"]) for r in rows]

    async def find_spaces(self, space: str, *, most_sessions: int) -> list[SpaceContents]:
        """The spaces with id or name `space` (names are unique per owner only), each with
        its sessions counted up to `most_sessions` + 1 and its keys counted."""
        as_id = _as_uuid(space)

        async def work(con: asyncpg.Connection) -> list[SpaceContents]:
            rows = await con.fetch(SPACES_NAMED, as_id, space)
            return [
                SpaceContents(
                    r["id"],
                    r["name"],
                    r["principal"],
                    await con.fetchval(SESSIONS_UP_TO, r["id"], most_sessions + 1),
                    await con.fetchval(KEYS_OF_SPACE, r["id"]),
                )
                for r in rows
            ]

        return await in_transaction(self._pool, work)

    async def delete_space(self, space: str | uuid.UUID) -> uuid.UUID | None:
        """Erase a space (by name or id; a UUID: by id alone) and all its data; None when
        there is none."""

        async def work(con: asyncpg.Connection) -> uuid.UUID | None:
            as_id: uuid.UUID | None = space if isinstance(space, uuid.UUID) else _as_uuid(space)
            name = None if isinstance(space, uuid.UUID) else space
            found: uuid.UUID | None = None
            for row in await con.fetch(FIND_SPACES, as_id, name):
                found = row["id"]
                for statement in ERASE_SPACE:
                    await con.execute(statement, found)
                await con.execute(DELETE_LONE_PRINCIPAL, row["principal_id"])
            return found

        deleted = await in_transaction(self._pool, work)
        self._cache.clear()
        self._spaces.clear()
        return deleted


# The spaces a delete_space names (by id or name), locked.
FIND_SPACES = (
    "SELECT id, principal_id FROM spaces WHERE id = $1 OR name = $2 ORDER BY id FOR UPDATE"
)

# The owner of an erased space, when it owns nothing more (no space, no key): its name is
# an operator's record of a tenant, often a person's or a customer's, and goes with the
# tenant's last space. `stello keys create` makes it again when needed.
DELETE_LONE_PRINCIPAL = """
DELETE FROM principals p
WHERE p.id = $1
  AND NOT EXISTS (SELECT 1 FROM spaces s WHERE s.principal_id = p.id)
  AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.principal_id = p.id)
"""

# A space's erasure. The rows that point at its sessions without a cascade go first
# (lineage sources, record holders), then its sessions in one statement (their parent
# and source keys point inside it), then the space (every other table cascades). A
# cascade from `spaces` alone deleted the sessions row by row, and a NO ACTION check of
# a session could come before the cascade of the rows that named it: the delete failed
# on a fork of a fork, or a trimmed source, about every other time.
ERASE_SPACE = (
    "DELETE FROM record_segments WHERE space_id = $1",
    "DELETE FROM session_lineages WHERE space_id = $1",
    "DELETE FROM sessions WHERE space_id = $1",
    "DELETE FROM spaces WHERE id = $1",
)


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
