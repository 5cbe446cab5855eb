-- A key the tree service signs its ListAncestors page tokens with.
--
-- A ListAncestors (and so the gateway's GetLineage) token names the last
-- ancestor a page answered; the next page walks up from it. Before, a
-- hand-made token naming a session of another branch of the same tree, above
-- the requested one, was accepted (the service checked only that it was in
-- the tree and higher): the next "page" was another chain's ancestors. A
-- token now carries an HMAC-SHA256 of the space, the session and that
-- ancestor under this key, so only a token a page answered is accepted.
--
-- One row per purpose. The key is made here, once, from two `gen_random_uuid()`
-- (PostgreSQL's strong random source: 244 random bits in 32 bytes), so every
-- replica of the tree service reads the same key and no setting is needed. A
-- global table: a reference table on Citus (stello.distribution).
CREATE TABLE token_keys (
    purpose text PRIMARY KEY,
    secret bytea NOT NULL CHECK (octet_length(secret) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO token_keys (purpose, secret)
VALUES (
    'page_tokens',
    decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')
);
