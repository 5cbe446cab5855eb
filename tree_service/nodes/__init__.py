"""Nodes: a session's place in the tree, as the topology reads answer it (DESIGN §2).

Owns the reads of visible sessions one at a time or a level at a time: GetNode,
ListRoots, GetChildren, GetSiblings, the walks up a chain (GetAncestors,
ListAncestors and its page-token key), ListAll and ResolveSessionPrefix.
`repository` holds their SQL (reads on the pool, and the node statements a
transaction runs); `listing` builds ListAll's statement for a set of filters and
holds the summaries' SQL; `service` answers the RPCs.
"""

__all__ = ["listing", "repository", "service"]
