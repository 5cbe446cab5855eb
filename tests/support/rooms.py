"""What the package tests of the services check of their rooms (STYLE §1, §16): each room's
`__all__` against its modules, and the imports that leave a service."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path


def room_modules(package: str, room: str) -> tuple[list[str], list[str]]:
    """A room's `__all__` and its modules, each sorted; every listed module imported."""
    found = importlib.import_module(f"{package}.{room}")
    listed = sorted(found.__all__)
    for name in listed:
        importlib.import_module(f"{package}.{room}.{name}")
    return listed, sorted(m.name for m in pkgutil.iter_modules(found.__path__))


def foreign_imports(root: Path, foreign: tuple[str, ...]) -> set[str]:
    """`file: module` of every import under `root` of a package in `foreign`."""
    return {
        f"{path.relative_to(root)}: {name}"
        for path in root.rglob("*.py")
        for name in _imported(path)
        if any(name == f or name.startswith(f"{f}.") for f in foreign)
    }


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return names
