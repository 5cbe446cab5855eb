"""Which database an admin command (`stello keys`, `spaces`, `migrate`) works on.

`--database-url`, else ``STELLO_DATABASE_URL`` or ``STELLO_DATA_DIR``, else the one
`stello up` saved beside its key (`stello_client.connection.credentials`), else the embedded
cluster's default folder. Without the saved one, a shell lacking `stello up`'s
``STELLO_DATA_DIR`` made a key in a new, empty cluster that the running gateway never
saw. A URL is saved without its password: given one, `stello up` is asked for again.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from stello_client.connection.credentials import Credentials, load_credentials
from stello_client.errors import ClientError, UsageError

if TYPE_CHECKING:
    from stello.settings import StelloSettings


def without_password(url: str) -> tuple[str, bool]:
    """`url` less its password (in the user part or the query), and whether it had one."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in query if name != "password"]
    if parts.password is None and len(kept) == len(query):
        return url, False
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}@{host}" if user else host
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(kept))), True


def with_database(credentials: Credentials, settings: StelloSettings) -> Credentials:
    """`credentials` naming the database `stello up` runs on (`settings`'), password left out."""
    if settings.database_url:
        url, password = without_password(settings.database_url)
        return dataclasses.replace(credentials, database_url=url, database_password=password)
    from stello.db.embedded import default_data_dir

    folder = Path(settings.data_dir) if settings.data_dir else default_data_dir()
    return dataclasses.replace(credentials, data_dir=str(folder.expanduser().resolve()))


def admin_settings(settings: StelloSettings) -> StelloSettings:
    """`settings` (from --database-url and the environment), or when they name no database,
    `stello up`'s saved one.

    Raises:
        ClientError: `stello up` was given a URL with a password, which is not saved.
    """
    if settings.database_url or settings.data_dir:
        return settings
    saved = load_credentials()
    if saved is None:
        return settings
    if saved.database_password:
        raise ClientError(
            f"`stello up` runs on {saved.database_url}, whose password is not saved: pass "
            "--database-url (or set STELLO_DATABASE_URL) as for `stello up`"
        )
    if saved.database_url:
        return settings.model_copy(update={"database_url": saved.database_url})
    if saved.data_dir:
        return settings.model_copy(update={"data_dir": saved.data_dir})
    return settings


def settings_of(args: argparse.Namespace) -> StelloSettings:
    """The kernel settings, with --database-url over STELLO_DATABASE_URL and `stello up`'s
    --data-dir over STELLO_DATA_DIR; first a warning on stderr for each STELLO_ variable
    nothing reads (`stello.config.env_names`).

    Raises:
        ValueError: a refused value, naming its flag or variable.
        UsageError: a --data-dir that cannot be one (`usable_data_dir`), or one given with
            a database URL.
        ClientError: a STELLO_DATA_DIR that cannot be one, with no database URL.
    """
    from pydantic import ValidationError

    from stello.config.env_names import unknown_variables
    from stello.serving.entry import settings_problem
    from stello.settings import StelloSettings

    for line in unknown_variables():  # misspelt: the setting meant stays at its default
        sys.stderr.write(f"stello: warning: {line}\n")
    overrides: dict[str, Any] = {}
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    if getattr(args, "data_dir", None) is not None:
        overrides["data_dir"] = str(usable_data_dir(args.data_dir))
    try:
        settings = StelloSettings(**overrides)
    except ValidationError as exc:
        flags = {"database_url": "--database-url"} if "database_url" in overrides else {}
        raise ValueError(settings_problem(exc, flags)) from None
    if "data_dir" not in overrides and settings.data_dir and not settings.database_url:
        try:  # the variable's folder, checked as the flag's is (not a usage error: exit 1)
            usable_data_dir(settings.data_dir, "STELLO_DATA_DIR")
        except UsageError as exc:
            raise ClientError(str(exc)) from None
    if "data_dir" in overrides and settings.database_url:
        url = "--database-url" if "database_url" in overrides else "STELLO_DATABASE_URL"
        raise UsageError(
            f"--data-dir: not with {url}: the embedded PostgreSQL's folder, and with a "
            "database URL none runs"
        )
    return settings


def usable_data_dir(text: str, name: str = "--data-dir") -> Path:
    """The embedded PostgreSQL's folder as `name` gives it (`stello up --data-dir`, or
    STELLO_DATA_DIR), a relative one from the current directory: one there, or one this
    user can make.

    Raises:
        UsageError: it is empty, a file (or under one), or in a folder this user cannot
            write in (naming `name`), before anything starts.
    """
    if not text.strip():
        raise UsageError(f"{name}: empty: give a folder (a relative one is from here)")
    folder = Path(text).expanduser().resolve()
    try:
        there = next(place for place in (folder, *folder.parents) if place.exists())
    except OSError as exc:  # a folder on the way that this user may not look into
        raise UsageError(f"{name}: cannot use {folder}: {exc.strerror}") from None
    if not there.is_dir():
        raise UsageError(f"{name}: {there} is a file, not a folder")
    # PostgreSQL writes in the folder, `stello up` its lock beside it (`process.data_lock`).
    for place in (there, folder.parent) if there == folder else (there,):
        if not os.access(place, os.W_OK | os.X_OK):
            made = "use" if there == folder else "make"
            raise UsageError(
                f"{name}: cannot {made} {folder}: {place} is not writable by this user"
            )
    return folder


def data_dir_source(args: argparse.Namespace) -> str:
    """What chose `stello up`'s data dir, as its messages name it: "--data-dir",
    "STELLO_DATA_DIR", or "" (the default folder)."""
    if getattr(args, "data_dir", None) is not None:
        return "--data-dir"
    return "STELLO_DATA_DIR" if os.environ.get("STELLO_DATA_DIR") else ""
