"""Retention: a space's sessions expire by its policy, a root's subtree at a time (issue #38).

Owns a space's policy (`retention_policies`), where its sweep stands, and the pins
that keep a subtree. `repository` holds its SQL (each fact of a subtree one index
probe); `service` judges each root's subtree and runs the batched, resumable sweep
and its periodic task (`RetentionSweeper`); `wire` converts its messages.
"""

__all__ = ["repository", "service", "wire"]
