"""Sessions as clients see them: joined reads over storage and tree, pass-through writes, events.

- `service`: GetSession, records, label/slot/archive/delete (each write goes to the
  one service that owns the data), and the digest pages of
- `digests`: ListSessionDigests and GetLineage, a listing joined with its slots
  within a page's bytes;
- `watch`: WatchSpace, one poller per space fanned out to its watchers (DESIGN §4.6).
"""

from __future__ import annotations

__all__: list[str] = []
