"""How fast the `stello` command answers: start-up, help, and a read command against a bare
gRPC call, each a fresh process (what a person at a prompt waits for).

Starts `stello up` in a temporary home (embedded PostgreSQL, free ports), then
runs each kind `--runs` times, kinds taking turns, and prints the median and the
fastest wall time of each with the ratios the CLI is held to (issue 36):

- `python -c pass`: the interpreter alone (the floor);
- `stello --version` (target <= 0.15 s) and `stello --help`;
- `stello tree` (a read command: WhoAmI settles the space, then GetTree) against
  a process that imports grpc and the stubs and makes one WhoAmI call
  (target: the command <= 2x that bare call).

    python bench/bench_cli.py [--runs 10]

Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_TIMEOUT_S = 120.0
BARE_CALL = """
import sys
import stello  # the same fork-support setting the CLI makes, before grpc loads
import grpc
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
gateway, key = sys.argv[1], sys.argv[2]
with grpc.insecure_channel(gateway) as channel:
    agent_pb2_grpc.AgentGatewayStub(channel).WhoAmI(
        agent_pb2.WhoAmIRequest(), metadata=[("authorization", f"Bearer {key}")], timeout=30
    )
"""


def private_env(home: Path) -> dict[str, str]:
    """An environment whose home, config and data dirs live under `home`."""
    env = {n: v for n, v in os.environ.items() if not n.startswith(("STELLO_", "XDG_", "OTEL_"))}
    for folder in (home / "config", home / "data", home / "run"):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "run").chmod(0o700)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_RUNTIME_DIR=str(home / "run"),
        STELLO_CONFIG_DIR=str(home / "config" / "stello"),
        STELLO_DATA_DIR=str(home / "data" / "pgdata"),
    )
    return env


def start_up(env: dict[str, str]) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`stello up` on free ports; its banner's `name: value` lines once it saved them."""
    ports = ["--storage-port", "0", "--tree-port", "0", "--gateway-port", "0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "stello_cli", "up", *ports, "--console-port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    lines: dict[str, str] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "saved" not in lines:
        line = process.stdout.readline()
        if not line or time.monotonic() > deadline:
            process.kill()
            raise SystemExit("stello up did not get ready")
        name, sep, value = line.partition(": ")
        if sep:
            lines[name.strip()] = value.strip()
    return process, lines


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds one process took from start to exit (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()[-500:]}")
    return took


def main() -> None:
    """Run the kinds in turns and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="processes of each kind")
    runs = parser.parse_args().runs
    folder = Path(tempfile.mkdtemp(prefix="stello-bench-cli-"))
    env = private_env(folder / "home")
    up, lines = start_up(env)
    try:
        gateway, key = lines["gateway"], lines["key"]
        stello = [sys.executable, "-m", "stello_cli"]
        kinds = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "stello --version": [*stello, "--version"],
            "stello --help": [*stello, "--help"],
            "bare grpc WhoAmI": [sys.executable, "-c", BARE_CALL, gateway, key],
            "stello tree": [*stello, "tree"],
        }
        client = {n: v for n, v in env.items() if n != "PYTHONASYNCIODEBUG"}
        for argv in kinds.values():  # warm the file cache and the gateway once
            timed(argv, client)
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(runs):
            for name, argv in kinds.items():
                times[name].append(timed(argv, client))
    finally:
        up.terminate()
        up.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    median = {name: statistics.median(found) for name, found in times.items()}
    print(f"{'kind':<20} {'median s':>9} {'fastest s':>10}   ({runs} runs each)")
    for name, found in times.items():
        print(f"{name:<20} {median[name]:>9.3f} {min(found):>10.3f}")
    version = median["stello --version"]
    ratio = median["stello tree"] / median["bare grpc WhoAmI"]
    print(f"stello --version: {version:.3f} s (target <= 0.150 s)")
    print(f"stello tree / bare grpc call: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
