-- Stello schema v1: one shared schema for storage, tree and gateway.
-- Every primary key, unique constraint and index leads with space_id (tenant),
-- every foreign key is composite with it, and every FK's referencing columns
-- are indexed (DESIGN §3).

CREATE TABLE principals (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE spaces (
    id            uuid PRIMARY KEY,
    principal_id  uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    name          text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (principal_id, name)
);

-- Keys are stored only as SHA-256 of the secret (the secret is 256 random bits).
CREATE TABLE api_keys (
    id            uuid PRIMARY KEY,
    key_hash      bytea NOT NULL UNIQUE,
    principal_id  uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    space_id      uuid REFERENCES spaces (id) ON DELETE CASCADE,
    scope         text NOT NULL CHECK (scope IN ('tenant', 'admin')),
    name          text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CHECK ((scope = 'tenant') = (space_id IS NOT NULL))
);
CREATE INDEX api_keys_principal ON api_keys (principal_id);
CREATE INDEX api_keys_space ON api_keys (space_id);

CREATE TABLE sessions (
    space_id           uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    id                 uuid NOT NULL,
    parent_id          uuid,
    root_id            uuid NOT NULL,
    depth              integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
    sibling_index      integer,              -- NULL while provisional
    label              text NOT NULL,
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    source_session_id  uuid,
    turn_count         integer NOT NULL DEFAULT 0,
    last_seq           bigint NOT NULL DEFAULT 0,
    turn_token         uuid,
    turn_expires_at    timestamptz,
    provisional_until  timestamptz,          -- NULL = visible
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    last_active_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, id),
    -- NO ACTION: DeleteSubtree removes the whole computed set in one statement.
    FOREIGN KEY (space_id, parent_id) REFERENCES sessions (space_id, id),
    FOREIGN KEY (space_id, source_session_id) REFERENCES sessions (space_id, id)
        ON DELETE SET NULL (source_session_id)
);
CREATE INDEX sessions_parent ON sessions (space_id, parent_id, sibling_index);
CREATE INDEX sessions_source ON sessions (space_id, source_session_id);
CREATE INDEX sessions_created ON sessions (space_id, created_at, id);
CREATE INDEX sessions_roots ON sessions (space_id, created_at, id) WHERE parent_id IS NULL;
CREATE INDEX sessions_provisional ON sessions (provisional_until)
    WHERE provisional_until IS NOT NULL;

CREATE TABLE records (
    space_id      uuid NOT NULL,
    session_id    uuid NOT NULL,
    seq           bigint NOT NULL,
    role          text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content       text NOT NULL DEFAULT '',
    tool_calls    jsonb,
    tool_call_id  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    metadata      jsonb,
    PRIMARY KEY (space_id, session_id, seq),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

-- The three context slots: NULL = unset; '' is a stored empty string.
CREATE TABLE session_slots (
    space_id       uuid NOT NULL,
    session_id     uuid NOT NULL,
    system_prompt  text,
    insight        text,
    memory         text,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

CREATE TABLE compression_caches (
    space_id           uuid NOT NULL,
    session_id         uuid NOT NULL,
    summary            text NOT NULL,
    covered_until_seq  bigint NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

-- Per-session frozen config; the JSON keeps key presence exactly.
CREATE TABLE session_configs (
    space_id    uuid NOT NULL,
    session_id  uuid NOT NULL,
    config      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, session_id),
    FOREIGN KEY (space_id, session_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);

CREATE TABLE session_refs (
    space_id    uuid NOT NULL,
    from_id     uuid NOT NULL,
    to_id       uuid NOT NULL,
    position    bigint GENERATED ALWAYS AS IDENTITY,  -- insertion order
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, from_id, to_id),
    FOREIGN KEY (space_id, from_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE,
    FOREIGN KEY (space_id, to_id) REFERENCES sessions (space_id, id) ON DELETE CASCADE
);
CREATE INDEX session_refs_to ON session_refs (space_id, to_id);
CREATE INDEX session_refs_order ON session_refs (space_id, from_id, position);

-- request_id idempotency, kept 24 h per (space, scope, request_id).
CREATE TABLE idempotency_keys (
    space_id      uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    scope         text NOT NULL,
    request_id    text NOT NULL,
    request_hash  bytea NOT NULL,
    response      bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, scope, request_id)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
