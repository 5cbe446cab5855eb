"""docs/architecture.md names every module and folder of each package, in that package's section,
and every benchmark of `bench/`.

A newcomer finds a module through the page's tables; a module added without a line there is
one they cannot find from it (STYLE §16). Each package's section is the text between its
heading and the next; a module counts as named when its file name (`stop_words.py`) or its
folder (`search/`) appears there. The generated stubs (`stello/*/v1/`), `__init__.py`,
`__main__.py` and the console's `static/` are left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_references import REPO

PAGE = REPO / "docs/architecture.md"
PROGRAMS = ("### The programs", "### Benchmarks")
SECTIONS = {
    "stello": ("### Inside the kernel", "### Inside the gateway"),
    "agent_gateway": ("### Inside the gateway", "### Inside storage"),
    "storage_service": ("### Inside storage", "The tree service groups"),
    "tree_service": ("The tree service groups", "### The programs"),
    "stello_client": PROGRAMS,
    "stello_cli": PROGRAMS,
    "stello_console": PROGRAMS,
    "bench": ("### Benchmarks", "## The path of a Send"),
}
"""Each package and the text that opens and closes its section of the page."""
SKIPPED_FILES = {"__init__.py", "__main__.py"}
SKIPPED_FOLDERS = {"v1", "static", "__pycache__"}


def section(text: str, package: str) -> str:
    start, end = SECTIONS[package]
    return text[text.index(start) : text.index(end)]


def modules(folder: Path) -> list[Path]:
    """The modules under `folder` but its `__init__.py`, relative to it."""
    init = folder / "__init__.py"
    return [path.relative_to(folder) for path in folder.rglob("*.py") if path != init]


def unnamed(package_dir: Path, text: str) -> list[str]:
    """The modules and folders under `package_dir` that `text` does not name."""
    missing: list[str] = []
    for path in sorted(package_dir.rglob("*")):
        relative = path.relative_to(package_dir)
        if SKIPPED_FOLDERS & set(relative.parts):
            continue
        if path.is_dir():
            stubs_only = all(SKIPPED_FOLDERS & set(module.parts) for module in modules(path))
            if stubs_only or not (path / "__init__.py").exists():
                continue
            if f"{path.name}/" not in text:
                missing.append(relative.as_posix() + "/")
        elif path.suffix == ".py" and path.name not in SKIPPED_FILES:
            if not path.name.endswith(("_pb2.py", "_pb2_grpc.py")) and path.name not in text:
                missing.append(relative.as_posix())
    return missing


@pytest.mark.parametrize("package", sorted(SECTIONS))
def test_every_module_is_named_in_its_section(package: str) -> None:
    text = section(PAGE.read_text(), package)
    assert unnamed(REPO / package, text) == []


def test_a_module_left_out_is_reported(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    for name in ("__init__.py", "named.py", "new_module.py"):
        (room / name).write_text("")
    (tmp_path / "top.py").write_text("")
    assert unnamed(tmp_path, "`room/`: `named.py`; `top.py`") == ["room/new_module.py"]
    assert unnamed(tmp_path, "`named.py`, `new_module.py`, `top.py`") == ["room/"]
