"""Every entry point answers ``--help`` with its flags and settings, and starts nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

from stello.db.pool import database_address
from stello.serving.entry import settings_help
from stello.telemetry.tracing import TracingSettings

pytestmark = pytest.mark.subprocess

ENTRY_POINTS = [
    pytest.param(
        ["storage_service"],
        ["--workers", "--port", "STELLO_STORAGE_PORT", "STELLO_DATABASE_URL"],
        id="storage",
    ),
    pytest.param(
        ["tree_service"],
        ["--workers", "STELLO_TREE_WORKERS", "STELLO_TREE_SWEEP_INTERVAL_S"],
        id="tree",
    ),
    pytest.param(
        ["agent_gateway"],
        [
            "--workers",
            "STELLO_GATEWAY_WORKERS",
            "STELLO_GATEWAY_STORAGE_ADDRESS",
            "STELLO_LLM_PROVIDER",
        ],
        id="gateway",
    ),
    pytest.param(["stello_console"], ["--gateway", "--port"], id="console"),
    pytest.param(["stello_cli", "up"], ["--workers", "--gateway-port", "--database-url"], id="up"),
]


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` to its end (60 s at most), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


@pytest.mark.parametrize(("command", "expected"), ENTRY_POINTS)
def test_help_prints_flags_and_exits(command: list[str], expected: list[str]) -> None:
    """``--help`` prints usage, the flags and (for the services) every variable, exits 0."""
    # A server started by mistake would serve (or fail to bind) instead: no usage text.
    done = run_module(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout[:500]
    for text in expected:
        assert text in done.stdout, text
    assert "listening" not in done.stderr


@pytest.mark.parametrize("module", ["storage_service", "tree_service", "agent_gateway"])
def test_a_bad_flag_is_refused(module: str) -> None:
    """An unknown flag or a bad value exits 2 with argparse's message, before anything starts."""
    done = run_module(module, "--workers", "many")
    assert done.returncode == 2
    assert "--workers: invalid int value: 'many'" in done.stderr


@pytest.mark.parametrize("module", ["storage_service", "tree_service", "agent_gateway"])
@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("STELLO_LLM_PROVIDER", "gpt", "Input should be 'echo', 'openai' or 'anthropic'"),
        ("STELLO_LOG_LEVEL", "LOUD", "Input should be 'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it(
    module: str, variable: str, value: str, problem: str
) -> None:
    """A value a setting refuses exits 1 with one line naming the variable: no traceback,
    no pydantic field name or URL, and nothing started (no database is reachable here)."""
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        variable: value,
    }
    done = run_module(module, "--port", "0", env=env)
    assert (done.returncode, done.stderr) == (1, f"{module}: {variable}: {problem}\n")


@pytest.mark.parametrize("module", ["storage_service", "tree_service", "agent_gateway"])
def test_a_flag_value_a_setting_refuses_names_the_flag(module: str) -> None:
    """`--workers 0` exits 1 with one line naming --workers, the flag given (it named the
    variable, which the operator had not set); the variable is named when it gave it."""
    env = {**os.environ, "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = run_module(module, "--workers", "0", env=env)
    problem = "Input should be greater than or equal to 1"
    assert (done.returncode, done.stderr) == (1, f"{module}: --workers: {problem}\n")
    variable = {"storage_service": "STELLO_STORAGE_WORKERS", "tree_service": "STELLO_TREE_WORKERS"}
    name = variable.get(module, "STELLO_GATEWAY_WORKERS")
    done = run_module(module, env={**env, name: "0"})
    assert (done.returncode, done.stderr) == (1, f"{module}: {name}: {problem}\n")


def test_a_service_address_without_a_port_is_one_line_naming_it() -> None:
    """The gateway refuses a storage address that is not host:port at start (gRPC took it,
    and the first call failed), on one line naming the variable."""
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "STELLO_GATEWAY_STORAGE_ADDRESS": "nohostport",
    }
    done = run_module("agent_gateway", "--port", "0", env=env)
    assert (done.returncode, done.stderr) == (
        1,
        "agent_gateway: STELLO_GATEWAY_STORAGE_ADDRESS: expected host:port (several: "
        "comma-separated), got 'nohostport'\n",
    )


@pytest.mark.parametrize("module", ["storage_service", "tree_service", "agent_gateway"])
def test_an_unreachable_database_is_one_line_naming_it(module: str) -> None:
    """A service whose database nobody answers at exits 1 with one line naming where it was
    sought (never the password): no traceback."""
    env = {**os.environ, "STELLO_DATABASE_URL": "postgresql://nobody:s3cret@127.0.0.1:1/none"}
    done = run_module(module, "--port", "0", env=env)
    assert done.returncode == 1, done.stderr
    [line] = [x for x in done.stderr.splitlines() if " ERROR " in x]  # the log's format
    assert (
        f" {module}: cannot connect to the database at 127.0.0.1:1/none (STELLO_DATABASE_URL): "
        in line
    )
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.sql
@pytest.mark.parametrize(
    ("user", "database", "problem"),
    [
        pytest.param("nouser:s3cret", None, 'role "nouser" does not exist', id="no-role"),
        pytest.param(None, "nodb_e7", 'database "nodb_e7" does not exist', id="no-database"),
    ],
)
def test_a_database_that_refuses_is_one_line_naming_it(
    admin_dsn: str, user: str | None, database: str | None, problem: str
) -> None:
    """A server that answers but refuses the connection (no such role or database): one
    line naming the variable and where (never the password), exit 1, no traceback."""
    parts = urlsplit(admin_dsn)
    host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
    netloc = f"{user}@{host}" if user else parts.netloc  # the host may be in the query
    path = f"/{database}" if database else parts.path
    url = urlunsplit(parts._replace(netloc=netloc, path=path))
    done = run_module(
        "storage_service", "--port", "0", env={**os.environ, "STELLO_DATABASE_URL": url}
    )
    assert done.returncode == 1, done.stderr
    [line] = [x for x in done.stderr.splitlines() if " ERROR " in x]
    where = database_address(url)
    assert line.endswith(
        f" storage_service: cannot connect to the database at {where} (STELLO_DATABASE_URL): "
        f"{problem}"
    ), line
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("module", ["storage_service", "tree_service", "agent_gateway"])
def test_an_unreadable_tls_file_is_one_line_before_the_database(module: str) -> None:
    """A TLS file that cannot be read stops the service with one line naming its variable
    and file, before the database is sought (none answers here), exit 1, no traceback."""
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "STELLO_TLS_CERT_FILE": "/nonexistent.pem",
        "STELLO_TLS_KEY_FILE": "/nonexistent.key",
    }
    done = run_module(module, "--port", "0", env=env)
    assert done.returncode == 1, done.stderr
    [line] = [x for x in done.stderr.splitlines() if " ERROR " in x]
    assert line.endswith(
        f" {module}: cannot read the STELLO_TLS_CERT_FILE /nonexistent.pem: "
        "No such file or directory"
    ), line
    assert "Traceback" not in done.stderr


def test_the_gateways_unreadable_services_ca_is_one_line_before_the_database() -> None:
    """The CA file of the gateway's channels to storage and tree, unreadable, stops it with
    one line naming its variable before the database is sought (it was read after the
    database answered, and named "the CA file")."""
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "STELLO_GATEWAY_SERVICES_CA_FILE": "/nonexistent-ca.pem",
    }
    done = run_module("agent_gateway", "--port", "0", env=env)
    assert (done.returncode, done.stderr) == (
        1,
        "agent_gateway: cannot read the STELLO_GATEWAY_SERVICES_CA_FILE /nonexistent-ca.pem: "
        "No such file or directory\n",
    )


def test_help_names_the_variables_tracing_reads() -> None:
    """The tracing block names the variables TracingSettings reads (its aliases, not
    STELLO_<field>), and a switch's default as README's table writes it (0, 1)."""
    text = settings_help([TracingSettings])
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT  (unset" in text
    assert "OTEL_SERVICE_NAME  (unset by default)" in text
    assert "STELLO_OTEL  (default 0)" in text
    assert "STELLO_OTLP_ENDPOINT" not in text and "STELLO_SERVICE_NAME" not in text
