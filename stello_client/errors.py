"""What a failed command says: one line on stderr, in the words of the command line.

The one place where an error becomes a sentence for a person (the `stello`
command, the console's JSON errors). The gateway names the fields of its
protos (`inherit_until_seq`, `profile_vars`); a person typed flags (`--up-to`,
`--var`). `rpc_error_line` renders a failed call (the SDK's `RpcError`) with
the field violations of its google.rpc.BadRequest detail, every field name (in
the path and in the text) replaced by the flag or argument that set it;
`configuration_line` names the SDK's settings (``gateway=``) as flags.

grpc is imported only by the functions that render a call: a program that
imports this module to build its parser stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

    from stello_client.exceptions import ConfigurationError, RpcError

# Request fields -> what sets them on the command line (a command adds its own).
FLAGS: dict[str, str] = {
    "space_id": "--space",
    "session_id": "SESSION",
    "source_session_id": "SOURCE",
    "topology_parent_id": "--parent",
    "label": "--label",
    "profile": "--profile",
    "profile_vars": "--var",
    "system_prompt": "--system-prompt",
    "inherit_until_seq": "--up-to",
    "context": "--context",
    "prompt": "--prompt",
    "root_id": "--root",
    "max_depth": "--depth",
    "limit": "--limit",
    "status": "--status",
    "prefix": "SESSION",
}


class ClientError(Exception):
    """Raised when a command cannot do its work; the message is the one line shown (exit 1)."""


class UsageError(ClientError):
    """Raised when the command line itself is wrong (exit 2, as argparse's own errors)."""


def field_flag(path: str, flags: Mapping[str, str]) -> str:
    """The flag of a violation's field path (`label` → `--label`); the path when none."""
    return flags.get(path, path)


def flag_names(text: str, flags: Mapping[str, str]) -> str:
    """`text` with the field names of `flags` replaced by their flags.

    Only names with an underscore (`inherit_until_seq`, `profile_vars`) are
    replaced in free text: plain words such as "label" or "context" are also
    English, and a message saying "INHERIT context" must keep saying so.
    """
    names = sorted((n for n in flags if "_" in n), key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w-])")
    return pattern.sub(lambda m: flags[m.group(1)], text)


def rpc_error_line(
    error: RpcError | grpc.aio.AioRpcError,
    target: str = "",
    flags: Mapping[str, str] | None = None,
    *,
    as_flags: bool = True,
) -> str:
    """A failed call as one line: status code and details, fields named as flags.

    With field violations the details are rebuilt from them (`--up-to: is only
    allowed with INHERIT context, not NONE`); an unreachable gateway gets a hint
    of what to check. `as_flags=False` keeps the gateway's field names (for a
    client that is not this command line: the web console).
    """
    import grpc

    from stello_client.exceptions import RpcError, from_rpc_error

    failed = error if isinstance(error, RpcError) else from_rpc_error(error)
    names = {**FLAGS, **(flags or {})} if as_flags else {}
    code = failed.code
    violations = failed.violations if code == grpc.StatusCode.INVALID_ARGUMENT else ()
    if violations:
        details = "; ".join(
            f"{field_flag(v.field, names)}: {flag_names(v.description, names)}" for v in violations
        )
    else:
        details = flag_names(_flat(failed.details), names)
    line = f"{code.name}: {_flat(details)}" if details else code.name
    if code == grpc.StatusCode.UNAVAILABLE and target:
        line += f" ({_unreachable_hint(details, target)})"
    return line


SETTING_FLAGS = {"gateway=": "--gateway", "key=": "--key", "space=NAME": "--space NAME"}


def configuration_line(error: ConfigurationError) -> str:
    """A client that could not be set up, in the command line's words (`--space`, ...)."""
    text = error.message
    for setting, flag in SETTING_FLAGS.items():
        text = text.replace(setting, flag)
    if error.setting == "space" and "no space named" in text:
        text = f"--space: {text}"
    return _flat(text)


def _unreachable_hint(details: str, target: str) -> str:
    """What to check when `target` did not answer, from how the connection failed."""
    lowered = details.lower()
    if "handshake" in lowered or "ssl" in lowered or "certificate" in lowered:
        return (
            f"the TLS handshake with {target} failed: check --ca-file, --server-name, "
            "and --cert-file/--key-file if the server wants a client certificate"
        )
    if "socket closed" in lowered:
        return (
            f"{target} closed the connection: if it serves TLS, pass --ca-file "
            "(and --cert-file/--key-file for mutual TLS)"
        )
    return f"is a gateway listening at {target}? start one with `stello up`"


def _flat(text: str) -> str:
    """`text` on one line: its whitespace runs collapsed."""
    return " ".join(text.split())
