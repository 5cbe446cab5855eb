"""Every ``STELLO_`` variable README.md and docs/*.md name is one the project reads.

A setting renamed or removed leaves its old name in the prose, and a reader who sets it is
ignored in silence but for one warning at start. The known names are the lists of
stello/config/env_names.py (every Settings field, the client commands' variables, the rest's),
read from its syntax tree, plus the tests' and benchmarks' own prefixes; a name that ends in
``_`` (``STELLO_TLS_*``) is a family and must start at least one known name.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.docs.test_references import DOCS, REPO

ENV_NAMES = REPO / "stello/config/env_names.py"
VARIABLE = re.compile(r"\bSTELLO_[A-Z0-9_]*[A-Z0-9_]")
LISTS = ("SETTINGS_VARIABLES", "CLIENT_VARIABLES", "OTHER_VARIABLES", "EXEMPT_PREFIXES")


@functools.cache
def known() -> tuple[frozenset[str], tuple[str, ...]]:
    """The known variables and the exempt prefixes, as env_names.py lists them."""
    found: dict[str, tuple[str, ...]] = {}
    for node in ast.parse(ENV_NAMES.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in LISTS and node.value:
                    found[target.id] = tuple(ast.literal_eval(node.value))
    assert set(found) == set(LISTS), f"env_names.py lacks {set(LISTS) - set(found)}"
    names = frozenset(name for key in LISTS[:3] for name in found[key])
    return names, found["EXEMPT_PREFIXES"]


def unknown(text: str) -> list[str]:
    """The ``STELLO_`` names of `text` that no list knows, each once, in order."""
    names, exempt = known()
    stale: list[str] = []
    for name in dict.fromkeys(VARIABLE.findall(text)):
        if name in names or name.startswith(exempt):
            continue
        if name.endswith("_") and any(other.startswith(name) for other in names):
            continue
        stale.append(name)
    return stale


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO).as_posix())
def test_every_variable_is_read(doc: Path) -> None:
    assert unknown(doc.read_text()) == []


def test_a_stale_name_is_reported() -> None:
    text = "`STELLO_GATEWAY_PORT`, `STELLO_GATEWAY_PORTS`, `STELLO_TLS_*`, `STELLO_NOPE_*`."
    assert unknown(text) == ["STELLO_GATEWAY_PORTS", "STELLO_NOPE_"]
