"""The core of `AsyncClient`: one channel, the caller (key and space), deadlines and retries.

The method groups (`sessions`, `turns`, `reads`, `shared_memory`, `watching`)
build on `ClientBase`: each method builds its request and makes one call
through `_unary` (or a stream), which adds the key, the request id, the
deadline and the retries of `stello_client.calls`. A space given by name, or
not at all, is found by WhoAmI at the first call that needs it, once.

The channel is `stello_client.connection.channel`'s, and the requests' building is
`stello_client.requests`' (both re-exported here).
"""

from __future__ import annotations

import enum
import math
import uuid
from types import TracebackType
from typing import Any, NoReturn, Self, TypeAlias, TypeVar

from stello.agent.v1 import agent_pb2
from stello.channels import ClientTls
from stello_client.calls import CallOptions, Retry, call_options, is_number, retry_of, unary
from stello_client.connection.channel import CHANNEL_OPTIONS as CHANNEL_OPTIONS
from stello_client.connection.channel import CLOSED as CLOSED
from stello_client.connection.channel import Channel as Channel
from stello_client.connection.flags import MAX_DEADLINE_S
from stello_client.connection.target import (
    Target,
    TlsFiles,
    check_gateway,
    message_limit,
    refuse_empty,
    resolve_target,
)
from stello_client.errors import RESOLVER_WORDS
from stello_client.exceptions.access import Unauthenticated
from stello_client.exceptions.base import ConfigurationError, RpcError
from stello_client.exceptions.transport import Unavailable
from stello_client.requests import request_id_or_new as request_id_or_new
from stello_client.requests import request_of as request_of
from stello_client.requests import set_optional as set_optional

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_TURN_TIMEOUT_S = 660.0  # the gateway's STELLO_GATEWAY_TURN_MAX_S default, and a minute
# stello.auth.new_secret: "stello_", 12 hex digits of the key id, "_", 43 of token_urlsafe(32).
KEY_CHARS = 63
# Room for a longer key of a later version, far below gRPC's metadata limit (8 KB soft).
MAX_KEY_CHARS = 4 * KEY_CHARS


class Default(enum.Enum):
    """The type of `DEFAULT`."""

    DEFAULT = "default"


DEFAULT = Default.DEFAULT
"""A `timeout` argument left out: the client's default for that kind of call."""
Timeout: TypeAlias = float | Default | None
"""Seconds a call may take, its retries included; None = no deadline; DEFAULT = the client's."""


NOT_PICKLED = (
    "cannot pickle a stello_client {name}: it holds a channel to the gateway and its API key, "
    "which belong to the process that made it; make the client in each process instead (from "
    "the same arguments, or STELLO_GATEWAY, STELLO_KEY and STELLO_SPACE_ID there)"
)
"""What pickling a client (multiprocessing's arguments, a task queue's) raises, by its class."""


class ClientBase:
    """The connection and the caller every method group uses."""

    def __getstate__(self) -> NoReturn:
        raise TypeError(NOT_PICKLED.format(name=type(self).__name__))

    def __init__(
        self,
        gateway: str | None = None,
        key: str | None = None,
        space: str | None = None,
        *,
        tls: ClientTls | TlsFiles | None = None,
        plaintext: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        turn_timeout: float | None = DEFAULT_TURN_TIMEOUT_S,
        retry: Retry | None = None,
        _shared: tuple[Channel, str] | None = None,
        _owner: bool = False,
        _key_source: str = "",
    ) -> None:
        """Connect to a gateway (the channel opens lazily: nothing is called yet).

        Args:
            gateway: host:port; default STELLO_GATEWAY, else what `stello up` saved.
            key: the API key; default STELLO_KEY, else the saved one.
            space: the space's id or name; default STELLO_SPACE_ID, else the saved
                one, else the one space the key reaches (asked once, by WhoAmI).
            tls: TLS material, or files (each file defaults to its STELLO_*_FILE
                variable; STELLO_CA_FILE set means TLS). Default: plaintext unless
                STELLO_CA_FILE is set.
            plaintext: ignore every TLS variable.
            timeout: the default deadline of a call, its retries included (None: none).
            turn_timeout: the default deadline of a call that runs the model (send,
                stream, submit_tool_results, submit_tool_results_stream, consolidate).
            retry: how safe calls are retried (default `Retry()`; `Retry(attempts=1)`: never).

        Raises:
            ConfigurationError: no gateway or key anywhere, a gateway that is not
                HOST:PORT (a URL, a missing port), or unusable TLS settings.
            TypeError: `timeout` or `turn_timeout` not a number nor None, naming it.
            ValueError: `timeout` or `turn_timeout` a number no call could meet (0,
                negative, inf, nan, over a year), naming it.
        """
        if _shared is None:
            target = resolve_target(gateway, key, space, tls=tls, plaintext=plaintext)
            self._channel = Channel(target)
            self._owner = True
            key, space = target.key, target.space
            _key_source = target.key_source
        else:
            self._channel, key = _shared
            self._owner = _owner
        assert key is not None
        _check_key(key)
        self._key = key
        self._key_source = _key_source
        """Where the key came from, which a refusal of it names ("" unknown)."""
        self._space = space or ""
        self._space_id: str | None = _uuid(self._space)
        self._timeout = _seconds("timeout", timeout)
        self._turn_timeout = _seconds("turn_timeout", turn_timeout)
        self._retry = retry_of(retry)

    @classmethod
    def keyless(
        cls,
        gateway: str,
        *,
        tls: ClientTls | TlsFiles | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        turn_timeout: float | None = DEFAULT_TURN_TIMEOUT_S,
        retry: Retry | None = None,
    ) -> Self:
        """A client with a channel and no caller of its own, for a program that calls as
        many users (a web console): each user's calls go through `using(key=..., space=...)`.
        Only the gateway and TLS come from the arguments (`tls` None: plaintext; files
        as given, no STELLO_*_FILE variable); of the environment only
        STELLO_MAX_MESSAGE_BYTES is read, nothing of the saved credentials.
        Every gateway call needs a key, so a call on this client itself raises
        ConfigurationError (setting "key") before anything connects.

        Raises:
            ConfigurationError: a gateway that is not HOST:PORT, or TLS files that cannot
                be used (setting "tls").
        """
        check_gateway(gateway)
        material = tls.load() if isinstance(tls, TlsFiles) else tls
        target = Target(gateway, "", "", material, message_limit(), "the gateway= argument")
        return cls(
            timeout=timeout,
            turn_timeout=turn_timeout,
            retry=retry,
            _shared=(Channel(target), ""),
            _owner=True,
        )

    @property
    def gateway(self) -> str:
        """The gateway's address (host:port)."""
        return self._channel.address

    def using(
        self, *, key: str | None = None, space: str | None = None, retry: Retry | None = None
    ) -> Self:
        """This client's channel, calling as another key and/or space (a console serving
        many users keeps one channel), or retrying otherwise (`retry`; default this
        client's); closing the new client leaves the channel open.
        `space` left out: this client's space when the key is this client's, else the one
        space the other key reaches (asked once, by WhoAmI), as a new client's would be.

        Raises:
            ConfigurationError: `key` or `space` given empty (an empty key called as this
                client's own key), or a key no header can carry.
        """
        refuse_empty(left_out=USING_LEFT_OUT, key=key, space=space)
        same_caller = key in (None, self._key)
        if space is None and same_caller:
            space = self._space  # another key's space is its own: left out, its only one
        clone = type(self).__new__(type(self))
        ClientBase.__init__(
            clone,
            space=space,
            timeout=self._timeout,
            turn_timeout=self._turn_timeout,
            retry=retry or self._retry,
            _shared=(self._channel, key or self._key),
            _key_source=self._key_source if same_caller else "the key= argument of using()",
        )
        if space == self._space and same_caller:
            clone._space_id = self._space_id  # the same caller: its space is settled already
        return clone

    async def close(self) -> None:
        """Close the channel (not one this client shares with the client it was made from)."""
        if self._owner:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def space_id(self) -> str:
        """The id of the space the calls act in (asking WhoAmI once when given a name or none).

        Raises:
            ConfigurationError: the key reaches no space of that name, or several
                spaces and none was named.
        """
        if self._space_id is None:
            self._space_id = await self._find_space()
        return self._space_id

    async def _find_space(self) -> str:
        reply: agent_pb2.WhoAmIResponse = await self._unary(
            "WhoAmI", agent_pb2.WhoAmIRequest(), safe=True
        )
        spaces = list(reply.spaces)
        listed = ", ".join(f"{s.name} ({s.id})" for s in spaces) or "none"
        if self._space:
            for space in spaces:
                if space.name == self._space:
                    return str(space.id)
            if reply.scope == agent_pb2.KEY_SCOPE_ADMIN:
                raise ConfigurationError(
                    f"no space named {self._space!r} among this admin key's own spaces "
                    f"({listed}): an admin key reaches another space by its id, space=ID",
                    setting="space",
                )
            raise ConfigurationError(
                f"this key reaches no space named {self._space!r} (its spaces: {listed})",
                setting="space",
            )
        if len(spaces) == 1:
            return str(spaces[0].id)
        raise ConfigurationError(
            f"this key reaches {len(spaces)} spaces ({listed}): choose one with space=NAME "
            "or set STELLO_SPACE_ID",
            setting="space",
        )

    def _options(
        self,
        method: str,
        timeout: Timeout,
        *,
        safe: bool,
        request_id: str = "",
        turn: bool = False,
    ) -> CallOptions:
        if not self._key:
            raise ConfigurationError(
                "no API key: this client was made by keyless(), which has no caller (and "
                "reads no STELLO_KEY); call through client.using(key=..., space=...)",
                setting="key",
            )
        if timeout is DEFAULT:
            seconds = self._turn_timeout if turn else self._timeout
        else:
            seconds = _seconds("timeout", timeout)
        assert not isinstance(seconds, Default)
        return call_options(
            self._key, method, timeout=seconds, retry=self._retry, safe=safe, request_id=request_id
        )

    async def _unary(
        self,
        method: str,
        request: Any,
        *,
        safe: bool,
        timeout: Timeout = DEFAULT,
        request_id: str = "",
        turn: bool = False,
    ) -> Any:
        """One unary call of `method` (the RPC's name) with the caller's key and deadline."""
        opts = self._options(method, timeout, safe=safe, request_id=request_id, turn=turn)
        channel, closes = self._channel, self._channel.closes

        async def attempt(request: Any, **options: Any) -> Any:
            # The stub is looked up at each attempt: the channel may have reopened since.
            with channel.ended_by_close(closes, method, opts.request_id):
                return await getattr(channel.stub, method)(request, **options)

        try:
            return await unary(attempt, request, opts)
        except (Unavailable, Unauthenticated) as error:
            self._said(error)
            raise

    def _said(self, error: RpcError) -> RpcError:
        """`error`, saying what to check when nothing answered at the gateway's address, or
        where the key came from when the gateway refused it."""
        if isinstance(error, Unavailable):
            channel = self._channel
            _nothing_answered(error, channel.address, channel.source, secure=channel.secure)
        elif isinstance(error, Unauthenticated):
            _key_refused(error, self._key_source)
        return error

    def _stream_call(self, method: str, request: Any, opts: CallOptions) -> Any:
        """Start a server-streaming call of `method` (the caller reads and cancels it)."""
        return getattr(self._channel.stub, method)(
            request, timeout=opts.deadline.left(), metadata=opts.metadata
        )


USING_LEFT_OUT = {
    "key": "call with this client's key",
    "space": "call in this client's space (another key's: the one space it reaches)",
}
"""What `using()` does with each argument left out, which its refusal of an empty one says."""


def _uuid(text: str) -> str | None:
    """`text` as a canonical UUID, or None when it is not one."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def _check_key(key: str) -> None:
    """A key is printable ASCII without spaces, and short (as every key Stello makes), which
    is also all gRPC lets a header carry.

    Raises:
        ConfigurationError: it holds another character (a pasted line break, say), or is
            longer than any key (gRPC's metadata limit would refuse it with a text that
            blames the size of a message).
    """
    if key and not all("!" <= char <= "~" for char in key):
        raise ConfigurationError(
            "the API key (key= or STELLO_KEY) holds a character no key has (a space, a line "
            "break or a non-ASCII character): copy it again",
            setting="key",
        )
    if len(key) > MAX_KEY_CHARS:
        raise ConfigurationError(
            f"the API key (key= or STELLO_KEY) is {len(key)} characters, longer than any key "
            f"(Stello's keys are {KEY_CHARS}): copy it again",
            setting="key",
        )


def _seconds(name: str, value: float | None) -> float | None:
    """A deadline in seconds: None (none) or a finite number above 0, at most a year.

    Raises:
        TypeError: not a number (text, bytes, a bool), naming the argument.
        ValueError: a number outside that range (0, negative, inf and nan would each end
            every call in a deadline passed before it began, and so would a number past
            gRPC's range, about 9.2e9 s), naming the argument.
    """
    if value is None:
        return None
    if not is_number(value):
        raise TypeError(f"{name}: expected a number of seconds or None, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a number of seconds above 0 or None, got {value!r}")
    if value > MAX_DEADLINE_S:
        raise ValueError(
            f"{name}: expected at most {MAX_DEADLINE_S:,} seconds (a year), or None for no "
            f"deadline, got {value!r}"
        )
    return float(value)


def _nothing_answered(
    error: Unavailable, address: str, source: str, *, secure: bool = False
) -> Unavailable:
    """`error` saying what to check when the connection to the gateway's `address` (from
    `source`, "" unknown; over TLS when `secure`) failed, gRPC's words last; as it is for
    any other failure."""
    if error.reason is not None:
        return error
    hint = _connection_hint(error.details.lower(), address, source, secure=secure)
    if hint is not None:
        error._retell(f"{hint}; gRPC: {error.details}")
    return error


def _connection_hint(lowered: str, address: str, source: str, *, secure: bool) -> str | None:
    """What to check, from gRPC's words (`lowered`) of how the connection failed: the name
    did not resolve, TLS failed, or nothing answered (None: something else)."""
    given = f" (from {source})" if source else ""
    if RESOLVER_WORDS.search(lowered):
        return (
            f"the gateway address {address}{given} does not resolve: check the host name, or "
            "pass the right address (gateway= or STELLO_GATEWAY)"
        )
    if "failed to connect" not in lowered and "backends failing" not in lowered:
        return None
    if "hostname verification" in lowered:
        return (
            f"the certificate of {address} does not name that address (nor "
            "TlsFiles.server_name, if given): pass a name it holds as TlsFiles.server_name "
            "(STELLO_SERVER_NAME)"
        )
    if any(word in lowered for word in ("handshake", "ssl", "certificate")):
        return (
            f"the TLS handshake with {address} failed: check the CA file (TlsFiles.ca_file "
            "or STELLO_CA_FILE), the server name, and the client certificate and key if the "
            "gateway wants one"
        )
    if "socket closed" in lowered:
        return (
            None
            if secure
            else (
                f"{address} closed the connection: if it serves TLS, pass "
                "tls=TlsFiles(ca_file=...) or set STELLO_CA_FILE (this client is plaintext)"
            )
        )
    if "failed to connect" not in lowered:
        return None
    return (
        f"nothing answered at the gateway address {address}{given}: start the gateway "
        "(`stello up`), or pass the right address (gateway= or STELLO_GATEWAY)"
    )


def _key_refused(error: Unauthenticated, source: str) -> Unauthenticated:
    """`error` saying where the refused key came from (`source`, "" unknown) and what to do."""
    if not source:
        return error
    if source.startswith("the key `stello up` saved"):
        advice = (
            "run `stello up` again, which saves a key its gateway takes, or pass another "
            "(key= or STELLO_KEY)"
        )
    else:
        advice = (
            "pass a key this gateway knows and has not revoked (key= or STELLO_KEY; "
            "`stello up` saves one of its own gateway)"
        )
    error._retell(f"{error.details} ({source}): {advice}")
    return error
