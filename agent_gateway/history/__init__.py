"""History at any length: a turn's context, its token budget, compression and folds (DESIGN §4.3).

- `records`: stored records <-> what a turn works with;
- `context`: the messages a turn sends, in order, sanitised;
- `budget`: counting a prompt in the model's tokens, the window's shares;
- `folding`: records folded into a summary, one bounded model call per chunk;
- `compression`: a turn's incremental, bounded compression;
- `background_fold`: a lossy catch-up replaced by a complete summary, later;
- `consolidation`: a session's memory rewritten by the model (Consolidate);
- `summarizer`: the COMPRESS fork's summary.
"""

from __future__ import annotations

__all__: list[str] = []
