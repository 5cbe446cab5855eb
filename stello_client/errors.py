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

    from stello_client.exceptions.base import ConfigurationError, RpcError

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
    "older_than_s": "--older-than",
    "dry_run": "--dry-run",
    "after_cursor": "--after",
    "page_size": "--page-size",
    "parent_id": "--parent",
    "busy": "--busy",
    "archive_after_s": "--archive-after",
    "delete_after_s": "--delete-after",
    "skills.names": "--skills",
}

# What a failure says when the gateway gave no details of its own.
CODE_SENTENCES: dict[str, str] = {
    "CANCELLED": "the call was cancelled",
    "UNKNOWN": "the gateway failed in an unexpected way (its log says why)",
    "INVALID_ARGUMENT": "the gateway refused the request's values",
    "DEADLINE_EXCEEDED": "the gateway did not answer in time",
    "NOT_FOUND": "not found",
    "ALREADY_EXISTS": "it exists already",
    "PERMISSION_DENIED": "this key may not do that",
    "RESOURCE_EXHAUSTED": "a limit was reached: try again later",
    "FAILED_PRECONDITION": "the session is not in a state that allows this",
    "ABORTED": "another change came first: try again",
    "OUT_OF_RANGE": "a value is out of range",
    "UNIMPLEMENTED": "the gateway does not offer this (is it an older version?)",
    "INTERNAL": "the gateway failed (a bug: its log says why)",
    "UNAVAILABLE": "the gateway is unavailable: try again",
    "DATA_LOSS": "data was lost",
    "UNAUTHENTICATED": "the gateway did not accept the key (--key, STELLO_KEY)",
}
# A hint after the gateway's own sentence, by the error's reason (`stello.reasons`).
REASON_HINTS: dict[str, str] = {
    "TREE_TOO_LARGE": "narrow it with --root or --depth",
    "SEARCH_TOO_BROAD": "narrow it with --session or --root, or more words",
    "PROFILE_NOT_FOUND": "`stello profiles` lists them",
    "TURN_IN_PROGRESS": "another turn is running: wait for it, or pass --busy",
    "TURN_QUEUE_FULL": "pass --busy interrupt",
}
# How gRPC words a connection that failed on the client's side (no server answered).
_TRANSPORT_WORDS = re.compile(
    r"connect|backends|refused|resolution|resolving|lookup failed|socket|handshake|ssl|"
    r"certificate|unreachable",
    re.I,
)
# How gRPC's resolvers (c-ares, the native one) word a host name that does not resolve (the
# SDK's own message reads them too: base._connection_hint).
RESOLVER_WORDS = re.compile(r"resolution failed|errors resolving|lookup failed", re.I)


class ClientError(Exception):
    """Raised when a command cannot do its work; the message is the one line shown (exit 1)."""


class UsageError(ClientError):
    """Raised when the command line itself is wrong (exit 2, as argparse's own errors)."""


def shown(value: object) -> str:
    """A value as an error message quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:59]}…"


def field_flag(path: str, flags: Mapping[str, str]) -> str:
    """The flag of a violation's field path (`label` → `--label`), an entry's too
    (`metadata["1k"]` → `--meta "1k"`, `remove[0]` → `--remove #1`); the path when none."""
    if path in flags:
        return flags[path]
    head, bracket, rest = path.partition("[")
    if bracket and head in flags:
        entry = rest.removesuffix("]")
        return f"{flags[head]} #{int(entry) + 1}" if entry.isdigit() else f"{flags[head]} {entry}"
    return path


def flag_names(text: str, flags: Mapping[str, str]) -> str:
    """`text` with the field names of `flags` replaced by their flags.

    Only names with an underscore (`inherit_until_seq`, `profile_vars`) are
    replaced in free text: plain words such as "label" or "context" are also
    English, and a message saying "with context inherit" must keep saying so.
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
    service: str = "the gateway",
    timeout_s: float | None = None,
) -> str:
    """A failed call as one sentence, fields named as flags, no status code.

    With field violations the sentence is rebuilt from them (`--up-to: is only
    allowed with context inherit (this fork's context is none)`); a gateway that did not answer says
    where it was looked for (`cannot reach the gateway at HOST:PORT: is `stello
    up` running?`); a known reason adds what to do. `as_flags=False` keeps the
    gateway's field names and the status code first (`NOT_FOUND: ...`: for a
    client that is not this command line, the web console). `service` names what
    `target` is when it is not the gateway (`the tree service`). A deadline that passed
    in gRPC's words names --timeout and its value when it was the command's own: the
    SDK's error says so (`DeadlineExceeded.timeout_s`), or `timeout_s` for a call the
    caller made itself and saw its deadline pass (`stello_client.calls.Deadline`).
    """
    import grpc

    from stello_client.exceptions.base import RpcError
    from stello_client.exceptions.translate import from_rpc_error

    failed = error if isinstance(error, RpcError) else from_rpc_error(error)
    names = {**FLAGS, **(flags or {})} if as_flags else {}
    code = failed.code
    violations = failed.violations if code == grpc.StatusCode.INVALID_ARGUMENT else ()
    if violations:
        details = "; ".join(
            f"{field_flag(v.field, names)}: {flag_names(v.description, names)}" for v in violations
        )
    elif _grpc_deadline(failed):
        # The SDK's sentence about it names its own keywords (timeout=, request_id).
        own = getattr(failed, "timeout_s", None) or timeout_s
        details = _deadline_sentence(service, own) if as_flags else "the call's deadline passed"
    else:
        details = flag_names(_flat(_grpc_words(failed)), names)
    details = _flat(details)
    if code == grpc.StatusCode.UNAVAILABLE and failed.reason is None and details == SHUT_DOWN:
        details = _shut_down(service, target)  # not grpc core's words
    unreachable = code == grpc.StatusCode.UNAVAILABLE and _transport_failure(failed.reason, details)
    if unreachable and target and RESOLVER_WORDS.search(details):
        details = _unresolved(target, service)  # not the resolver's internals
        return f"{code.name}: {details}" if not as_flags else f"{details}: check the name"
    if not as_flags:
        line = f"{code.name}: {details}" if details else code.name
        if unreachable and target:
            hint = _unreachable_hint(details, target)
            line += f" ({hint or f'is a gateway listening at {target}? start it: `stello up`'})"
        return line
    if unreachable and target:
        hint = _unreachable_hint(details, target) or "is `stello up` running?"
        return f"cannot reach {service} at {target}: {hint}"
    if failed.reason == "SESSION_ARCHIVED":
        return _archived(details)
    line = details or CODE_SENTENCES.get(code.name, code.name.lower().replace("_", " "))
    hint = REASON_HINTS.get(failed.reason or "")
    # The server's sentence may already say it (the tree's "narrow it with root_id ...").
    if not hint or hint in line:
        return line
    # One parenthesis: "(known: a, b; `stello profiles` lists them)", not two in a row.
    return f"{line[:-1]}; {hint})" if line.endswith(")") else f"{line} ({hint})"


SETTING_FLAGS = {
    "gateway=": "--gateway",
    "key=": "--key",
    "space=NAME": "--space NAME",
    "space=ID": "--space ID",
    "space=": "--space",
}


def configuration_line(error: ConfigurationError) -> str:
    """A client that could not be set up, in the command line's words (`--space`, ...)."""
    text = error.message
    for setting, flag in SETTING_FLAGS.items():
        text = text.replace(setting, flag)
    if error.setting == "space" and "no space named" in text:
        text = f"--space: {text}"
    return _flat(text)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _archived(details: str) -> str:
    """An archived session, and the command that makes it active again."""
    found = _UUID.search(details)
    if found is None:
        return "the session is archived: `stello unarchive SESSION` makes it active again"
    session = found.group(0)
    return f"session {session} is archived: `stello unarchive {session[:8]}` makes it active again"


SHUT_DOWN = "Cancelling all calls"
"""What grpc core answers the calls a server still runs when its shutdown grace ends."""


def _shut_down(service: str, target: str) -> str:
    """A call cut by its server's shutdown, in words."""
    where = f"{service} at {target}" if target else service
    return (
        f"{where} shut down before the call ended (its shutdown grace ran out): what the call "
        "was doing may not have been stored; retry once it is back"
    )


def own_deadline_line(unfinished: str, timeout_s: float, flag: str = "--timeout") -> str:
    """A call that ran out of the command's own time (`unfinished`: what did not happen,
    "the gateway did not answer"): say so, and how to give it more."""
    return (
        f"{unfinished} within {flag} {timeout_s:g} s, this command's own deadline: "
        f"give it more time with a larger {flag}"
    )


def _deadline_sentence(service: str, timeout_s: float | None) -> str:
    """A deadline that passed in gRPC's words: the command's own (`timeout_s`), or one on
    the way (not --timeout's: a larger one would not help)."""
    if timeout_s is not None:
        return own_deadline_line(f"{service} did not answer", timeout_s)
    return f"{service} did not answer in time (a deadline on the way passed, not --timeout's)"


def _grpc_deadline(error: RpcError) -> bool:
    """True when a call ended DEADLINE_EXCEEDED in gRPC's words (its deadline passed on
    either side), not in the gateway's."""
    import grpc

    from stello_client.exceptions.translate import GRPC_DEADLINES

    said = error.cause.details() if error.cause is not None else error.details
    return error.code == grpc.StatusCode.DEADLINE_EXCEEDED and said in GRPC_DEADLINES


def _grpc_words(error: RpcError) -> str:
    """The error's details; gRPC's own for an UNAVAILABLE naming no reason and for an
    UNAUTHENTICATED, which this line's caller says what to check about itself (not twice:
    the SDK's message says it too, naming its own arguments)."""
    import grpc

    unanswered = error.code == grpc.StatusCode.UNAVAILABLE and error.reason is None
    if (unanswered or error.code == grpc.StatusCode.UNAUTHENTICATED) and error.cause:
        return error.cause.details() or ""
    return error.details


def _transport_failure(reason: str | None, details: str) -> bool:
    """True when an UNAVAILABLE came from the connection, not from a gateway that answered."""
    return reason is None and (not details or bool(_TRANSPORT_WORDS.search(details)))


def unanswered(error: RpcError) -> bool:
    """True when the call failed because nothing answered it (no server at the address, a
    broken connection, a server shutting down), not because a server refused it."""
    import grpc

    if error.code != grpc.StatusCode.UNAVAILABLE:
        return False
    details = _flat(error.details)
    return (error.reason is None and details == SHUT_DOWN) or _transport_failure(
        error.reason, details
    )


def _unresolved(target: str, service: str) -> str:
    """A host name that did not resolve, in one sentence (gRPC's says c-ares' words)."""
    host = target.rpartition(":")[0].strip("[]") or target
    return f"cannot resolve host {host!r} (in {service}'s address {target})"


def connection_hint(error: grpc.aio.AioRpcError, target: str) -> str | None:
    """What to check when a call to `target` failed in its connection the way TLS fails
    (a plaintext call to a TLS server, a certificate that does not name the address); None
    otherwise. For a caller that renders the call itself (`stello health`)."""
    import grpc

    if error.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    return _unreachable_hint(_flat(error.details() or ""), target)


def _unreachable_hint(details: str, target: str) -> str | None:
    """What to check when `target` did not answer, from how the connection failed (None:
    nothing answered at all)."""
    lowered = details.lower()
    if "hostname verification" in lowered:
        return (
            f"the certificate of {target} does not name that address (nor --server-name, "
            "if given): pass a name it holds with --server-name (STELLO_SERVER_NAME)"
        )
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
    return None


def _flat(text: str) -> str:
    """`text` on one line: its whitespace runs collapsed."""
    return " ".join(text.split())
