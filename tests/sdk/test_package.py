"""The SDK's package: its public names, its type marker, and a light import."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import mypy.api
import pytest

import stello
import stello_client
import stello_client.base
import stello_client.exceptions


def test_exports() -> None:
    """__all__ names the SDK's public pieces, each importable from the package."""
    assert sorted(stello_client.__all__) == [
        "AsyncClient",
        "Client",
        "ConfigurationError",
        "InvalidArgument",
        "NotFound",
        "Retry",
        "RpcError",
        "StelloClientError",
        "TlsFiles",
        "Watch",
        "tool",
        "tool_result",
    ]
    assert all(getattr(stello_client, name) is not None for name in stello_client.__all__)


def test_every_message_a_method_answers_is_in_types() -> None:
    """What a method of the client answers is importable from `stello_client.types`, as
    docs/python.md promises ("`stello_client.types` re-exports them"), to annotate with."""
    import stello_client.types

    answered = set()
    for name, method in inspect.getmembers(stello_client.AsyncClient, inspect.isfunction):
        if not name.startswith("_"):
            returns = str(inspect.signature(method).return_annotation)
            answered |= set(re.findall(r"(?:agent|common)_pb2\.(\w+)", returns))
    assert answered
    assert sorted(answered - set(stello_client.types.__all__)) == []


def test_the_exceptions_are_one_public_module_over_their_families() -> None:
    """`stello_client.exceptions` names every class and function its family modules define,
    so `from stello_client.exceptions import X` stays the one import a program needs."""
    package = stello_client.exceptions
    found = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    assert found == ["access", "base", "contention", "request", "state", "translate", "transport"]
    for name in found:
        module = importlib.import_module(f"stello_client.exceptions.{name}")
        for member, value in inspect.getmembers(module):
            defined_here = getattr(value, "__module__", None) == module.__name__
            if defined_here and not member.startswith("_"):
                assert member in package.__all__, f"{name}.{member}"
                assert getattr(package, member) is value


def test_the_client_core_re_exports_its_channel_and_requests() -> None:
    """`stello_client.base` still names what moved out of it to `channel` and `requests`,
    so a program that imported them from there keeps working."""
    for name in ("connection.channel", "requests"):
        module = importlib.import_module(f"stello_client.{name}")
        for member, value in inspect.getmembers(module):
            defined_here = getattr(value, "__module__", None) == module.__name__
            code = inspect.isroutine(value) or inspect.isclass(value)
            if defined_here and code and not member.startswith("_"):
                assert getattr(stello_client.base, member) is value, f"{name}.{member}"
    channel = importlib.import_module("stello_client.connection.channel")
    assert stello_client.base.CLOSED is channel.CLOSED
    assert stello_client.base.CHANNEL_OPTIONS is channel.CHANNEL_OPTIONS


def test_it_is_typed() -> None:
    """The package ships the py.typed marker, so type checkers read its annotations, and so
    does `stello`, whose generated stubs type every result: without its marker a program
    type-checked against an installed wheel saw every result as Any (explore12 F2)."""
    assert (Path(stello_client.__file__).parent / "py.typed").is_file()
    assert (Path(stello.__file__).parent / "py.typed").is_file()


def test_importing_the_package_loads_no_grpc() -> None:
    """`import stello_client` loads neither grpc nor the stubs: a program answering --help
    with it imported stays fast (names load on first use)."""
    code = (
        "import sys, stello_client; "
        "print(sorted(m for m in sys.modules if m == 'grpc' or m.endswith('_pb2')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = (
    "<!-- quick start: tests/sdk/test_examples.py runs this block -->",
    "<!-- streamed tools: tests/sdk/test_methods.py runs this block -->",
)


@pytest.fixture(name="mypy_cache", scope="module")
def _mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the module's three checks: each started from an empty one and
    analyzed the SDK, grpc's and protobuf's stubs again (1.5 s each); a check with its
    cache still checks a script whose text changed, and what imports it, again."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.parametrize("marker", PROGRAMS, ids=["quick start", "streamed tools"])
def test_the_docs_programs_pass_mypy_strict(marker: str, tmp_path: Path, mypy_cache: Path) -> None:
    """docs/python.md's whole programs type-check as a user's script, `mypy --strict`: the
    streamed tools' loop gave `events` the stream's type and then assigned it
    submit_tool_results_stream's, which mypy refused (found by sdk8)."""
    text = (ROOT / "docs" / "python.md").read_text().partition(marker)[2]
    found = re.search(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert found, f"docs/python.md lost the block after {marker}"
    assert_mypy_strict_passes(found.group(1), tmp_path, mypy_cache)


def assert_mypy_strict_passes(source: str, tmp_path: Path, cache: Path) -> None:
    """`mypy --strict` finds nothing in `source`, a user's script."""
    script = tmp_path / "user_script.py"
    script.write_text(source)
    out, err, status = mypy.api.run(["--strict", "--cache-dir", str(cache), str(script)])
    assert status == 0, out + err


ACLOSING = """
import contextlib

from stello_client import AsyncClient


async def walk(client: AsyncClient, session_id: str) -> None:
    async with contextlib.aclosing(client.records(session_id)) as records:
        async for record in records:
            print(record.seq)
    async with contextlib.aclosing(client.digests(status="all")) as digests:
        async for digest in digests:
            print(digest.label)
    async with contextlib.aclosing(client.lineage(session_id)) as ancestors:
        async for ancestor in ancestors:
            print(ancestor.id)
    async with contextlib.aclosing(client.shared_memory()) as entries:
        async for entry in entries:
            print(entry.slug)
    async with contextlib.aclosing(client.stream(session_id, "hi")) as events:
        async for event in events:
            print(event)
"""


def test_every_iterator_closes_with_aclosing_under_mypy_strict(
    tmp_path: Path, mypy_cache: Path
) -> None:
    """docs/python.md closes `stream()`, `records()`, `digests()` and the other iterators
    with ``contextlib.aclosing(...)``; records, digests, lineage and shared_memory were typed
    AsyncIterator, which has no aclose(), so mypy --strict refused each such line
    (Value of type variable "_SupportsAcloseT" of "aclosing" cannot be ...) (sdk8)."""
    assert_mypy_strict_passes(ACLOSING, tmp_path, mypy_cache)
