"""Settings of the tree service alone (``STELLO_TREE_*``); shared ones are in the kernel."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stello.settings import MAX_STATEMENT_TIMEOUT_S


class TreeSettings(BaseSettings):
    """Where the tree service listens, its GetTree cap and its provisioning clock."""

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_TREE_",
        env_ignore_empty=True,
        extra="ignore",
    )

    host: str = Field(default="127.0.0.1", description="Interface to listen on.")
    port: int = Field(default=50062, ge=0, le=65535, description="TCP port; 0 = any free one.")
    workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Worker processes serving the port (SO_REUSEPORT), each with its own event "
        "loop and STELLO_DB_POOL_MAX_SIZE / N connections; 1 = this process serves.",
    )
    max_tree_nodes: int = Field(
        default=200_000,
        ge=1,
        description="Most nodes GetTree answers; above it FAILED_PRECONDITION TREE_TOO_LARGE.",
    )
    get_tree_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=MAX_STATEMENT_TIMEOUT_S,
        description="Longest GetTree read (a statement timeout); past it TREE_TOO_LARGE. At "
        "most 2147483 (PostgreSQL's longest statement timeout, about 24.8 days).",
    )
    sweep_interval_s: float = Field(
        default=10.0,
        ge=0.1,
        description="Seconds between sweeps of expired provisional sessions; at least 0.1 "
        "(each sweep is a transaction: less would be a busy loop).",
    )
    provisioning_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a provisional session may wait for CommitSession before it is swept.",
    )

    erase_interval_s: float = Field(
        default=10.0,
        ge=0.1,
        description="Seconds between rounds of the erasure job (it also runs after each "
        "DeleteSubtree): how soon a delete left by a stopped replica is finished; at least "
        "0.1 (each round is a transaction).",
    )
    erase_batch: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Most deleted sessions the erasure job erases in one transaction.",
    )
    retention_interval_s: float = Field(
        default=3600.0,
        ge=1.0,
        description="Seconds between rounds of the retention sweep over every space with a "
        "policy (each space swept by one replica at a time); at least 1: a round reads "
        "every space.",
    )
    retention_batch: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Most roots the retention sweep judges in one transaction.",
    )
    retention_batch_sessions: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most sessions the retention sweep archives in one transaction.",
    )
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="Serve Prometheus /metrics on this port."
    )

    @property
    def address(self) -> str:
        """host:port to bind."""
        return f"{self.host}:{self.port}"
