"""Structured logs: every line carries the request id of the RPC it was written in.

`configure_logging(LogSettings())` installs one stderr handler on the root
logger. ``STELLO_LOG_FORMAT=text`` (the default) writes
``time level logger [request_id] message``; ``json`` writes one JSON object per
line (``time``, ``level``, ``logger``, ``message``, ``request_id``, and
``exception`` when there is one) for log collectors. The request id comes from
`stello.serving.interceptors.request_id_var`, set per call by the call chain
(``-`` outside an RPC).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stello.serving.interceptors import request_id_var

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"

# Attributes every LogRecord has; anything else was passed through `extra=`.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "request_id"}


class LogSettings(BaseSettings):
    """How the services log (``STELLO_LOG_*``)."""

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_LOG_",
        env_ignore_empty=True,
        extra="ignore",
    )

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO",
        description="Lowest level logged: DEBUG, INFO, WARNING or ERROR (upper case).",
    )
    format: Literal["text", "json"] = Field(
        default="text", description="`text` lines, or `json`: one object per line."
    )


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (the current RPC's, else ``-``) to every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


class PoolOutageFilter(logging.Filter):
    """Folds the traceback of asyncpg's pool, which cannot reconnect while the database is
    down ("Failed to restore the pool connection floor"), into its one line: an outage
    that passes (the services' own lines say it), not a fault to read a traceback of."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "asyncpg.pool" and record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            if isinstance(exc, OSError) or type(exc).__module__.startswith("asyncpg."):
                record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc})"
                record.args = None
                record.exc_info = None
                record.exc_text = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record; fields passed with ``extra=`` are kept."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", request_id_var.get()),
        }
        for name, value in record.__dict__.items():
            if name not in _STANDARD and not name.startswith("_"):
                payload[name] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)


def build_handler(settings: LogSettings, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (stderr by default) with the request-id filter and the chosen format."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.addFilter(PoolOutageFilter())
    handler.setFormatter(
        JsonFormatter() if settings.format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    return handler


def configure_logging(settings: LogSettings, stream: TextIO | None = None) -> logging.Handler:
    """Make the root logger write through one handler of `settings`; return that handler."""
    handler = build_handler(settings, stream)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.level)
    return handler
