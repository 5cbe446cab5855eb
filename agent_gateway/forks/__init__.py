"""New sessions: CreateRoot, Fork and ImportSession, through one provisioning saga (DESIGN §4.1).

- `creator`: CreateRoot and Fork — validate, read the source, compose, run the saga;
- `inputs`: what they take once validated, and the sizes storage accepts;
- `compose`: the layers of a new session's config and prompt, as pure functions;
- `profiles`: named fork recipes from the gateway's TOML file;
- `saga`: CreateSession (provisional) -> one storage Transact -> CommitSession;
- `faults`: the saga's fault seam for tests;
- `guard`: the fork guard of the built-in ``stello_create_session`` tool;
- `imports`, `import_requests`: ImportSession and its request checks.
"""

from __future__ import annotations

__all__: list[str] = []
