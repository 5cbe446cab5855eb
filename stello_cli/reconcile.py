"""`stello reconcile`: remove provisional sessions that no saga will commit (DESIGN §4.1)."""

from __future__ import annotations

from agent_gateway.clients import Caller, CallPolicy, TreeClient
from stello.channels import ClientTls, open_channel


async def reconcile(
    tree_address: str,
    admin_key: str,
    older_than_s: int = 0,
    dry_run: bool = False,
    *,
    timeout_s: float = 60.0,
    tls: ClientTls | None = None,
) -> list[str]:
    """Call the tree's SweepProvisional with an admin key; answer the removed ids.

    Args:
        tree_address: host:port of the tree service.
        admin_key: an admin-scope API key (a tenant key is PERMISSION_DENIED).
        older_than_s: remove provisional sessions created more than this many
            seconds ago; 0 = those past their provisioning TTL.
        dry_run: only list what would be removed.
        timeout_s: how long to wait for the tree.
        tls: TLS to the tree (None = plaintext).

    Raises:
        stello.errors.StelloError: the tree's answer, as a domain error.
    """
    async with open_channel(tree_address, tls=tls) as channel:
        tree = TreeClient(channel, CallPolicy(timeout_s=timeout_s))
        removed = await tree.sweep_provisional(
            Caller(admin_key).within(timeout_s), older_than_s=older_than_s, dry_run=dry_run
        )
    return list(removed)
