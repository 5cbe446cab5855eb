"""A Citus node out of reach, as the operator commands that need every node say it.

The coordinator answers, but a statement that must reach a worker (a reference table's
write, a migration's DDL propagated to the shards) fails naming the node; the command
says which node, why, and what to do (docs/scaling.md).
"""

from __future__ import annotations

import re

from stello_cli.output.style import one_line

NODE = re.compile(r"\bto the (?:remote )?node (\S+)")
"""The node a Citus error names (`connection to the remote node X failed ...`, `could not
establish any connections to the node X after ...`)."""


def unreachable_node(exc: BaseException) -> tuple[str, str] | None:
    """(host:port, the coordinator's error in one line) when `exc` (or its cause) is the
    coordinator saying one of its nodes is out of reach; None for any other failure."""
    import asyncpg

    cause = exc.__cause__ if exc.__cause__ is not None else exc
    found = NODE.search(str(cause))
    if found is None or not isinstance(cause, asyncpg.PostgresError):  # the coordinator's word
        return None
    return found.group(1).rpartition("@")[2], one_line(str(cause))


def keys_node_out_of_reach(exc: BaseException) -> str | None:
    """What a key or space command says when a node is out of reach: keys and spaces are
    reference tables, written to (and `spaces list` counted across) every node."""
    found = unreachable_node(exc)
    if found is None:
        return None
    node, said = found
    return (
        f"the database node {node} is out of reach ({said}); keys and "
        "spaces are kept on every node of the Citus cluster, so creating or revoking a key "
        "and listing or deleting spaces need all of them: bring the node back, then retry "
        '(docs/scaling.md, "Key and space management needs every node")'
    )


def migrate_node_out_of_reach(exc: BaseException) -> str | None:
    """What `stello migrate` says when a node is out of reach: a migration changes the
    schema on every node, and the one that met the node was rolled back."""
    found = unreachable_node(exc)
    if found is None:
        return None
    node, said = found
    return (
        f"the database node {node} is out of reach ({said}); a migration changes the schema "
        "on every node of the Citus cluster, so the one that needed it was not applied (those "
        "before it were: `stello migrate --pending` lists the rest): bring the node back, "
        "then run the same command again"
    )
