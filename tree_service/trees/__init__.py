"""Trees: GetTree, the forest or one subtree in pre-order (DESIGN §2, §17).

Owns the reads of many levels at once: the whole forest or a root's tree in one
read, the recursive walks below a depth limit or from a session, their settings
(plans, timeout) and the probe that tells a slow database from a tree too large.
`repository` holds their SQL; `service` caps and orders the rows (the reply's
bytes are `tree_service.convert.tree_reply`'s).
"""

__all__ = ["repository", "service"]
