"""A misspelt STELLO_ variable is named at start with the closest known name
(`stello.config.env_names`), and the known names cover every one the project reads."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from stello.config.env_names import EXEMPT_PREFIXES, known_variables, unknown_variables
from stello_cli.admin.databases import settings_of

REPO = Path(__file__).resolve().parents[3]
NAME = re.compile(r"STELLO_[A-Z0-9_]*")
SKIPPED_DIRS = {".git", ".venv", "node_modules", "stello.egg-info", "__pycache__"}
TEXT_SUFFIXES = {"", ".py", ".sh", ".md", ".yml", ".yaml", ".toml", ".ini", ".js", ".proto", ".sql"}
MISSPELT = "STELLO_DB_POOL_" + "MAX_SZE"
"""Built in two pieces, so the grep below does not find it here."""


def settings_table() -> ModuleType:
    """scripts/settings_table.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "settings_table", REPO / "scripts/settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_files() -> list[Path]:
    """The tree's text files, but the test modules (which name unknown variables on purpose)
    and what is not the project's (the virtualenv, git's own files, build outputs)."""
    found = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [name for name in dirs if name not in SKIPPED_DIRS]
        for name in files:
            path = Path(folder, name)
            relative = path.relative_to(REPO)
            if relative.parts[0] == "tests" and name.startswith("test_"):
                continue
            if path.suffix in TEXT_SUFFIXES:
                found.append(path)
    return found


def known(name: str, names: frozenset[str]) -> bool:
    """Whether `name` is read, exempt, or the prefix of read ones (``STELLO_GATEWAY_*``)."""
    stem = name.rstrip("_")
    return (
        name in names
        or name.startswith(EXEMPT_PREFIXES)
        or any(variable.startswith(stem + "_") for variable in names)
    )


def test_every_name_in_the_source_tree_is_known() -> None:
    """Each STELLO_ name in the code, scripts, docs, deploy files and test helpers is in
    `stello.config.env_names`' lists: a new variable read anywhere cannot be warned about."""
    names = known_variables()
    unknown: dict[str, str] = {}
    for path in source_files():
        text = path.read_text(errors="replace")
        for name in set(NAME.findall(text)):
            if not known(name, names):
                unknown.setdefault(name, str(path.relative_to(REPO)))
    assert unknown == {}


def test_the_settings_list_is_generated_from_the_classes() -> None:
    """`SETTINGS_VARIABLES` is what scripts/settings_table.py --write makes of the Settings
    classes (its --check fails too while it is stale)."""
    table = settings_table()
    source = table.ENV_NAMES.read_text()
    assert table.with_names(source) == source
    assert "STELLO_GATEWAY_PORT" in table.settings_names()


class TestUnknownVariables:
    def test_a_misspelt_variable_is_named_with_the_closest_known_one(self) -> None:
        """One line per unknown variable, naming it and the name it likely misspells."""
        lines = unknown_variables(
            {MISSPELT: "50", "STELLO_GATWAY_PORT": "1", "STELLO_QQQ": "1", "HOME": "/"}
        )
        assert lines == [
            f"{MISSPELT} is not a variable Stello reads (did you mean "
            "STELLO_DB_POOL_MAX_SIZE?); it is ignored",
            "STELLO_GATWAY_PORT is not a variable Stello reads (did you mean "
            "STELLO_GATEWAY_PORT?); it is ignored",
            "STELLO_QQQ is not a variable Stello reads; it is ignored",
        ]

    def test_read_and_test_variables_are_not_warned_about(self) -> None:
        """Settings' variables (every service's), the client's, the tools' and the tests'."""
        environ = {
            "STELLO_DB_POOL_MAX_SIZE": "5",
            "STELLO_GATEWAY_PORT": "1",
            "STELLO_STORAGE_WORKERS": "2",
            "STELLO_LOG_FORMAT": "json",
            "OTEL_SERVICE_NAME": "x",
            "STELLO_OTEL": "1",
            "STELLO_KEY": "k",
            "STELLO_WORKER": "w",
            "STELLO_POSTGRES_PASSWORD": "p",
            "STELLO_TEST_ANYTHING": "1",
        }
        assert unknown_variables(environ) == []

    def test_an_admin_command_warns_on_stderr(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`stello keys`, `spaces`, `migrate` and `up` read their settings once: then each
        unknown variable is one warning line, and the command goes on."""
        monkeypatch.setenv(MISSPELT, "50")
        settings_of(argparse.Namespace(database_url=None))
        said = capsys.readouterr().err.splitlines()
        assert (
            f"stello: warning: {MISSPELT} is not a variable Stello reads (did you mean "
            "STELLO_DB_POOL_MAX_SIZE?); it is ignored"
        ) in said


@pytest.mark.subprocess
def test_a_service_warns_at_start(tmp_path: Path) -> None:
    """`python -m tree_service` logs the warning before anything else can stop it (here a
    TLS file that does not exist, so nothing is started)."""
    env = {
        **os.environ,
        MISSPELT: "50",
        "STELLO_TLS_CERT_FILE": str(tmp_path / "absent.pem"),
        "STELLO_TLS_KEY_FILE": str(tmp_path / "absent.key"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tree_service", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    warnings = [line for line in done.stderr.splitlines() if MISSPELT in line]
    assert len(warnings) == 1 and "did you mean STELLO_DB_POOL_MAX_SIZE?" in warnings[0]
    assert " WARNING " in warnings[0]
