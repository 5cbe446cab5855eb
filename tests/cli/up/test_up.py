"""`stello up` as a real process, driven through the `stello` client commands."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.processes import (
    FREE_PORTS,
    READY_TIMEOUT_S,
    StelloUp,
    cli_json,
    client_env,
    copy_cluster,
    gone,
    postgres_processes,
    private_env,
    run_cli,
)
from tests.support.metrics import calls_by_worker
from tests.support.ports import free_port

pytestmark = pytest.mark.subprocess


def assert_stopped(up: StelloUp, postmaster: int) -> None:
    """Ctrl-C ends `stello up` with 0 and leaves no process, the embedded PostgreSQL included."""
    code, rest = up.interrupt()
    assert code == 0, up.stderr[-3000:]
    assert rest == ["stopped"]
    assert "Traceback" not in up.stderr
    assert gone(postmaster), f"postgres {postmaster} still runs"
    assert postgres_processes(up.data_dir) == []
    assert not (up.data_dir / "postmaster.pid").exists()


def test_up_client_session_and_restart(home: Path) -> None:
    """root → fork → send → tree → digests through the CLI; Ctrl-C; a second up sees the data."""
    env = private_env(home)
    up = StelloUp.start(env)
    try:
        lines = up.lines
        assert lines["gateway"].startswith("127.0.0.1:")
        assert {"storage", "tree", "space_id", "key", "provider"} <= set(lines)
        assert lines["provider"] == "echo"
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        # The banner ends by saying where the key is kept.
        assert up.output[-1].startswith(f"saved: {saved} ")
        assert [line.partition(":")[0] for line in up.output[-3:]] == ["key", "ready", "saved"]
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert json.loads(saved.read_text()) == {
            **{name: lines[name] for name in ("space_id", "key", "gateway", "storage", "tree")},
            "data_dir": str(Path(env["STELLO_DATA_DIR"]).resolve()),
            "database_url": "",
            "database_password": False,
        }
        postmaster = up.postmaster_pid()

        root = cli_json(env, "root", "--label", "Research", "--system-prompt", "Be brief.")
        assert root["label"] == "Research"
        child = cli_json(env, "fork", root["id"], "--label", "Side question", "--context", "none")
        assert child["parent_id"] == root["id"]

        sent = run_cli(env, "send", child["id"], "hello there")
        assert sent.returncode == 0, sent.stderr
        assert "hello there" in sent.stdout  # echo answers from the last user message
        chat = run_cli(env, "chat", child["id"], stdin="and again\n/quit\nnever sent\n")
        assert chat.returncode == 0, chat.stderr
        assert "and again" in chat.stdout
        assert "never sent" not in chat.stdout

        tree = run_cli(env, "tree")
        assert tree.returncode == 0, tree.stderr
        assert tree.stdout.splitlines() == [
            f"Research          [active, 0 turns]  {root['id'][:8]}",
            f"└─ Side question  [active, 2 turns]  {child['id'][:8]}  assistant: echo: and again",
        ]
        digests = cli_json(env, "digests")
        assert {(d["label"], d["turn_count"]) for d in digests} == {
            ("Research", 0),
            ("Side question", 2),
        }
        records = cli_json(env, "records", child["id"])
        assert [r["role"] for r in records] == ["user", "assistant"] * 2
        newest = run_cli(env, "records", child["id"][:8], "--limit", "1")
        assert newest.stdout.startswith(f"[{records[-1]['seq']}] assistant · ")

        assert " stello.rpc " not in up.stderr  # quiet: no line per call unless at DEBUG
        admin = run_cli(env, "keys", "create", "--admin")
        assert admin.returncode == 0, admin.stderr
        admin_key = dict(line.split(": ", 1) for line in admin.stdout.splitlines())["key"]
        swept = run_cli(env, "reconcile", "--admin-key", admin_key, "--dry-run")
        assert (swept.returncode, swept.stdout) == (0, "would remove 0 provisional sessions\n")
        negative = run_cli(env, "reconcile", "--admin-key", admin_key, "--older-than", "-5")
        assert (negative.returncode, negative.stderr) == (
            2,
            "stello reconcile: --older-than: must not be negative, got -5 "
            "(see `stello reconcile --help`)\n",
        )
        denied = run_cli(env, "reconcile", "--admin-key", lines["key"])
        assert denied.stderr.startswith("stello: ") and "PERMISSION_DENIED" not in denied.stderr

        bad = run_cli(env, "fork", "not-a-uuid", "--label", "x")
        assert bad.returncode == 2
        assert bad.stderr.startswith("stello fork: SOURCE: 'not-a-uuid' is neither a session id")
        assert len(bad.stderr.splitlines()) == 1
        unknown = run_cli(env, "fork", "0" * 32, "--label", "x")
        assert unknown.returncode == 1
        assert unknown.stderr.startswith(
            "stello: SOURCE: no session 00000000-0000-0000-0000-000000000000 in this space"
        )
        assert_stopped(up, postmaster)

        up = StelloUp.start(env)
        assert (up.lines["space_id"], up.lines["key"]) == (lines["space_id"], lines["key"])
        again = cli_json(env, "tree")
        assert [(n["label"], n["turn_count"]) for n in again] == [
            ("Research", 0),
            ("Side question", 2),
        ]
        assert_stopped(up, up.postmaster_pid())
    finally:
        up.kill()


def test_admin_commands_use_the_database_of_up(home: Path, cluster_template: Path) -> None:
    """`stello keys create` in a shell without `stello up`'s STELLO_DATA_DIR makes the key in
    up's database (the one it saved), not in a new embedded cluster the gateway never sees;
    a URL up was given with a password is asked for again, never saved."""
    env = private_env(home)
    env["STELLO_DATA_DIR"] = str(home / "elsewhere" / "pgdata")
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    up = StelloUp.start(env)
    try:
        shell = {name: value for name, value in env.items() if name != "STELLO_DATA_DIR"}
        made = run_cli(shell, "keys", "create", "--space", "demo", "--name", "from a shell")
        assert made.returncode == 0, made.stderr
        key = dict(line.split(": ", 1) for line in made.stdout.splitlines())["key"]
        tree = run_cli({**shell, "STELLO_KEY": key}, "tree", "--json")
        assert (tree.returncode, tree.stderr, tree.stdout) == (0, "", "[]\n")
        listed = run_cli(shell, "keys", "list")
        assert "from a shell" in listed.stdout, listed.stderr
        default = Path(shell["XDG_DATA_HOME"]) / "stello"
        assert not default.exists()  # no second cluster was made
        assert_stopped(up, up.postmaster_pid())
    finally:
        up.kill()
    saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
    data = json.loads(saved.read_text())
    data.update(data_dir="", database_url="postgresql://me@db.example/stello")
    saved.write_text(json.dumps({**data, "database_password": True}))
    asked = run_cli(shell, "keys", "list")
    assert (asked.returncode, asked.stderr) == (
        1,
        "stello: `stello up` runs on postgresql://me@db.example/stello, whose password is not "
        "saved: pass --database-url (or set STELLO_DATABASE_URL) as for `stello up`\n",
    )


def test_port_in_use_is_one_line_and_leaves_nothing(home: Path, cluster_template: Path) -> None:
    """A gateway port already taken: one line naming the flag, exit 1, PostgreSQL stopped;
    gRPC's own log line (add_port.cc) is not shown unless GRPC_VERBOSITY asks for it."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    env.pop("GRPC_VERBOSITY", None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = run_cli(env, "up", "--storage-port", "0", "--tree-port", "0", "--gateway-port", port)
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"stello: the gateway service cannot listen on 127.0.0.1:{port} ")
    assert "--gateway-port" in last
    assert "Traceback" not in done.stderr
    assert "add_port.cc" not in done.stderr and "fork_posix.cc" not in done.stderr
    assert postgres_processes(Path(env["STELLO_DATA_DIR"])) == []


def test_a_taken_metrics_port_names_its_variable(home: Path, cluster_template: Path) -> None:
    """A taken STELLO_GATEWAY_METRICS_PORT: one line naming the variable, exit 1 (it blamed
    the gateway's gRPC port and --gateway-port), with or without workers."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env["STELLO_GATEWAY_METRICS_PORT"] = str(port)
        for workers in ("1", "2"):
            done = run_cli(env, "up", *FREE_PORTS, "--no-console", "--workers", workers)
            assert done.returncode == 1, done.stderr
            last = done.stderr.splitlines()[-1]
            assert last.startswith(f"stello: cannot serve /metrics on 127.0.0.1:{port} "), last
            assert last.endswith(
                "choose another port with STELLO_GATEWAY_METRICS_PORT, 0 = any free one"
            )
            assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("STELLO_GATEWAY_CALL_TIMEOUT_S", "-1", "STELLO_GATEWAY_CALL_TIMEOUT_S: "),
        ("STELLO_GATEWAY_PROMPTS", "klingon", "STELLO_GATEWAY_PROMPTS: "),
        ("STELLO_TREE_PROVISIONING_TTL_S", "none", "STELLO_TREE_PROVISIONING_TTL_S: "),
        ("STELLO_GATEWAY_PROFILES_FILE", "missing.toml", "missing.toml"),
    ],
)
def test_a_bad_service_setting_is_one_line_before_the_database_starts(
    home: Path, variable: str, value: str, problem: str
) -> None:
    """A refused STELLO_GATEWAY_* / STELLO_TREE_* value or gateway file: one line naming
    it, exit 1, and no embedded PostgreSQL was made (its data directory does not exist)."""
    env = private_env(home)
    env[variable] = str(home / value) if value.endswith(".toml") else value
    done = run_cli(env, "up", *FREE_PORTS)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("stello: ") and problem in done.stderr, done.stderr
    assert not Path(env["STELLO_DATA_DIR"]).exists()


def test_a_bad_profiles_file_names_its_line_profile_and_field(home: Path) -> None:
    """`stello up` refuses a profiles file with a bad field in one line naming the file, the
    field's 1-based line, the profile by its name, the field and what to do (not pydantic's
    ``profiles.1.context``), exit 1, before the database starts."""
    env = private_env(home)
    profiles = home / "profiles.toml"
    profiles.write_text(
        '[[profiles]]\nname = "a"\n\n[[profiles]]\nname = "support"\ncontext = "all"\n',
        encoding="utf-8",
    )
    env["STELLO_GATEWAY_PROFILES_FILE"] = str(profiles)
    done = run_cli(env, "up", *FREE_PORTS)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f'stello: {profiles} line 6: profile "support", field context: must be one of '
        "'none', 'inherit' or 'compress', got 'all'\n"
    )
    assert not Path(env["STELLO_DATA_DIR"]).exists()


def wait_for_log(up: StelloUp, text: str, within_s: float = 60) -> None:
    """Wait until `stello up` has logged `text`."""
    deadline = time.monotonic() + within_s
    while text not in up.stderr:
        assert time.monotonic() < deadline, f"never logged {text!r}: {up.stderr[-3000:]}"
        assert up.process.poll() is None, f"stello up ended: {up.stderr[-3000:]}"
        time.sleep(0.1)


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "workers"])
def test_a_killed_embedded_postgres_is_started_again(
    home: Path, workers: str, cluster_template: Path
) -> None:
    """When the embedded PostgreSQL dies (SIGKILL of its postmaster), `stello up` (one process
    or workers) says so in one line and starts it again on the same data: what was written is
    there and calls work again, the periodic jobs' outage is at most one WARNING line each,
    with no traceback (explore4 F7: `stello up` stayed NOT_SERVING for good, logging ERROR
    and a traceback every 10 s)."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    env["STELLO_TREE_SWEEP_INTERVAL_S"] = "0.5"  # a periodic job that meets the outage
    up = StelloUp.start(env, "--no-console", "--workers", workers)
    try:
        root = cli_json(env, "root", "--label", "Kept")
        postmaster = up.postmaster_pid()
        os.kill(postmaster, signal.SIGKILL)
        wait_for_log(up, "the services reconnect")
        assert up.process.poll() is None
        assert f"the embedded PostgreSQL (pid {postmaster}) stopped unexpectedly" in up.stderr
        again = up.postmaster_pid()
        assert again != postmaster and not gone(again), up.stderr[-3000:]
        deadline = time.monotonic() + 30
        while (tree := run_cli(env, "tree", "--json")).returncode != 0:
            assert time.monotonic() < deadline, tree.stderr
            time.sleep(0.2)
        assert [n["id"] for n in json.loads(tree.stdout)] == [root["id"]]
        assert cli_json(env, "root", "--label", "After")["label"] == "After"
        logged = up.stderr
        assert " ERROR " not in logged, logged[-3000:]
        periodic = [line for line in logged.splitlines() if " stello.db.periodic " in line]
        assert all(" WARNING " in line or " INFO " in line for line in periodic), periodic
        assert_stopped(up, again)
    finally:
        up.kill()


def test_up_with_two_workers(home: Path, cluster_template: Path) -> None:
    """`stello up --workers 2`: the client session works across the workers' shared ports;
    each /metrics asked for is served merged, each sample labelled with its worker (every
    worker bound STELLO_GATEWAY_METRICS_PORT itself, so the second did not start); Ctrl-C
    stops both workers and the embedded PostgreSQL. STELLO_ACCESS_LOG=1 logs the calls, as
    without workers (the workers kept only warnings)."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    env["STELLO_ACCESS_LOG"] = "1"
    gateway_metrics, tree_metrics = free_port(), free_port()
    env["STELLO_GATEWAY_METRICS_PORT"] = str(gateway_metrics)
    env["STELLO_TREE_METRICS_PORT"] = str(tree_metrics)
    up = StelloUp.start(env, "--workers", "2", "--no-console")
    try:
        count, _, pids = up.lines["workers"].partition(" (pids ")
        workers = [int(pid) for pid in pids.rstrip(")").split()]
        assert count == "2" and len(workers) == 2
        assert not any(gone(pid) for pid in workers)
        root = cli_json(env, "root", "--label", "Spread")
        child = cli_json(env, "fork", root["id"], "--label", "Leaf", "--context", "none")
        sent = run_cli(env, "send", child["id"], "hello there")
        assert sent.returncode == 0, sent.stderr
        assert "hello there" in sent.stdout
        tree = cli_json(env, "tree")
        assert [(n["label"], n["turn_count"]) for n in tree] == [("Spread", 0), ("Leaf", 1)]
        assert calls_by_worker(gateway_metrics, "/stello.agent.v1.AgentGateway/GetTree")
        assert calls_by_worker(tree_metrics, "/stello.tree.v1.SessionTree/GetTree")
        assert_stopped(up, up.postmaster_pid())
        assert all(gone(pid) for pid in workers)
        assert "rpc /stello.agent.v1.AgentGateway/GetTree OK" in up.stderr, up.stderr[-2000:]
    finally:
        up.kill()


def test_a_killed_up_leaves_its_postgres_to_the_next(home: Path, cluster_template: Path) -> None:
    """`stello up` killed -9 leaves its embedded PostgreSQL running; the next `stello up`
    joins it and its Ctrl-C stops it. Before, the dead process stayed listed among the
    cluster's users, so no later `stello up` was ever its last user and the PostgreSQL
    ran on until killed by hand (explore4 F11)."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    first = StelloUp.start(env, *FREE_PORTS, "--no-console")
    try:
        postmaster = first.postmaster_pid()
        first.process.kill()
        first.process.wait(timeout=20)
        assert not gone(postmaster)
    finally:
        first.kill()
    second = StelloUp.start(env, *FREE_PORTS, "--no-console")
    try:
        assert second.postmaster_pid() == postmaster  # joined, not started again
        assert_stopped(second, postmaster)
    finally:
        second.kill()
        for process in postgres_processes(Path(env["STELLO_DATA_DIR"])):
            process.kill()


def test_a_second_up_on_one_config_dir_refuses_and_a_dead_ones_lock_is_taken_over(
    home: Path, cluster_template: Path
) -> None:
    """A `stello up` on a config dir another one serves from ends at once with one line
    naming that one (pid, gateway) and what to do, its files untouched: it started anyway
    and wrote its own gateway into credentials.json (and its console secret), so the client
    commands called a gateway that had stopped with it. The lock a killed one left (its pid
    dead) does not stop the next one."""
    env = private_env(home)
    copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
    config = Path(env["STELLO_CONFIG_DIR"])
    config.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    (config / "up.lock").write_text(json.dumps({"pid": dead.pid, "gateway": "127.0.0.1:1"}))
    first = StelloUp.start(env, "--no-console")
    try:
        before = {path.name: path.read_bytes() for path in config.iterdir()}
        assert second_up(env) == (
            1,
            "",
            f"stello: another `stello up` (pid {first.process.pid}, gateway "
            f"{first.lines['gateway']}) runs on the config dir {config}: stop it first, or "
            "start this one with another config dir (STELLO_CONFIG_DIR)\n",
        )
        assert {path.name: path.read_bytes() for path in config.iterdir()} == before
        assert run_cli(env, "tree").returncode == 0
    finally:
        first.kill()


def second_up(env: dict[str, str], *flags: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """A second `stello up` (FLAGS) that must end at once: its exit code, stdout, stderr."""
    second = subprocess.Popen(
        [sys.executable, "-m", "stello_cli", "up", *FREE_PORTS, "--no-console", *flags],
        env=client_env(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = second.communicate(timeout=READY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        second.send_signal(signal.SIGINT)
        out, err = second.communicate(timeout=30)
    return second.returncode, out, err


def test_a_second_up_on_one_data_dir_refuses(home: Path, cluster_template: Path) -> None:
    """A `stello up` with a config dir of its own but the data dir another one runs its
    embedded PostgreSQL on (the first's chosen with --data-dir) ends at once with one line
    naming that one (pid, gateway, config dir), what chose the data dir (STELLO_DATA_DIR,
    or --data-dir, a relative one from the current directory) and what to do, leaving
    nothing behind (its config dir kept an empty up.lock): it joined the other's
    PostgreSQL, made a second key in the same local space and served beside it, both
    supervising the one server (a restart after it died raced the other's `pg_ctl start`
    on one data directory)."""
    env = private_env(home)
    data_dir = env.pop("STELLO_DATA_DIR")
    copy_cluster(cluster_template, data_dir)
    other = dict(env, STELLO_CONFIG_DIR=str(home / "other-config"))
    first = StelloUp.start(env, "--no-console", "--data-dir", data_dir)
    try:
        assert (Path(data_dir) / "postmaster.pid").exists()
        saved = json.loads((Path(env["STELLO_CONFIG_DIR"]) / "credentials.json").read_text())
        assert saved["data_dir"] == data_dir
        running = (
            f"stello: another `stello up` (pid {first.process.pid}, gateway "
            f"{first.lines['gateway']}, config dir {env['STELLO_CONFIG_DIR']}) runs the "
            f"embedded PostgreSQL of the data dir {data_dir}"
        )
        assert second_up(dict(other, STELLO_DATA_DIR=data_dir)) == (
            1,
            "",
            f"{running} (from STELLO_DATA_DIR): stop it first, or start this one with another "
            "data dir (--data-dir, or STELLO_DATA_DIR)\n",
        )
        assert second_up(other, "--data-dir", "pgdata", cwd=Path(data_dir).parent) == (
            1,
            "",
            f"{running} (given with --data-dir): stop it first, or start this one with "
            "another --data-dir\n",
        )
        assert not (home / "other-config").exists()  # not even an empty up.lock
        assert run_cli(env, "tree").returncode == 0
    finally:
        first.kill()


def test_a_data_dir_that_is_a_file_is_refused_before_anything_starts(home: Path) -> None:
    """`stello up --data-dir` naming a file: one usage line naming the flag, exit 2, and
    nothing made (no config dir, no lock beside the file)."""
    env = private_env(home)
    taken = home / "taken"
    taken.write_text("a file\n")
    done = run_cli(env, "up", *FREE_PORTS, "--data-dir", str(taken))
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"stello up: --data-dir: {taken} is a file, not a folder (see `stello up --help`)\n",
    )
    assert not Path(env["STELLO_CONFIG_DIR"]).exists()
    assert sorted(path.name for path in home.iterdir()) == ["config", "data", "run", "taken"]
