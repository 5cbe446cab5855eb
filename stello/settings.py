"""Settings shared by every Stello process (pydantic-settings, STELLO_ prefix).

Each service subclasses `StelloSettings` with its own prefix for its own
fields. Settings are built once in ``main()`` and passed down; never at import.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMProvider = Literal["echo", "openai", "anthropic"]

MIB = 1024 * 1024
MAX_MESSAGE_BYTES = 64 * MIB
"""STELLO_MAX_MESSAGE_BYTES' default."""
MAX_STATEMENT_TIMEOUT_MS = 2_147_483_647
"""The longest statement timeout PostgreSQL takes (an int of milliseconds: about 24.8 days)."""
MAX_STATEMENT_TIMEOUT_S = MAX_STATEMENT_TIMEOUT_MS // 1000
"""The same in whole seconds: a setting that becomes a statement timeout is at most this."""


def check_database_url(value: str | None) -> str | None:
    """Validate a PostgreSQL URL the way asyncpg will read it (socket forms included)."""
    if value is None or value == "":
        return None
    from asyncpg.connect_utils import (  # type: ignore[attr-defined]
        _parse_connect_dsn_and_args,
    )

    if not value.startswith(("postgres://", "postgresql://")):
        raise ValueError(
            "database URL must start with postgresql:// "
            "(e.g. postgresql://user@localhost/db or postgresql://user@/db?host=/run/dir)"
        )
    try:
        _parse_connect_dsn_and_args(
            dsn=value,
            host=None,
            port=None,
            user=None,
            password=None,
            passfile=None,
            database=None,
            ssl=None,
            direct_tls=None,
            server_settings=None,
            target_session_attrs=None,
            krbsrvname=None,
            gsslib=None,
            service=None,
            servicefile=None,
        )
    except Exception as exc:  # asyncpg raises several types for a bad DSN
        raise ValueError(f"invalid database URL: {exc}") from exc
    return value


def check_pair(
    first: str, first_value: object, second: str, second_value: object, why: str
) -> None:
    """Raise ValueError naming the missing variable when only one of a pair is set."""
    if bool(first_value) == bool(second_value):
        return
    given, missing = (first, second) if first_value else (second, first)
    raise ValueError(f"{given} is set but {missing} is not: {why}; set both, or neither")


class StelloSettings(BaseSettings):
    """Variables every service reads (DESIGN §1)."""

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_",
        env_ignore_empty=True,
        extra="ignore",
    )

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL; unset = the embedded server (stello[local]).",
    )
    database_direct_url: str | None = Field(
        default=None,
        description="PostgreSQL URL that bypasses PgBouncer, for what needs a session "
        "(migrations); unset = STELLO_DATABASE_URL.",
    )
    data_dir: str | None = Field(
        default=None, description="Where the embedded PostgreSQL keeps its data."
    )
    llm_provider: LLMProvider = "echo"
    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    openai_model: str = "gpt-4o-mini"
    anthropic_base_url: str | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    openai_max_context_tokens: int = Field(
        default=128_000, ge=1, description="The openai model's context window, in tokens."
    )
    openai_max_tokens: int = Field(
        default=16_384,
        ge=1,
        description="Most tokens one openai answer may have: caps the quarter of the window an "
        "answer may take (16384 is gpt-4o-mini's and gpt-4o's output limit; a model's limit "
        "below the cap makes every turn fail, HTTP 400).",
    )
    openai_max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        default="max_tokens",
        description="The request parameter that carries that cap: max_tokens, or "
        "max_completion_tokens (OpenAI's o-series reasoning models refuse max_tokens).",
    )
    anthropic_max_context_tokens: int = Field(
        default=200_000, ge=1, description="The anthropic model's context window, in tokens."
    )
    anthropic_max_tokens: int = Field(
        default=8192, ge=1, description="Most tokens one anthropic answer may have (max_tokens)."
    )
    llm_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "Longest LLM wait for a connection or the next piece of an answer "
            "(at most what a client's deadline leaves when the request is sent)."
        ),
    )
    llm_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of an LLM call that failed with 5xx, 429, a timeout or no connection.",
    )
    max_message_bytes: int = Field(default=MAX_MESSAGE_BYTES, ge=1024, le=2**31 - 1)
    max_record_bytes: int = Field(
        default=MIB,
        ge=1,
        description=(
            "Largest encoded record storage accepts; the gateway refuses a Send or tool result "
            "that would exceed it before calling the model."
        ),
    )
    max_slot_bytes: int = Field(
        default=MIB,
        ge=1,
        description=(
            "Largest UTF-8 slot value (system prompt, insight, memory, cache summary); the "
            "gateway checks a CreateRoot/Fork system prompt against it before writing."
        ),
    )
    auth_cache_ttl_s: float = Field(default=5.0, ge=0)
    db_pool_min_size: int = Field(
        default=2,
        ge=0,
        description="Connections each process keeps open; at most STELLO_DB_POOL_MAX_SIZE.",
    )
    db_pool_max_size: int = Field(default=20, ge=1)
    db_statement_cache_size: int = Field(
        default=1024,
        ge=0,
        description="asyncpg's prepared statements per connection; 0 behind a PgBouncer "
        "older than 1.21 or without max_prepared_statements (a start behind such a pooler "
        "stops naming this setting; README: PgBouncer).",
    )
    health_interval_s: float = Field(
        default=2.0,
        ge=0.1,
        description="Seconds between the database probes behind grpc health (answers, takes "
        "writes, migrated); at least 0.1: each round is three statements on a connection.",
    )
    max_calls_per_space: int = Field(
        default=64,
        ge=0,
        description=(
            "Calls one space may have in progress on one server process (WatchSpace streams "
            "not counted, nor up to as many ENQUEUE turns while they wait in line); past it "
            "RESOURCE_EXHAUSTED SPACE_BUSY. 0 = no cap."
        ),
    )
    max_watches_per_space: int = Field(
        default=32,
        ge=0,
        description=(
            "WatchSpace streams one space may have open on one gateway process; past it "
            "RESOURCE_EXHAUSTED SPACE_BUSY. 0 = no cap."
        ),
    )
    access_log: bool = Field(
        default=False,
        description="1 = one INFO line per call (else DEBUG; failed and slow calls always INFO).",
    )
    slow_call_ms: float = Field(
        default=1000.0,
        ge=0,
        description="A call that takes longer is logged at INFO whatever STELLO_ACCESS_LOG says.",
    )
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    tls_cert_file: str | None = Field(default=None, description="PEM certificate: serve TLS.")
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = Field(
        default=None, description="PEM CA bundle: require client certificates (mutual TLS)."
    )

    @field_validator("database_url", "database_direct_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return check_database_url(value)

    def direct_dsn(self, pooled: str) -> str:
        """The DSN for session work (migrations): the direct URL, else the pooled `pooled`."""
        return self.database_direct_url or pooled

    @model_validator(mode="after")
    def _consistent(self) -> StelloSettings:
        if self.db_pool_min_size > self.db_pool_max_size:
            raise ValueError(
                f"STELLO_DB_POOL_MIN_SIZE={self.db_pool_min_size} is above "
                f"STELLO_DB_POOL_MAX_SIZE={self.db_pool_max_size}: a pool cannot keep more "
                "connections open than it may open; lower the first or raise the second"
            )
        if self.database_direct_url and not self.database_url:
            raise ValueError(
                "STELLO_DATABASE_DIRECT_URL is set but STELLO_DATABASE_URL is not: the direct "
                "URL bypasses the pooler of STELLO_DATABASE_URL; set both, or neither"
            )
        # Half a TLS configuration would serve plaintext, or fail obscurely at bind: refuse it.
        check_pair(
            "STELLO_TLS_CERT_FILE",
            self.tls_cert_file,
            "STELLO_TLS_KEY_FILE",
            self.tls_key_file,
            "the server's certificate needs its private key",
        )
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ValueError(
                "STELLO_TLS_CLIENT_CA_FILE (mutual TLS) needs TLS: set STELLO_TLS_CERT_FILE "
                "and STELLO_TLS_KEY_FILE too"
            )
        return self
