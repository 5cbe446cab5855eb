"""The tools a turn offers the model: the built-in ones run here, client ones by the caller.

- `base`: the built-in names, a tool's answer (`ToolOutcome`), the `BuiltinTool`
  protocol every built-in tool keeps, and the checks of client tools;
- `builtins`: which built-in tools a turn offers, and running what the model calls
  (one dispatch, by name);
- `create_session`: ``stello_create_session``, a fork through the Fork saga;
- `memory`: the shared memory tools (recall, remember, forget);
- `skills`: skills from the gateway's TOML file and ``activate_skill``.
"""

from __future__ import annotations

__all__: list[str] = []
