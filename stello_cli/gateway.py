"""The gateway as a command uses it: the SDK's client made from the command line, and
session ids from what a person typed.

Flags first, then the environment (``STELLO_GATEWAY``, ``STELLO_KEY``,
``STELLO_SPACE_ID``, ``STELLO_CA_FILE``, ...), then what `stello up` saved
(`stello_client.connection.target`). The space is settled before the command's first
call, so a wrong one fails first. A SESSION may be its id or the first digits
of it, resolved within the space by the gateway's ResolveSessionPrefix (one
index range, never a read of the whole space). A failed call inside
`gateway(args)` becomes one `ClientError` line (`stello_client.errors`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import string
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from stello_cli.output.style import one_line
from stello_cli.parser import call_timeout, typed_names
from stello_client.connection.flags import resolve_tls
from stello_client.errors import (
    FLAGS,
    SHUT_DOWN,
    ClientError,
    UsageError,
    configuration_line,
    connection_hint,
    field_flag,
    rpc_error_line,
    unanswered,
)

if TYPE_CHECKING:  # the SDK (and grpc) load when a command connects, not to parse its line
    from stello_client.aio import AsyncClient
    from stello_client.exceptions import RpcError

CANDIDATES_SHOWN = 4
# A command answers soon: three tries (0.1 s, then 0.2 s apart) before an outage is reported
# (not the SDK's unavailable_for_s, for programs that ride out a restart).
RETRY_ATTEMPTS = 3
_HEX = frozenset(string.hexdigits)


def connect(args: argparse.Namespace) -> AsyncClient:
    """The SDK's client for the command's gateway, key, space, TLS and --timeout.

    Raises:
        UsageError: --gateway, --key or --space given empty (a script's `--key "$KEY"`
            with KEY unset).
        ClientError: no gateway or key, or unusable TLS settings (in the flags' words).
    """
    from stello_client.aio import AsyncClient
    from stello_client.calls import Retry
    from stello_client.exceptions import ConfigurationError

    tls = resolve_tls(args)
    try:
        return AsyncClient(
            args.gateway,
            args.key,
            args.space,
            tls=tls,
            plaintext=tls is None,
            timeout=call_timeout(args),
            turn_timeout=call_timeout(args),
            retry=Retry(attempts=RETRY_ATTEMPTS, unavailable_for_s=0),
        )
    except ConfigurationError as exc:
        if exc.setting in ("gateway", "key", "space") and getattr(args, exc.setting) == "":
            raise UsageError(configuration_line(exc)) from None
        raise ClientError(configuration_line(exc)) from None


@contextlib.asynccontextmanager
async def gateway(args: argparse.Namespace, *, settle: bool = True) -> AsyncIterator[AsyncClient]:
    """The command's client, its space settled (unless `settle` is false: a command that
    needs no space); a failed call inside becomes a ClientError."""
    from stello_client.exceptions import ConfigurationError, RpcError

    client = connect(args)
    try:
        async with client:
            if settle:
                await client.space_id()
            yield client
    except RpcError as err:
        line = failed_call_line(err, args, client.gateway, getattr(args, "flags", {}))
        line = missing_session_line(err, args) or line
        usage = unknown_profile(err, line, "--profile", typed="--profile" in typed_names(args))
        if usage is not None:
            raise usage from None
        if refused_typed_value(err, args):
            raise UsageError(line) from None
        raise ClientError(line) from None
    except ConfigurationError as exc:
        raise ClientError(configuration_line(exc)) from None


def failed_call_line(
    err: RpcError, args: argparse.Namespace, address: str, flags: Mapping[str, str]
) -> str:
    """A failed call's line (`rpc_error_line`, the request fields named as `flags`), saying
    where the command took its key when the gateway refused it, or its gateway's address
    when nothing answered there: at the command's start or in the middle of a chat."""
    line = rpc_error_line(err, address, flags)
    if err.code.name == "UNAUTHENTICATED":  # by name: grpc loads with the SDK only
        return f"{line} ({key_source(args)})"
    if nothing_at(err, address):
        return f"{line} ({gateway_source(args)})"
    return line


def unknown_profile(err: RpcError, line: str, option: str, *, typed: bool) -> UsageError | None:
    """PROFILE_NOT_FOUND for a profile name the user `typed` (with `option`: `--profile`,
    chat's `/fork --profile`) is a wrong command line, as argparse's bad choice is: the usage
    error naming `option` (exit 2), `line` saying which profiles there are. None otherwise.
    """
    from stello import reasons

    if typed and err.reason == reasons.PROFILE_NOT_FOUND:
        return UsageError(f"{option}: {line}")
    return None


def missing_session_line(err: RpcError, args: argparse.Namespace) -> str | None:
    """A session the gateway does not find (SESSION_NOT_FOUND) whose whole id was typed on
    this command line, said as that argument's or flag's error with what to do, as digits
    no id starts with are (`session_id`); None for any other error."""
    from stello import reasons

    missing = err.info.get("session_id")
    if err.reason != reasons.SESSION_NOT_FOUND or not missing:
        return None
    parser = getattr(args, "parser", None)
    for action in parser._actions if parser is not None else ():
        typed = getattr(args, action.dest, None)
        if isinstance(typed, str) and _whole_id(typed) == missing:
            name = max(action.option_strings, key=len, default=action.metavar or action.dest)
            return f"{name}: no session {missing} in this space (`stello tree` lists them)"
    return None


def _whole_id(text: str) -> str | None:
    """`text` as a session id, when it is a whole one."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


REFUSED_VALUE = ("INVALID_ARGUMENT", "OUT_OF_RANGE")
"""The codes of a gateway refusing a request's values (`refused_typed_value`)."""


def refused_typed_value(
    err: RpcError, args: argparse.Namespace, flags: Mapping[str, str] | None = None
) -> bool:
    """Whether the gateway refused values typed on this command line: an INVALID_ARGUMENT
    or OUT_OF_RANGE whose every field names a flag or argument of the command (`--label`,
    `LABEL`, `K=V`; `flags`: the command's names of request fields, else its `flags`).
    That is a usage error (exit 2), as the same mistake caught before the call is; a value
    read elsewhere (a file, a session's state) stays a failure (exit 1)."""
    if err.code.name not in REFUSED_VALUE or not err.violations:
        return False
    names = {**FLAGS, **(getattr(args, "flags", {}) if flags is None else flags)}
    typed = typed_names(args)
    return all(field_flag(v.field, names).split(" ")[0] in typed for v in err.violations)


def key_source(args: argparse.Namespace) -> str:
    """Where the command's key came from (as `stello_client.connection.target` picks it), and what
    to do about a key the gateway refused."""
    from stello_client.connection.credentials import credentials_path

    if args.key:
        return "the key given with --key"
    if os.environ.get("STELLO_KEY", "").strip():
        return "the key in STELLO_KEY: unset it to use the one `stello up` saved"
    return (
        f"the key `stello up` saved in {credentials_path()}: run `stello up` again, which "
        "saves one its gateway takes"
    )


def nothing_at(err: RpcError, address: str) -> bool:
    """Whether nothing answered at `address`: it did not resolve, or nothing listens there
    (not a server that shut down, nor one whose TLS handshake failed: the address is right)."""
    if not unanswered(err) or err.details.strip() == SHUT_DOWN:
        return False
    return err.cause is None or connection_hint(err.cause, address) is None


def gateway_source(args: argparse.Namespace) -> str:
    """Where the command's gateway address came from (as `stello_client.connection.target` picks
    it), for an address that did not resolve or where nothing answered."""
    from stello_client.connection.credentials import credentials_path

    if args.gateway:
        return "the address given with --gateway"
    if os.environ.get("STELLO_GATEWAY", "").strip():
        return "the address in STELLO_GATEWAY: fix it, or unset it to use the one `stello up` saved"
    return f"the address `stello up` saved in {credentials_path()}"


def names_space(args: argparse.Namespace) -> bool:
    """Whether the command line, the environment or `stello up`'s file (for its key) names
    a space."""
    from stello_client.connection.target import resolve_target

    return bool(resolve_target(args.gateway, args.key, args.space, plaintext=True).space)


async def session_id(
    client: AsyncClient, text: str, what: str = "SESSION", lists: str = "`stello tree`"
) -> str:
    """The id of the session `text` names: a whole id, or its first digits (`what`: the
    argument or command it was typed for; `lists`: what shows the sessions there).

    Raises:
        UsageError: `text` is neither an id nor hex digits.
        ClientError: no session, or several, start with those digits.
    """
    whole = _whole_id(text)
    if whole is not None:
        return whole
    digits = text.replace("-", "").lower()
    if not digits or len(digits) > 32 or not _HEX.issuperset(digits):
        raise UsageError(
            f"{what}: {text!r} is neither a session id nor its first digits (0-9, a-f)"
        )
    found = await client.resolve_session_prefix(digits, limit=CANDIDATES_SHOWN + 1)
    if not found:
        raise ClientError(
            f"{what}: no session id starts with {text!r} in this space ({lists} lists them)"
        )
    if len(found) > 1:
        listed = ", ".join(f"{s.id[:12]} ({one_line(s.label)})" for s in found[:CANDIDATES_SHOWN])
        more = ", ..." if len(found) > CANDIDATES_SHOWN else ""
        raise ClientError(
            f"{what}: {text!r} is the start of several session ids: {listed}{more}; type more of it"
        )
    return str(found[0].id)
