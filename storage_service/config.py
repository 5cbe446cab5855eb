"""Settings of the storage service alone (``STELLO_STORAGE_*``); shared ones are in the kernel."""

from __future__ import annotations

import os

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from stello.settings import MAX_STATEMENT_TIMEOUT_S, MIB

RENAMED = {
    "STELLO_STORAGE_MAX_RECORD_BYTES": "STELLO_MAX_RECORD_BYTES",
    "STELLO_STORAGE_MAX_SLOT_BYTES": "STELLO_MAX_SLOT_BYTES",
}
"""Variables that moved to the shared settings (the gateway checks the same limits)."""


class StorageSettings(BaseSettings):
    """Where the storage service listens and how long a turn lease may be (DESIGN §1, §7).

    The record and slot size limits are shared (`StelloSettings`): the gateway checks
    them on the client's own fields before it writes anything or calls a model.
    """

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_STORAGE_",
        env_ignore_empty=True,
        extra="ignore",
    )

    host: str = Field(default="127.0.0.1", description="Interface to listen on.")
    port: int = Field(default=50061, ge=0, le=65535, description="TCP port; 0 = any free one.")
    workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Worker processes serving the port (SO_REUSEPORT), each with its own event "
        "loop and STELLO_DB_POOL_MAX_SIZE / N connections; 1 = this process serves.",
    )
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535, description="Serve Prometheus /metrics here; unset = off."
    )
    max_page_bytes: int = Field(
        default=4 * MIB,
        ge=1024,
        description="Most bytes of records one ListRecords page carries (at least one record; "
        "at least 1024, at most half of STELLO_MAX_MESSAGE_BYTES).",
    )
    max_turn_ttl_s: int = Field(
        default=86_400,
        ge=1,
        description="Longest turn lease BeginTurn grants (and RenewTurn extends to), in seconds.",
    )
    event_retention_s: float = Field(
        default=86_400,
        gt=0,
        description="Seconds a space's events stay readable by WatchSpace; older cursors "
        "are CURSOR_EXPIRED.",
    )
    event_purge_interval_s: float = Field(
        default=60.0,
        ge=0.1,
        description="Seconds between purges of events past their retention; at least 0.1 (each "
        "round is a DELETE across spaces).",
    )
    search_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=MAX_STATEMENT_TIMEOUT_S,
        description="Longest SearchRecords or SearchSessions read (a statement timeout); past "
        "it FAILED_PRECONDITION SEARCH_TOO_BROAD. At most 2147483 (PostgreSQL's longest "
        "statement timeout, about 24.8 days).",
    )
    search_backfill_interval_s: float = Field(
        default=60.0,
        ge=1.0,
        description="Seconds between rounds of the search backfill, which recomputes the "
        "search vectors of records written before migrations 0035, 0038, 0041, 0042, 0043, "
        "0045, 0048 and 0049 (until then a search finds none of their words inside <...>, "
        "joined to zero-width marks, joined by punctuation, as in JIRA-4411, in full-width "
        "letters, with accents by their plain letters, in another case, with ё by е, with "
        "Hebrew or Arabic vowel marks, the Arabic tatweel or Quranic marks by their plain "
        "spelling, nor their emoji and symbols); once finished, a round is one index probe. "
        "At least 1: a round rewrites a batch.",
    )
    search_backfill_batch: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most records the search backfill reads (and rewrites) in one transaction.",
    )
    max_shared_memory_entries: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Most shared memory entries one space may hold; a new slug past it is "
        "RESOURCE_EXHAUSTED (replacing an existing one is allowed).",
    )

    @model_validator(mode="after")
    def _no_renamed_variables(self) -> StorageSettings:
        # Ignored silently, an old name would leave the limit at its default.
        for old, new in RENAMED.items():
            if os.environ.get(old):
                raise ValueError(f"{old} is now {new} (shared by storage and the gateway)")
        return self

    @property
    def address(self) -> str:
        """host:port to bind."""
        return f"{self.host}:{self.port}"
