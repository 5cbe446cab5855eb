"""npm packages a test needs, installed by `npm ci` from the project's own package files.

`installed(folder)` runs `npm ci` in `folder` (its package.json and
package-lock.json pin every version; never a CDN) once per change of those
files: a stamp in node_modules holds their hash. Test processes running side
by side take a file lock first, so one installs and the others wait for it.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

NPM_CI_TIMEOUT_S = 240.0
STAMP_NAME = ".stello-installed.sha256"


def _lock_path(folder: Path) -> Path:
    """The lock file of `folder` (per checkout, outside it)."""
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"stello-npm-{digest}.lock"


def _manifest_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()


async def installed(folder: Path) -> Path:
    """`folder`'s node_modules, installed by `npm ci` unless it already matches the lock.

    Fails the test when npm is missing in CI (env CI set); skips it elsewhere.
    """
    npm = shutil.which("npm")
    if npm is None:
        reason = f"npm is not on PATH (needed to install {folder.name}'s packages)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run this test, install Node.js there")
        pytest.skip(reason)
    stamp = folder / "node_modules" / STAMP_NAME
    wanted = _manifest_hash(folder)
    fd = os.open(_lock_path(folder), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted):
            await _npm_ci(npm, folder)
            stamp.write_text(wanted, encoding="utf-8")
    finally:
        os.close(fd)  # releases the lock
    return folder / "node_modules"


async def _npm_ci(npm: str, folder: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        npm, "ci", "--no-audit", "--no-fund", cwd=folder,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), NPM_CI_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"npm ci in {folder} did not finish within {NPM_CI_TIMEOUT_S:.0f} s")
    assert process.returncode == 0, f"npm ci in {folder} failed:\n{output.decode()}"
