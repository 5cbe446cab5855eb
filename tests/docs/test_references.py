"""README.md, docs/*.md and the other READMEs name only what exists: every backticked repository
path (`tests/...::Test`, globs too), every dotted name of our packages (`stello.db.pool.x`) or
proto (`stello.agent.v1.AgentGateway`), every bare module (`running.py`: some file of ours), every
name said to live in a file (`file.py` `name`) and every `Class.method` of a class of ours.

A newcomer follows these names to the code; a module that moved or a function renamed leaves a
name that leads nowhere. The names are resolved statically (the files and their syntax trees),
so the check imports nothing and stays in the default tier.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "protos/README.md",
    REPO / "examples/node-client/README.md",
]
"""The documents checked; a path in one is from the repository's root, or from its folder."""
PACKAGES = (
    "stello",
    "storage_service",
    "tree_service",
    "agent_gateway",
    "stello_client",
    "stello_console",
    "stello_cli",
)
ROOTS = (*PACKAGES, "tests", "scripts", "deploy", "docs", "tools", "protos", "bench", "examples")
PATH = re.compile(rf"^(?:{'|'.join(ROOTS)}|\.ci)/[\w./*\-]*(?:::[\w:]+)?$")
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.\w+)+(?:/\w+)?$")
RELATIVE = re.compile(r"^(?:\w+/)*\w+\.py$")
NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
# `file.py` `Name`, `file.py` (`Name`, `Name` in `file.py`, `Name` (`file.py`): a name said to
# live in a file.
BESIDE = re.compile(rf"`([\w/]+\.py)`\s+`({NAME})(?:\(\))?`")
IN_FILE = re.compile(rf"`({NAME})`\s+in\s+`([\w/]+\.py)`")
PAREN = re.compile(rf"`({NAME})(?:\(\))?`\s+\(`([\w/]+\.py)`")
# (after a file and a parenthesis, a plain word may be prose: only a name that looks like code)
FILE_PAREN = re.compile(rf"`([\w/]+\.py)`\s+\(`((?=[A-Z_]|\w*[_.]){NAME})(?:\(\))?`")
METHOD = re.compile(r"^([A-Z]\w*)\.([A-Za-z_]\w*)(?:\(\))?$")
FILE_SUFFIXES = (".py", ".md", ".toml", ".sql", ".json", ".yaml", ".yml", ".txt", ".proto", ".js")

ALLOWED: dict[str, str] = {
    "stello.dev": "ErrorInfo's domain, a string on the wire",
    "stello/migrations/NNNN_what_it_does.sql": "the pattern a new migration's name follows",
    "stello.agent.v2": "protos/README.md: the package a breaking change would need, not yet one",
}
"""Deliberate non-references, each with its reason."""


def spans(text: str) -> list[str]:
    """The inline code spans of `text`, fenced blocks left out."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.findall(r"`([^`\n]+)`", prose)


def tokens(text: str) -> list[str]:
    """Every word of every span, trailing punctuation off."""
    return [word.rstrip(",;:.)'\"") for span in spans(text) for word in span.split()]


@functools.cache
def repo_files() -> tuple[str, ...]:
    """Every file's path relative to the repository, virtualenvs and .git left out."""
    skip = {".git", ".venv", "node_modules", "__pycache__"}
    found: list[str] = []
    for folder, folders, files in os.walk(REPO):
        folders[:] = [name for name in folders if name not in skip]
        base = Path(folder).relative_to(REPO)
        found.extend((base / name).as_posix() for name in files)
    return tuple(found)


@functools.cache
def proto_names() -> frozenset[str]:
    """The full names of the services, messages and enums protos/ declares."""
    names: set[str] = set()
    for proto in (REPO / "protos").rglob("*.proto"):
        text = proto.read_text()
        package = re.search(r"^package ([\w.]+);", text, flags=re.MULTILINE)
        assert package is not None, proto
        declared = re.findall(r"^\s*(?:service|message|enum) (\w+)", text, flags=re.MULTILINE)
        names.update(f"{package[1]}.{name}" for name in declared)
    return frozenset(names)


@functools.cache
def defined(path: Path) -> dict[str, ast.AST | None]:
    """A module's top-level names: its definitions (with their nodes) and what it imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return body_names(tree.body)


def body_names(body: list[ast.stmt]) -> dict[str, ast.AST | None]:
    """The names a module or class body binds; a class or function keeps its node."""
    names: dict[str, ast.AST | None] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(
                    dict.fromkeys(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                )
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, ast.If | ast.Try):
            names.update(body_names(node.body))
            for handler in getattr(node, "handlers", []):
                names.update(body_names(handler.body))
            names.update(body_names(node.orelse))
    return names


def attribute_problem(path: Path, chain: list[str]) -> str | None:
    """Why `chain` (a name, then attributes) is not found in the module at `path`, or None."""
    names = defined(path)
    for index, part in enumerate(chain):
        if part not in names:
            return f"{'.'.join(chain[: index + 1])} is not defined in {path.relative_to(REPO)}"
        node = names[part]
        if not isinstance(node, ast.ClassDef):
            return None  # a function's or an import's attributes are not followed
        names = dict.fromkeys(class_names(node)) | body_names(node.body)
    return None


def class_names(node: ast.ClassDef) -> set[str]:
    """The attributes a class body binds, and those its methods set on `self`."""
    names = set(body_names(node.body))
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
            names.add(sub.attr)
    return names


def module_file(parts: list[str]) -> Path | None:
    """The file of the module `parts` names, or None."""
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def path_problem(token: str, folder: Path = REPO) -> str | None:
    """Why the path `token` (from the repository's root, or from `folder`) does not resolve."""
    path, _, names = token.partition("::")
    path = path.split("…")[0].removesuffix("...")
    for base in dict.fromkeys((REPO, folder)):
        if "*" in path and list(base.glob(path)):
            return None
        if "*" not in path and (base / path).exists():
            return attribute_problem(base / path, names.split("::")) if names else None
    return f"{path} does not exist"


def dotted_problem(token: str) -> str | None:
    """Why the dotted name `token` is neither a module nor a name one of ours defines, or None.

    A name with a `v1` part is a proto's full name (`stello.agent.v1.AgentGateway`, with an
    RPC after a slash): a service, message or enum protos/ declares.
    """
    if ".v1." in token:
        name = token.split("/")[0]
        return None if name in proto_names() else f"{name}: no such proto service or message"
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(parts[:cut])
        if found is not None:
            return attribute_problem(found, parts[cut:]) if parts[cut:] else None
    return f"{token}: no such module"


def relative_problem(token: str) -> str | None:
    """Why the module `token` (a bare `name.py` or `room/name.py`) is no file of ours, or None."""
    if any(path == token or path.endswith("/" + token) for path in repo_files()):
        return None
    return f"{token}: no file of that name"


def problems(doc: Path) -> list[str]:
    """Every name in `doc` that leads nowhere."""
    text = doc.read_text()
    found: list[str] = []
    for token in dict.fromkeys(tokens(text)):
        if token in ALLOWED:
            continue
        if PATH.match(token):
            problem = path_problem(token, doc.parent)
        elif DOTTED.match(token) and not token.endswith(FILE_SUFFIXES):
            problem = dotted_problem(token)
        elif RELATIVE.match(token):
            problem = relative_problem(token)
        else:
            problem = None
        if problem is not None:
            found.append(problem)
    pairs = [
        *BESIDE.findall(text),
        *FILE_PAREN.findall(text),
        *((path, name) for name, path in [*IN_FILE.findall(text), *PAREN.findall(text)]),
    ]
    for path, name in dict.fromkeys(pairs):
        file = located(path)
        if file is not None and f"{path} {name}" not in ALLOWED:
            problem = attribute_problem(file, name.split("."))
            if problem is not None:
                found.append(problem)
    protos = {name.rpartition(".")[2] for name in proto_names()}
    for span in dict.fromkeys(spans(text)):
        match = METHOD.match(span)
        if match and match[1] in classes() and match[1] not in protos:
            if match[2] not in attributes(match[1]):
                found.append(f"{match[0]}: no class {match[1]} of ours has {match[2]}")
    return found


def attributes(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The attributes of every class of ours called `name`, with those of its bases."""
    own, bases = classes()[name]
    found = set(own)
    for base in bases - seen - {name}:
        if base in classes():
            found |= attributes(base, seen | {name})
    return found


def located(path: str) -> Path | None:
    """The file a path names: from the repository's root, or the one file ending so."""
    if PATH.match(path):
        return REPO / path if (REPO / path).is_file() else None
    ending = [name for name in repo_files() if name == path or name.endswith("/" + path)]
    return REPO / ending[0] if len(ending) == 1 else None


@functools.cache
def classes() -> dict[str, tuple[set[str], set[str]]]:
    """Every class our packages define, by name: the attributes and the bases' names of all
    classes of that name."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    for name in repo_files():
        if name.endswith(".py") and name.split("/")[0] in PACKAGES and "/v1/" not in name:
            for node in ast.walk(ast.parse((REPO / name).read_text())):
                if isinstance(node, ast.ClassDef):
                    own, bases = found.setdefault(node.name, (set(), set()))
                    own.update(class_names(node))
                    bases.update(ast.unparse(base).rpartition(".")[2] for base in node.bases)
    return found


@pytest.mark.parametrize("doc", DOCS, ids=[doc.relative_to(REPO).as_posix() for doc in DOCS])
def test_every_reference_resolves(doc: Path) -> None:
    """Every path, module and name the document mentions exists in the repository."""
    assert problems(doc) == []


class TestExtraction:
    """The check finds what it must, so a clean run means something."""

    def test_a_stale_path_and_name_are_reported(self, tmp_path: Path) -> None:
        """A moved file, a name gone from its module and a renamed function are all reported."""
        doc = tmp_path / "doc.md"
        doc.write_text(
            "See `stello/nothing_here.py`, `stello.db.pool.no_such_name` and"
            " `stello/db/pool.py` `no_such_function`; `stello/db/pool.py` is fine.\n"
        )
        found = problems(doc)
        assert len(found) == 3, found

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param("`NO_SUCH` in `stello/db/pool.py`", id="in"),
            pytest.param("`no_such` (`stello/db/pool.py`: its pool)", id="name-then-file"),
            pytest.param("`stello/db/pool.py` (`NoSuch`: a class)", id="file-then-name"),
            pytest.param("`running.py` `JobRuns.no_such`", id="bare-module"),
            pytest.param("`BackgroundRunner.no_such`", id="method"),
            pytest.param("`no_such_module.py`", id="bare-file"),
            pytest.param("`tests/docs/test_references.py::TestNoSuch`", id="test-class"),
            pytest.param("`stello.agent.v1.NoSuchService/Call`", id="proto"),
        ],
    )
    def test_each_form_of_a_stale_name_is_reported(self, tmp_path: Path, text: str) -> None:
        """Each way the documents name code reports a name that is gone."""
        doc = tmp_path / "doc.md"
        doc.write_text(text + "\n")
        assert problems(doc), text

    def test_fenced_blocks_are_not_spans(self) -> None:
        """Code in fenced blocks is left to the tests that run it."""
        assert spans("```bash\n`stello/x.py`\n```\nand `y`\n") == ["y"]
