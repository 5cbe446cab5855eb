"""The space's shared memory through the gateway (DESIGN §4.5).

- `shared`: the shared memory RPCs' logic, checked before storage is called;
- `index`: the index of entries a turn's context carries.
"""

from __future__ import annotations

__all__: list[str] = []
