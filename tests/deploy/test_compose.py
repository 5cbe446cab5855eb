"""docker-compose.yml, read as YAML: services, health checks, start order and variables."""

from __future__ import annotations

import configparser
import importlib.util
import re
from pathlib import Path
from typing import Any

import yaml

from agent_gateway.config import GatewaySettings
from storage_service.config import StorageSettings
from tree_service.config import TreeSettings

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "docker-compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(TEXT)
SERVICES: dict[str, Any] = COMPOSE["services"]
HEALTHY = {"condition": "service_healthy"}
MIGRATED = {"condition": "service_completed_successfully"}
PORTS = {
    "storage": StorageSettings().port,
    "tree": TreeSettings().port,
    "gateway": GatewaySettings().port,
}
MODULES = {"storage": "storage_service", "tree": "tree_service", "gateway": "agent_gateway"}


def known_variables() -> set[str]:
    """Every variable the Settings classes read (from scripts/settings_table.py)."""
    path = REPO / "scripts/settings_table.py"
    spec = importlib.util.spec_from_file_location("settings_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name for name, _, _ in module.variables()}


def test_the_five_services() -> None:
    """PostgreSQL, a one-shot migration, the three Stello services; PgBouncer only on request."""
    default = {name for name, service in SERVICES.items() if "profiles" not in service}
    assert default == {"postgres", "migrate", "storage", "tree", "gateway"}
    assert SERVICES["pgbouncer"]["profiles"] == ["pgbouncer"]


def test_postgres_is_healthy_when_pg_isready_answers() -> None:
    """The database's health check runs pg_isready against the stello database."""
    postgres = SERVICES["postgres"]
    assert postgres["image"].startswith("postgres:")
    test = postgres["healthcheck"]["test"]
    assert test[0] in ("CMD", "CMD-SHELL") and "pg_isready" in " ".join(test[1:])
    assert "-d stello" in " ".join(test[1:])
    assert postgres["volumes"], "the data must outlive the container"


def test_migrate_runs_once_after_postgres_is_healthy() -> None:
    """`stello migrate` runs after PostgreSQL is healthy and is never restarted."""
    migrate = SERVICES["migrate"]
    assert migrate["command"] == ["stello", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"postgres": HEALTHY}
    assert migrate["environment"]["STELLO_DATABASE_DIRECT_URL"].endswith("@postgres:5432/stello")


def test_services_start_in_order_and_report_health() -> None:
    """Each service waits for a healthy database and a done migration, and has a health check."""
    for name, module in MODULES.items():
        service = SERVICES[name]
        assert service["command"] == ["python", "-m", module]
        assert service["image"] == SERVICES["migrate"]["image"]  # one image
        assert service["depends_on"]["postgres"] == HEALTHY
        assert service["depends_on"]["migrate"] == MIGRATED
        assert service["depends_on"]["pgbouncer"] == {**HEALTHY, "required": False}
        port = PORTS[name]
        assert service["healthcheck"]["test"] == ["CMD", "stello", "health", f"127.0.0.1:{port}"]
        assert service["ports"] == [f"{port}:{port}"]
        assert service["restart"] == "unless-stopped"
    gateway = SERVICES["gateway"]
    assert gateway["depends_on"]["storage"] == gateway["depends_on"]["tree"] == HEALTHY
    env = gateway["environment"]
    assert env["STELLO_GATEWAY_STORAGE_ADDRESS"] == f"storage:{PORTS['storage']}"
    assert env["STELLO_GATEWAY_TREE_ADDRESS"] == f"tree:{PORTS['tree']}"


def test_variables_are_known_and_the_password_is_required() -> None:
    """Every STELLO_ variable is one the code reads; the password fails loudly when unset."""
    known = known_variables()
    for name, service in SERVICES.items():
        env = service.get("environment", {})
        unknown = {var for var in env if var.startswith("STELLO_")} - known
        assert not unknown, f"{name}: {unknown}"
    references = re.findall(r"\$\{([A-Z0-9_]+)(:?[?-])?([^}]*)\}", TEXT)
    required = {name for name, op, message in references if op == ":?" and message}
    assert required == {"STELLO_POSTGRES_PASSWORD"}
    for name, op, _ in references:
        assert op in (":?", ":-"), f"${{{name}}} needs a default (:-) or a message (:?)"
    assert "STELLO_POSTGRES_PASSWORD" in SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"]


def test_pgbouncer_pools_transactions_in_front_of_postgres() -> None:
    """The optional PgBouncer (Debian's package) pools by transaction in front of postgres."""
    bouncer = SERVICES["pgbouncer"]
    assert bouncer["build"] == "deploy/pgbouncer"
    assert bouncer["depends_on"] == {"postgres": HEALTHY}
    ini = configparser.ConfigParser()
    ini.read(REPO / "deploy/pgbouncer/pgbouncer.ini")
    settings = ini["pgbouncer"]
    assert settings["pool_mode"] == "transaction"
    assert int(settings["max_prepared_statements"]) > 0  # asyncpg's cache stays on
    assert ini["databases"]["*"] == "host=postgres port=5432"
    port = settings["listen_port"]
    assert bouncer["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert ["-p", port] == bouncer["healthcheck"]["test"][4:6]
    assert bouncer["ports"] == [f"{port}:{port}"]
    dockerfile = (REPO / "deploy/pgbouncer/Dockerfile").read_text()
    assert "apt-get install" in dockerfile and "pgbouncer" in dockerfile


def test_services_reach_postgres_or_pgbouncer_and_migrate_directly() -> None:
    """STELLO_COMPOSE_DATABASE picks the pooled address; the direct URL is always postgres."""
    env = COMPOSE["x-stello-env"]
    pooled, direct = env["STELLO_DATABASE_URL"], env["STELLO_DATABASE_DIRECT_URL"]
    assert pooled.endswith("@${STELLO_COMPOSE_DATABASE:-postgres:5432}/stello")
    assert direct.endswith("@postgres:5432/stello")
    for name in MODULES:
        service_env = SERVICES[name]["environment"]
        assert service_env["STELLO_DATABASE_URL"] == pooled
        assert service_env["STELLO_DATABASE_DIRECT_URL"] == direct
