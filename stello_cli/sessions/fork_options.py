"""What root, fork and chat's /fork take besides a label: a profile with its --var
values (checked against the profile's variables), --skills, --context and --up-to;
and K=V pairs, which --where takes too."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

from stello_client.errors import UsageError

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.types import ContextName

CONTEXTS = ("none", "inherit", "compress")


def profile_vars(pairs: list[str] | None, flag: str = "--var") -> dict[str, str]:
    """`--var NAME=VALUE` flags (or `flag`'s) as a dict."""
    found: dict[str, str] = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"{flag} wants NAME=VALUE, got {pair!r}")
        found[name] = value
    return found


def template_values(args: argparse.Namespace) -> dict[str, str]:
    """The --var values; refused without --profile (nothing would read them)."""
    values = profile_vars(args.var)
    if values and not args.profile:
        raise UsageError("--var: fills a profile's {NAME}, so it needs --profile NAME")
    return values


async def check_template_values(client: AsyncClient, profile: str, values: dict[str, str]) -> None:
    """Refuse a --var the profile has no variable for (the gateway would drop it: a typo
    went unnoticed); an unknown profile is left to the gateway to name."""
    if not values:
        return
    found = next((p for p in await client.list_profiles() if p.name == profile), None)
    unused = [name for name in values if found is not None and name not in found.variables]
    if unused:
        known = ", ".join(found.variables) if found is not None and found.variables else "none"
        raise UsageError(
            f"--var: profile {profile!r} has no variable {', '.join(unused)} "
            f"(its variables: {known})"
        )


def skill_list(value: str | None) -> list[str] | None:
    """--skills NAMES: comma-separated names; "" = none; absent (None) = inherit."""
    if value is None:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def fork_context(args: argparse.Namespace) -> ContextName | None:
    """The context of --context (None: the profile's); --up-to alone means inherit."""
    if args.up_to is not None and args.context not in (None, "inherit"):
        raise UsageError(
            f"--up-to: inherits the records up to SEQ, so it needs --context inherit "
            f"(or no --context), not --context {args.context}"
        )
    if args.up_to is not None and args.up_to < 0:
        raise UsageError(f"--up-to: must not be negative, got {args.up_to}")
    context: Literal["none", "inherit", "compress"] | None = (
        "inherit" if args.up_to is not None else args.context
    )
    return context


def profile_options(parser: argparse.ArgumentParser) -> None:
    """--profile, --var and --skills."""
    parser.add_argument(
        "--profile", metavar="NAME", help="a profile of the gateway's file (`stello profiles`)"
    )
    parser.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="a value of the --profile's {NAME} variables (repeat for each; needs --profile, "
        "and NAME must be one of its variables)",
    )
    parser.add_argument(
        "--skills",
        metavar="NAMES",
        help='the skills it may activate, comma-separated ("" = none; default: inherit)',
    )
