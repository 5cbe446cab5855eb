"""A service's command line: a few flags over its settings, and a --help that lists them all.

``python -m storage_service --help`` (and tree, gateway) prints the flags and
every environment variable the service reads — its own (``STELLO_STORAGE_*``)
and the shared ones — with their defaults, then exits 0 without starting
anything. The flags (``--host``, ``--port``, ``--workers``, ``--metrics-port``)
override the service's variables of the same name; everything else is
configured by the environment, as in a container.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any

from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

FLAGS = ("host", "port", "workers", "metrics_port")
"""The settings a flag may override (each service has them under its own prefix)."""


def settings_help(classes: Sequence[type[BaseSettings]]) -> str:
    """Every variable of `classes`: name, default and meaning, one block per class."""
    lines: list[str] = []
    for cls in classes:
        prefix = str(cls.model_config.get("env_prefix", ""))
        lines.append(f"{cls.__doc__.splitlines()[0] if cls.__doc__ else cls.__name__}")
        for name, info in cls.model_fields.items():
            default = info.default
            shown = "required" if default is PydanticUndefined else f"default {default!r}"
            if default is None:
                shown = "unset by default"
            lines.append(f"  {prefix}{name.upper()}  ({shown})")
            if info.description:
                lines.append(
                    textwrap.fill(
                        info.description, 96, initial_indent=" " * 6, subsequent_indent=" " * 6
                    )
                )
        lines.append("")
    return "\n".join(lines)


def parse_flags(
    prog: str,
    description: str,
    service: type[BaseSettings],
    shared: Sequence[type[BaseSettings]],
    argv: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The settings the flags override, as keyword arguments of `service`.

    ``--help`` prints the flags and the variables of `service` and `shared`, and
    exits 0 (argparse's SystemExit); a bad flag exits 2 with argparse's message.
    """
    prefix = str(service.model_config.get("env_prefix", ""))
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog="environment variables (a flag wins over its variable):\n\n"
        + settings_help((service, *shared)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fields = service.model_fields
    parser.add_argument("--host", help=f"interface to listen on ({prefix}HOST)")
    parser.add_argument("--port", type=int, help=f"TCP port; 0 = any free one ({prefix}PORT)")
    if "workers" in fields:
        parser.add_argument(
            "--workers",
            type=int,
            metavar="N",
            help=f"worker processes serving the port, each with its own event loop and a "
            f"share of the database pool ({prefix}WORKERS)",
        )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help=f"serve Prometheus /metrics on this port ({prefix}METRICS_PORT)",
    )
    args = parser.parse_args(argv)
    return {name: getattr(args, name) for name in FLAGS if getattr(args, name, None) is not None}
