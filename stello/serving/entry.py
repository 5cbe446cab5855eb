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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import AliasChoices, ValidationError
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

FLAGS = ("host", "port", "workers", "metrics_port")
"""The settings a flag may override (each service has them under its own prefix)."""


@contextmanager
def settings_checked(prog: str, given: Mapping[str, Any] | None = None) -> Iterator[None]:
    """End the process with `prog: VARIABLE: problem` (exit 1, no traceback) when a
    Settings class refuses a value inside the block; a value given by a flag (`given`, as
    `parse_flags` answers) is named by its flag (`--workers`), not its variable."""
    flags = {name: "--" + name.replace("_", "-") for name in given or {}}
    try:
        yield
    except ValidationError as exc:
        line = settings_problem(exc, flags)
        if line is None:
            raise
        raise SystemExit(f"{prog}: {line}") from None


def settings_problem(exc: ValidationError, flags: Mapping[str, str] | None = None) -> str | None:
    """A Settings class's refusal as one line naming each variable at fault, e.g.
    ``STELLO_LLM_PROVIDER: Input should be 'echo', 'openai' or 'anthropic'`` (or the flag
    that gave the field, `flags` mapping field names to flags); None when `exc` is not a
    Settings class's. The values are not shown (one may be a secret)."""
    cls = _settings_class(BaseSettings, exc.title)
    if cls is None:
        return None
    problems = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        field = str(error["loc"][0]) if error["loc"] else ""
        name = (flags or {}).get(field) or _variable(cls, field)
        problems.append(f"{name}: {message}" if field else message)
    return "; ".join(problems)


def _settings_class(base: type[BaseSettings], name: str) -> type[BaseSettings] | None:
    """The loaded subclass of `base` called `name` (a ValidationError's title), or None."""
    for cls in base.__subclasses__():
        found = cls if cls.__name__ == name else _settings_class(cls, name)
        if found is not None:
            return found
    return None


def variables_of(cls: type[BaseSettings]) -> list[str]:
    """Every environment variable `cls` reads: each field's alias (each of its choices),
    else the class's prefix and the field's name, upper case."""
    names: list[str] = []
    for field in cls.model_fields:
        names += _variable(cls, field).split(" / ")
    return names


def _variable(cls: type[BaseSettings], field: str) -> str:
    """The environment variable of `cls`'s `field` (its alias, else prefix and name)."""
    info = cls.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        return " / ".join(str(choice) for choice in alias.choices)
    return f"{cls.model_config.get('env_prefix', '')}{field}".upper()


def _shown_default(default: object) -> str:
    """A field's default as --help shows it: a switch as 0 or 1, like README's table."""
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "unset by default"
    if isinstance(default, bool):
        return f"default {int(default)}"
    return f"default {default!r}"


def settings_help(classes: Sequence[type[BaseSettings]]) -> str:
    """Every variable of `classes`: name, default and meaning, one block per class."""
    lines: list[str] = []
    for cls in classes:
        lines.append(f"{cls.__doc__.splitlines()[0] if cls.__doc__ else cls.__name__}")
        for name, info in cls.model_fields.items():
            lines.append(f"  {_variable(cls, name)}  ({_shown_default(info.default)})")
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
