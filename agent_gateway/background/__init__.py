"""The gateway's background work, run once per session, bounded and visible (DESIGN §4.8).

- `jobs`: what a job is — its kind and bounds, its run (claim, budget, saves), its outcome;
- `runner`: `BackgroundRunner`, which queues, schedules and stops them;
- `running`: one run, mixed into it — its claim taken, renewed and given back, its end stored;
- `metrics`: what it counts, by kind; `takeover`: the periodic look for jobs left without a
  gateway.
"""

from __future__ import annotations

__all__: list[str] = []
