"""Sessions as clients see them: joined reads over storage and tree, pass-through writes, events.

- `service`: GetSession, records, label/slot/archive/delete (each write goes to the
  one service that owns the data), and the digest pages of
- `digests`: ListSessionDigests and GetLineage, a listing joined with its slots
  within a page's bytes;
- `watch`: WatchSpace, one poller per space fanned out to its watchers (DESIGN §4.6);
- `poller`: a space's poller and its ring, which turns waiting in a line listen to too;
- `watch_ends`: what ends a stream of itself (its age, a blocked send, a revoked key).
"""

from __future__ import annotations

__all__: list[str] = []
