"""`stello reconcile`: remove provisional sessions that no saga will commit (DESIGN §4.1).

A client of the tree's SweepProvisional (admin scope), over its public API.
"""

from __future__ import annotations

import grpc

from stello.channels import ClientTls, open_channel
from stello.errors import from_rpc_error
from stello.tree.v1 import tree_pb2, tree_pb2_grpc


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
    request = tree_pb2.SweepProvisionalRequest(older_than_s=older_than_s, dry_run=dry_run)
    async with open_channel(tree_address, key=admin_key, tls=tls) as channel:
        tree = tree_pb2_grpc.SessionTreeStub(channel)
        try:
            reply = await tree.SweepProvisional(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
    return list(reply.removed_ids)
