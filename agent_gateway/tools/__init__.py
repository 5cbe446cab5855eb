"""The tools a turn offers the model: the built-in ones run here, client ones by the caller.

- `builtins`: which built-in tools a turn offers, and running what the model calls;
- `create_session`: ``stello_create_session`` (a fork through the Fork saga), the
  tool names and the checks of client tools;
- `memory`: the shared memory tools (recall, remember, forget);
- `skills`: skills from the gateway's TOML file and ``activate_skill``.
"""

from __future__ import annotations

__all__: list[str] = []
