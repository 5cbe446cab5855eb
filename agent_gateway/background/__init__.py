"""The gateway's background work, run once per session, bounded and visible (DESIGN §4.8).

- `jobs`: what a job is — its kind and bounds, its run (claim, budget, saves), its outcome;
- `runner`: `BackgroundRunner`, which claims, queues, runs, renews, stops and counts them.
"""

from __future__ import annotations

__all__: list[str] = []
