"""``{name}`` templates: the syntax of profile prompts and of the configurable built-in texts.

``{name}`` (a Python identifier in braces) is a variable; ``{{`` and ``}}``
are literal braces; any other brace is kept as written, so a JSON example
in a prompt needs no escaping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_variables(template: str) -> tuple[str, ...]:
    """The `{name}` variables of `template`, in first-use order, each once."""
    names = [m.group(1) for m in _TOKEN.finditer(template) if m.group(1)]
    return tuple(dict.fromkeys(names))


def render_template(template: str, values: Mapping[str, str]) -> str:
    """Replace each `{name}` with `values[name]`; `{{`/`}}` become literal braces.

    Raises:
        KeyError: a variable has no value (the first missing name).
    """

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)[0]
        return values[name]

    return _TOKEN.sub(substitute, template)
