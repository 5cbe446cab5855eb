"""Settings of the gateway alone (``STELLO_GATEWAY_*``); shared ones are in the kernel."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_gateway.config_checks import (
    MIN_TAKEOVER_INTERVAL_S,
    MIN_WATCH_MAX_AGE_S,
    check_addresses,
    plaintext_only,
    targets,
    zero_or_at_least,
)
from agent_gateway.forks.faults import parse_fault
from agent_gateway.llm.prompts.texts import PresetName
from stello.settings import MIB, check_pair


class GatewaySettings(BaseSettings):
    """Where the gateway listens, where storage and tree are, and its saga and retry bounds.

    `default_system_prompt` and `default_skills` are the lowest composition layer
    ("sessionDefaults", STELLO-SPEC §4.4.2); they apply to roots too (DESIGN §5.8).
    """

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_GATEWAY_",
        env_ignore_empty=True,
        extra="ignore",
    )

    host: str = Field(default="127.0.0.1", description="Interface to listen on.")
    port: int = Field(default=50063, ge=0, le=65535, description="TCP port; 0 = any free one.")
    workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Worker processes serving the port (SO_REUSEPORT), each with its own event "
        "loop and STELLO_DB_POOL_MAX_SIZE / N connections; 1 = this process serves.",
    )
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="Serve Prometheus /metrics on this port."
    )
    storage_address: str = Field(
        default="127.0.0.1:50061",
        description="host:port of the storage service; several comma-separated = round robin.",
    )
    tree_address: str = Field(
        default="127.0.0.1:50062",
        description="host:port of the tree service; several comma-separated = round robin.",
    )
    service_connections: int = Field(
        default=4,
        ge=1,
        le=64,
        description=(
            "Connections to each of storage and tree, taken in turn per call: a service run "
            "by several workers or replicas behind one address balances connections."
        ),
    )
    services_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle that verifies the storage and tree servers; set = TLS to both.",
    )
    services_cert_file: Path | None = Field(
        default=None,
        description="PEM certificate the gateway presents to storage and tree (mutual TLS).",
    )
    services_key_file: Path | None = Field(
        default=None, description="PEM private key of STELLO_GATEWAY_SERVICES_CERT_FILE."
    )
    services_server_name: str | None = Field(
        default=None,
        description=(
            "Name expected in the storage and tree certificates instead of the address's "
            "host; needed with several comma-separated addresses."
        ),
    )
    profiles_file: Path | None = Field(
        default=None, description="TOML file with the fork profiles; unset = no profiles."
    )
    prompts: PresetName = Field(
        default="en",
        description=(
            "Language preset of the built-in prompts: en, or zh (the reference's Chinese "
            'texts); README "Prompts".'
        ),
    )
    prompts_file: Path | None = Field(
        default=None,
        description=(
            'TOML file replacing built-in prompts by key (README "Prompts"); checked at start.'
        ),
    )
    default_system_prompt: str | None = Field(
        default=None, description="System prompt of the defaults layer (unset = none)."
    )
    default_skills: list[str] | None = Field(
        default=None,
        description='Skills of the defaults layer as JSON, e.g. ["a","b"]; unset = inherit.',
    )
    call_timeout_s: float = Field(
        default=10.0, gt=0, description="Longest single call to storage or tree, in seconds."
    )
    long_call_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description=(
            "Longest DeleteSubtree, GetTree, SearchRecords or SearchSessions call, or an "
            "import's fill, when the client set no deadline (with one, they get the client's "
            "deadline, whatever call_timeout_s says)."
        ),
    )
    max_retries: int = Field(
        default=3, ge=0, le=10, description="Retries of a call that answered UNAVAILABLE."
    )
    retry_backoff_s: float = Field(
        default=0.05, gt=0, description="First retry delay; doubles per retry (with jitter)."
    )
    provisioning_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="The tree's STELLO_TREE_PROVISIONING_TTL_S; a saga gets at most half of it.",
    )
    saga_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Time budget of a CreateRoot/Fork saga; unset = half the provisioning TTL.",
    )
    max_page_bytes: int = Field(
        default=4 * MIB,
        ge=1024,
        description=(
            "Most bytes of digests one ListSessionDigests or GetLineage page carries (at least "
            "one digest; at most half of STELLO_MAX_MESSAGE_BYTES): a page cut short says so "
            "with its next_page_token."
        ),
    )
    consolidate_every_n_turns: int = Field(
        default=0, ge=0, description="Consolidate memory every N committed turns; 0 = off."
    )
    consolidate_max_calls: int = Field(
        default=20,
        ge=1,
        description=(
            "Model calls one consolidation may make (each chunk of records is one, saved as "
            "it is made); past it the consolidation stops with status BUDGET_SPENT and the "
            "next one continues from there."
        ),
    )
    fold_max_calls: int = Field(
        default=16,
        ge=1,
        description=(
            "Model calls one run of the background fold (the backlog of a lossy summary) may "
            "make; the next turn that finds the summary lossy starts the next run."
        ),
    )
    background_max_jobs: int = Field(
        default=4,
        ge=1,
        description=(
            "Background jobs that call a model (consolidations, folds) running at once in "
            "this process; the others wait their turn."
        ),
    )
    job_claim_ttl_s: int = Field(
        default=30,
        ge=1,
        le=86_400,
        description=(
            "Lifetime of a background job's claim in seconds, renewed every third of it "
            "while the job runs: how long a job stays blocked after its gateway died."
        ),
    )
    jobs_key: SecretStr | None = Field(
        default=None,
        description=(
            "API key with which the background runner takes over jobs left without a "
            "gateway (one that died, or shut down mid-run), with no new trigger: a tenant "
            "key covers its space, an admin-scope key every space; unset = none are taken "
            "over until their session's next trigger (`stello up` uses its local space's key)."
        ),
    )
    job_takeover_interval_s: float = Field(
        default=30.0,
        ge=0,
        description=(
            "How often, with STELLO_GATEWAY_JOBS_KEY, the runner looks for jobs left without a "
            "gateway (also once at start); 0 = never, else at least 0.1 (each look is a call "
            "to storage). A dead gateway's job waits up to STELLO_GATEWAY_JOB_CLAIM_TTL_S plus "
            "this."
        ),
    )
    background_stop_grace_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "How long a shutdown lets background jobs finish before stopping them (their "
            "progress is saved and their claims given back)."
        ),
    )
    max_tool_rounds: int = Field(
        default=5, ge=1, description="Bound of the built-in tool loop of one turn."
    )
    turn_lease_ttl_s: int = Field(
        default=10,
        ge=1,
        le=86_400,
        description=(
            "Lifetime of a turn lease in seconds, renewed every third of it while the turn "
            "runs: how long a session stays locked after its gateway died mid-turn or lost "
            "storage (a failed turn's release is retried meanwhile)."
        ),
    )
    turn_max_s: float = Field(
        default=600,
        gt=0,
        description=(
            "Longest a turn may run (its LLM and tool calls), in seconds; past it the turn "
            "is ended (its model call cut short, DEADLINE_EXCEEDED, nothing stored) and "
            "its lease given back. Also the longest an ENQUEUE turn with no deadline of its "
            "own waits in its session's line."
        ),
    )
    turn_queue_max: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description=(
            "Most turns that may wait for one session with the ENQUEUE busy policy (across "
            "gateways); one more is refused RESOURCE_EXHAUSTED TURN_QUEUE_FULL."
        ),
    )
    builtin_tools: bool = Field(
        default=True, description="Offer the built-in tool stello_create_session to the model."
    )
    fork_min_turns: int = Field(
        default=0,
        ge=0,
        description=(
            "Committed turns a session needs before stello_create_session may fork it "
            "(spec §4.11's minTurns; the reference's guard uses 3); 0 = no minimum."
        ),
    )
    fork_cooldown_turns: int = Field(
        default=0,
        ge=0,
        description=(
            "Turns between two forks of one session by stello_create_session (spec §4.11's "
            "cooldownTurns; the reference's guard uses 5); 0 = none. Counted in the database."
        ),
    )
    memory_tools: bool = Field(
        default=False,
        description=(
            "Offer the shared memory tools (stello_memory_recall, _remember, _forget) in every "
            "turn; a request's memory_tools field decides for its own turn."
        ),
    )
    memory_index_max_entries: int = Field(
        default=50,
        ge=1,
        le=1000,
        description=(
            "Most shared memory entries the index of a turn shows (the first in insertion "
            "order; a line says how many more there are)."
        ),
    )
    memory_index_max_tokens: int = Field(
        default=2000,
        ge=0,
        description=(
            "Most estimated tokens the index's entry lines take (counted in the turn's "
            'budget); entries past it are left to the "more" line.'
        ),
    )
    skills_file: Path | None = Field(
        default=None,
        description='TOML file with the skills activate_skill offers (README "Skills"); unset = '
        "none.",
    )
    echo_max_context_tokens: int = Field(
        default=128_000, ge=1, description="Context window the echo provider reports."
    )
    echo_delay_s: float = Field(
        default=0.0,
        ge=0,
        le=60,
        description=(
            "Seconds the echo provider waits before each streamed piece of a reply (and "
            "before a whole one): a slow model, to try Ctrl-C while a reply streams."
        ),
    )
    max_content_bytes: int = Field(
        default=1_048_576,
        ge=1,
        description=(
            "Largest UTF-8 Send content or tool result, refused up front (the record it "
            "makes is checked against STELLO_MAX_RECORD_BYTES too)."
        ),
    )
    watch_poll_interval_s: float = Field(
        default=0.1,
        ge=0.05,
        description="Seconds between a space's event polls while WatchSpace streams it; at "
        "least 0.05 (each poll is a call to storage; a local write wakes it sooner anyway).",
    )
    watch_max_age_s: float = Field(
        default=900.0,
        ge=0,
        description="Longest a WatchSpace stream lives: it then ends UNAVAILABLE and its client "
        "watches again from its last cursor (the SDK does), losing nothing; a stream whose "
        "client stopped reading is cancelled 30 s later. Frees the places of streams a client "
        "forgot (STELLO_MAX_WATCHES_PER_SPACE). 0 = no limit, else at least 1 (each end "
        "is a new call of the client's).",
    )
    watch_ring_events: int = Field(
        default=1024,
        ge=1,
        description="Newest events each watched space keeps in memory; a watcher further "
        "behind reads from storage.",
    )
    fault: str | None = Field(
        default=None,
        description="Tests only: '<point>:exit' makes the process exit 137 at that saga point.",
    )

    @field_validator("storage_address", "tree_address")
    @classmethod
    def _addresses(cls, value: str) -> str:
        check_addresses(value)
        return value

    @field_validator("job_takeover_interval_s")
    @classmethod
    def _takeover_interval(cls, value: float) -> float:
        return zero_or_at_least(value, MIN_TAKEOVER_INTERVAL_S, "never")

    @field_validator("watch_max_age_s")
    @classmethod
    def _watch_max_age(cls, value: float) -> float:
        return zero_or_at_least(value, MIN_WATCH_MAX_AGE_S, "no limit")

    @field_validator("fault")
    @classmethod
    def _fault(cls, value: str | None) -> str | None:
        if value:
            parse_fault(value)
        return value or None

    @model_validator(mode="after")
    def _saga_within_ttl(self) -> GatewaySettings:
        if self.saga_timeout_s is not None and self.saga_timeout_s > self.provisioning_ttl_s / 2:
            raise ValueError(
                f"saga_timeout_s ({self.saga_timeout_s}) must be at most half of "
                f"provisioning_ttl_s ({self.provisioning_ttl_s}), or a saga could outlive "
                "its provisional session; lower STELLO_GATEWAY_SAGA_TIMEOUT_S"
            )
        return self

    @model_validator(mode="after")
    def _services_tls(self) -> GatewaySettings:
        check_pair(
            "STELLO_GATEWAY_SERVICES_CERT_FILE",
            self.services_cert_file,
            "STELLO_GATEWAY_SERVICES_KEY_FILE",
            self.services_key_file,
            "the gateway's client certificate (mutual TLS) needs its private key",
        )
        if self.services_ca_file is None:
            plaintext_only(self)
        elif not self.services_server_name and self._several_addresses():
            raise ValueError(
                "with TLS and several storage or tree addresses, set "
                "STELLO_GATEWAY_SERVICES_SERVER_NAME to the name in the servers' certificates "
                "(a list of addresses cannot be checked against a certificate)"
            )
        return self

    def _several_addresses(self) -> bool:
        return any(
            not isinstance(targets(address), str)
            for address in (self.storage_address, self.tree_address)
        )

    @property
    def address(self) -> str:
        """host:port to bind."""
        return f"{self.host}:{self.port}"

    @property
    def saga_budget_s(self) -> float:
        """The time a CreateRoot/Fork saga may take."""
        return self.saga_timeout_s or self.provisioning_ttl_s / 2
