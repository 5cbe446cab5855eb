"""Where `stello up` keeps the local key and endpoints, and how the client commands read them.

One JSON file, ``credentials.json`` in ``STELLO_CONFIG_DIR`` (default: the user's
config dir), readable by its owner only::

    {"space_id": "...", "key": "stello_...", "gateway": "127.0.0.1:50063",
     "storage": "127.0.0.1:50061", "tree": "127.0.0.1:50062",
     "data_dir": "/home/me/.local/share/stello/pgdata", "database_url": "",
     "database_password": false}

The database `stello up` runs on is kept too, so the admin commands (`stello keys`,
`spaces`, `migrate`) given none use the same one: the embedded cluster's folder, or
the URL it was given less any password (`database_password` then says one was given,
and the admin commands ask for the URL again rather than guess).

Kept apart from `stello_cli.up.suite` so a client command loads no server code.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs


@dataclass(frozen=True, slots=True)
class Credentials:
    """The local space, its key and the endpoints, as saved for the CLI client commands."""

    space_id: str
    key: str
    gateway: str = ""
    storage: str = ""
    tree: str = ""
    data_dir: str = ""
    database_url: str = ""
    database_password: bool = False


def credentials_path() -> Path:
    """The file `stello up` writes and the client commands read."""
    override = os.environ.get("STELLO_CONFIG_DIR")
    folder = Path(override) if override else Path(platformdirs.user_config_dir("stello"))
    return folder / "credentials.json"


def load_credentials() -> Credentials | None:
    """The saved credentials, or None when there are none."""
    path = credentials_path()
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return Credentials(
            str(data["space_id"]),
            str(data["key"]),
            str(data.get("gateway", "")),
            str(data.get("storage", "")),
            str(data.get("tree", "")),
            str(data.get("data_dir", "")),
            str(data.get("database_url", "")),
            bool(data.get("database_password", False)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        from stello.errors import FailedPrecondition  # grpc loads only when a file is broken

        raise FailedPrecondition(
            f"{path} is not a credentials file written by `stello up` ({exc}); delete it"
        ) from None


def save_credentials(credentials: Credentials) -> Path:
    """Write the credentials readable by the owner only."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(dataclasses.asdict(credentials), handle, indent=2)
    os.chmod(path, 0o600)
    return path
