"""The body of a provider's error answer, read up to a bound.

Both SDKs read the body of an HTTP error answer (4xx/5xx) whole before they raise
(``aread`` in their retry loop): a huge body would be held in memory, and one that never
ends would hold the call until the provider's timeout. Their HTTP client gets
`bound_error_body` as a response hook (`http_hooks`): it reads such a body itself,
decoded, up to `ERROR_BODY_LIMIT` bytes, closes the connection past it and leaves the
SDK the bytes read. The call then fails as the answer's status says (`remote`), the log
line's detail starting `CUT_NOTE` (`cut_detail`).

A body that breaks off once the status came (no more of it within the provider's timeout,
a connection reset) is likewise left as the bytes read, noted in the log (`broken_note`):
the status decides whether the call is retried, as for a whole body. Raised from the hook, the
read's error was taken by the SDKs for a request that got no answer: they retried any
status (a 401 as a 503, ignoring its Retry-After and the caller's deadline), each attempt
waiting the timeout again, and the call failed as a timeout or an unreachable server.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import httpx2

logger = logging.getLogger(__name__)

ERROR_BODY_LIMIT = 256 * 1024
"""The most bytes of an error answer's body read (decoded); the rest is not read."""
CUT_MARK = "stello_error_body_cut"
"""The response extension that says its body was cut at `ERROR_BODY_LIMIT`."""
CUT_NOTE = f"[the body was cut at {ERROR_BODY_LIMIT // 1024} KiB]"
"""What starts the logged detail of an error whose body was cut."""
BROKEN_MARK = "stello_error_body_broken"
"""The response extension that says its body broke off (`broken_note`)."""


async def bound_error_body(response: httpx2.Response) -> None:
    """Read the body of an error answer (status 400 or more) up to `ERROR_BODY_LIMIT`,
    marking the response `CUT_MARK` when it went on past that; other answers untouched."""
    if response.status_code < 400:
        return
    head = bytearray()
    try:
        async with contextlib.aclosing(response.aiter_bytes()) as parts:
            async for part in parts:
                head += part
                if len(head) > ERROR_BODY_LIMIT:
                    break  # closing `parts` closes the response and its connection
    except httpx2.TransportError as exc:  # a timeout, a reset: the status came, it decides
        await response.aclose()
        response.extensions[BROKEN_MARK] = broken_note(len(head), exc)
    if len(head) > ERROR_BODY_LIMIT:
        del head[ERROR_BODY_LIMIT:]
        response.extensions[CUT_MARK] = True
    # What `Response.aread` returns once the body was read: the SDK reads this, no more.
    response._content = bytes(head)


def broken_note(received: int, exc: httpx2.TransportError) -> str:
    """What starts the logged detail of an error whose body broke off after `received`
    bytes, with `exc`."""
    return f"[the body broke off after {received} bytes: {type(exc).__name__}]"


def http_hooks() -> dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]]:
    """The event hooks of the SDKs' HTTP clients (``event_hooks=``)."""
    return {"response": [bound_error_body]}


def cut_detail(response: httpx2.Response, detail: str | None) -> str | None:
    """`detail` (the provider's message) for the log: preceded by `CUT_NOTE` when the
    error answer's body was cut, by its `broken_note` when it broke off."""
    broken = response.extensions.get(BROKEN_MARK)
    note = CUT_NOTE if response.extensions.get(CUT_MARK) else broken
    if not isinstance(note, str):
        return detail
    return f"{note} {detail or ''}".rstrip()
