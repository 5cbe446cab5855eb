"""Erasure: DeleteSubtree's hide, then the erasure job (DESIGN §4.8).

Owns the hide of a subtree in one transaction (`repository`: the subtree's lock,
the hide and what other sessions show of it, with SUBTREE_DELETED events), the
job that then deletes the hidden sessions in batches, deepest first (`job`, run
by `eraser`, the app's background task), and the release of their records with
the lock of their readers, which the provisional sweep shares (`release`).
`service` runs DeleteSubtree and the job's rounds.
"""

__all__ = ["eraser", "job", "release", "repository", "service"]
