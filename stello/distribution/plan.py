"""The schema's plan on Citus: which tables are global, which are sharded by tenant, which
shared functions every node holds, and the database defaults the services need there.

The single source of the plan (DESIGN §4.7, docs/scaling.md, whose plan block
tests/distribution/test_distribution_plan.py checks against this module):
`REFERENCE_TABLES` are replicated to every node, `DISTRIBUTED_TABLES` are hashed
by `space_id` and co-located with `sessions` (a space lives on one worker), and
`FUNCTIONS` are the shared SQL functions that statements call on shards, created
on every node (distributed by their space argument where they take one, so a
call for one space runs where that space lives). `stello.distribution.apply` applies
it.
"""

from __future__ import annotations

from stello.db.pool import APPLICATION_NAME

DISTRIBUTION_COLUMN = "space_id"
COLOCATE_WITH = "sessions"
# Shards are the unit that moves: a few times the most workers expected
# (docs/scaling.md "Rebalancing").
DEFAULT_SHARD_COUNT = 64

# Global tables, small, replicated to every node: a key is looked up by its
# hash before the space is known; the page-token key is one for all spaces.
REFERENCE_TABLES: tuple[str, ...] = (
    "principals",
    "spaces",
    "api_keys",
    "schema_migrations",
    "token_keys",
)

# Tenant tables, by space_id, co-located with the first (sessions).
DISTRIBUTED_TABLES: tuple[str, ...] = (
    "sessions",
    "records",
    "session_slots",
    "compression_caches",
    "session_configs",
    "session_refs",
    "idempotency_keys",
    "space_positions",
    "space_events",
    "shared_memory",
    "session_lineages",
    "record_segments",
    "background_jobs",
    "idempotency_key_sessions",
    "shared_memory_counts",
    "turn_waiters",
    "retention_policies",
    "session_metadata",
    "search_backfill",
    "idempotency_key_entries",
    "session_erasures",
)

# Shared SQL functions that statements call, by signature, each created on
# every node. With an argument name, the function is co-located with sessions
# by that argument (it holds the space): a call is delegated whole to the
# space's worker, and a statement routed to a shard may call it there. Citus
# 13.2.2 crashes the backend (signal 11: every connection of the coordinator
# is reset) when a delegated function is called with a NULL distribution
# argument, so a function whose callers may pass NULL there (the recount of
# every space) is only propagated.
FUNCTIONS: dict[str, str | None] = {
    # Pure: called in the append's INSERT, which runs on the shard.
    "stello_record_tokens(text, jsonb)": None,
    # Seeders and maintenance (p_space NULL: every space) call it on the
    # coordinator; its statements pin the space, so each is routed.
    "stello_recount_tokens(uuid, uuid)": None,
    # Called by DeleteSubtree's and TrimRecords' statements on the space's shard.
    "stello_release_records(uuid, uuid[], bigint)": "p_space",
    # Called by a Fork INHERIT's statement (a child past the segment cap).
    "stello_compact_segments(uuid, uuid, integer)": "p_space",
    # Pure: records' generated `search_vector` (migration 0019) calls them on
    # the shards, so they are on every node before `records` is distributed
    # (`stello_search_text`, migration 0035, the text they all read).
    "stello_search_text(text)": None,
    "stello_search_grams(text)": None,
    "stello_search_symbols(text)": None,
    "stello_search_vector(text)": None,
    "stello_label_vector(text)": None,
    # Pure: session_metadata's generated `value_vector` (migration 0021).
    "stello_value_vector(text)": None,
    # CreateSession's and the outbox's writes (migration 0033), called inside
    # transactions, so run on the coordinator (Citus delegates no call in a
    # transaction block): each of their statements is routed to the space's worker.
    "stello_create_session(uuid, uuid, uuid, text, uuid, double precision, jsonb)": None,
    "stello_flush_events(uuid, text[], uuid[], uuid[], bigint[], bigint[], text[], boolean[], "
    "uuid[])": None,
    # The append (migration 0034), by its space: AppendRecords calls it as a statement of
    # its own, which Citus delegates whole to the space's worker (one round trip); inside
    # a Transact it runs on the coordinator, each of its statements routed.
    "stello_append_records(uuid, uuid, text[], text[], text[], text[], timestamp with time "
    "zone[], text[], boolean)": "p_space",
    # A Fork INHERIT's lineage, CopySystemPromptOp and idempotency's writes of a response
    # (migration 0034): called inside transactions, so run on the coordinator, each of
    # their statements routed to the space's worker.
    "stello_inherit_records(uuid, uuid, uuid, bigint, bigint, bigint)": None,
    "stello_copy_system_prompt(uuid, uuid, uuid)": None,
    "stello_link_key(uuid, text, text, uuid[])": None,
    "stello_remember(uuid, text, text, bytea, bytea, uuid[])": None,
    "stello_remember_new(uuid, text, text, bytea, bytea, integer, uuid[])": None,
}

# The functions a table's definition calls (a generated column, an index): propagated
# before the tables, since a shard cannot be made without them.
TABLE_FUNCTIONS = (
    "stello_search_text(text)",
    "stello_search_grams(text)",
    "stello_search_symbols(text)",
    "stello_search_vector(text)",
    "stello_label_vector(text)",
    "stello_value_vector(text)",
)

# The database's defaults for every new session on the coordinator (ALTER DATABASE ...
# SET; a session that is open keeps its values). Citus adds `relation_is_a_known_shard(oid)
# IS NOT TRUE` to every query that reads pg_class unless the connection's application_name
# starts with a prefix listed here: asyncpg's type introspection (once per type per
# connection) takes ~350 ms with that filter, ~12 ms without (the gateway's fork tests:
# 36 s of the coordinator's CPU with it, 20 s without). The services' pools are named
# `stello` (stello.db.pool.APPLICATION_NAME); the coordinator holds no tenant shard, only the
# reference tables' copies, which no service query of the catalogue reads.
# JIT off: the coordinator's plans of the services' multi-CTE writes (the append's, the
# fork's: the parts Citus plans on the coordinator) are estimated past jit_above_cost, and
# compiling them costs more than running them: the gateway's fork tests took 62 s of the
# coordinator's CPU and 145 s of wall time with JIT, 20 s and 109 s without.
# citus.propagate_set_commands = 'local': a SET LOCAL in a transaction reaches the workers
# that transaction's statements run on (GetTree's planner settings and timeout,
# tree_service.trees.repository.tree_settings; the workers planned its walk without them).
PREFIXES = "citus.show_shards_for_app_name_prefixes"
SESSION_DEFAULTS: dict[str, str] = {
    "jit": "off",
    PREFIXES: APPLICATION_NAME,
    "citus.propagate_set_commands": "local",
}
