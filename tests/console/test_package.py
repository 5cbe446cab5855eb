"""The console package's surface, its assets, and the kernel rule (it imports no service)."""

from __future__ import annotations

import ast
from pathlib import Path

import stello_console
from stello_console.app import STATIC

SERVICES = ("storage_service", "tree_service", "agent_gateway")


def test_exports() -> None:
    """__all__ names the console's public pieces, each importable."""
    assert sorted(stello_console.__all__) == [
        "AccessPolicy",
        "Caller",
        "ConsoleGateway",
        "ConsoleOptions",
        "LaunchToken",
        "RunningConsole",
        "console_secret",
        "create_console",
        "running_console",
    ]
    assert all(getattr(stello_console, name) is not None for name in stello_console.__all__)


def test_it_imports_no_service_package() -> None:
    """The console is a gRPC client of the gateway: no module of it imports a service."""
    for path in Path(stello_console.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not [n for n in names if n.split(".")[0] in SERVICES], path


def test_assets_fetch_nothing_from_the_network() -> None:
    """No asset names another host (no CDN): scripts, styles and icons are all local."""
    for path in STATIC.iterdir():
        text = path.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text and "//cdn" not in text, path.name


def test_scripts_never_parse_markup() -> None:
    """No script uses an HTML sink (innerHTML, outerHTML, insertAdjacentHTML, document.write)."""
    for path in STATIC.glob("*.js"):
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in text, f"{path.name} uses {sink}"
