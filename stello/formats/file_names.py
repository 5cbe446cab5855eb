"""A file's name as a message shows it (a kernel rule the services and the clients share)."""

from __future__ import annotations

import os


def shown_name(name: str | os.PathLike[str]) -> str:
    """`name` as a message prints it: bytes that are not UTF-8 (Linux names files by bytes,
    Python keeps them as lone surrogates) as `\\xff`."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
