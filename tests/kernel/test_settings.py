"""The kernel's settings: the pooled and the direct database URL (README: PgBouncer)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from agent_gateway.config import GatewaySettings
from stello.serving.entry import settings_problem
from stello.settings import MAX_STATEMENT_TIMEOUT_S, StelloSettings
from storage_service.config import StorageSettings
from tree_service.config import TreeSettings

POOLED = "postgresql://stello@pgbouncer:6432/stello"
DIRECT = "postgresql://stello@postgres:5432/stello"


class TestDirectUrl:
    def test_defaults_to_the_pooled_url(self) -> None:
        """Without STELLO_DATABASE_DIRECT_URL, session work uses STELLO_DATABASE_URL's DSN."""
        settings = StelloSettings(database_url=POOLED)
        assert settings.direct_dsn(POOLED) == POOLED

    def test_direct_url_wins_when_set(self) -> None:
        """With STELLO_DATABASE_DIRECT_URL set, migrations connect there instead."""
        settings = StelloSettings(database_url=POOLED, database_direct_url=DIRECT)
        assert settings.direct_dsn(POOLED) == DIRECT

    def test_direct_url_alone_is_refused(self) -> None:
        """A direct URL without the pooled one is a half configuration: the message names both."""
        with pytest.raises(pydantic.ValidationError, match="STELLO_DATABASE_DIRECT_URL is set"):
            StelloSettings(database_direct_url=DIRECT)

    def test_direct_url_is_validated_like_the_pooled_one(self) -> None:
        """A direct URL that is not postgresql:// is refused with the accepted forms."""
        with pytest.raises(pydantic.ValidationError, match="must start with postgresql://"):
            StelloSettings(database_url=POOLED, database_direct_url="mysql://x@y/z")


class TestFiniteSettings:
    @pytest.mark.parametrize(
        ("variable", "settings"),
        [
            pytest.param("STELLO_SHUTDOWN_GRACE_S", StelloSettings, id="grace"),
            pytest.param("STELLO_HEALTH_INTERVAL_S", StelloSettings, id="health"),
            pytest.param("STELLO_GATEWAY_BACKGROUND_STOP_GRACE_S", GatewaySettings, id="jobs"),
            pytest.param("STELLO_GATEWAY_WATCH_MAX_AGE_S", GatewaySettings, id="watch-age"),
        ],
    )
    @pytest.mark.parametrize("value", ["inf", "nan"])
    def test_an_endless_or_unknown_number_is_refused(
        self, monkeypatch: pytest.MonkeyPatch, variable: str, settings: type[Any], value: str
    ) -> None:
        """inf or nan seconds are refused at start (every Settings class refuses them): a
        shutdown waited for every watch to reach its age with STELLO_SHUTDOWN_GRACE_S=inf,
        and the background jobs' stop grace would have hung it too."""
        monkeypatch.setenv(variable, value)
        with pytest.raises(pydantic.ValidationError, match="Input should be a finite number"):
            settings()


class TestPoolSize:
    def test_a_minimum_above_the_maximum_is_refused_naming_both(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """STELLO_DB_POOL_MIN_SIZE above STELLO_DB_POOL_MAX_SIZE stops the start with both
        variables and their values; the pool used to clamp the minimum down silently."""
        monkeypatch.setenv("STELLO_DB_POOL_MIN_SIZE", "50")
        monkeypatch.setenv("STELLO_DB_POOL_MAX_SIZE", "20")
        with pytest.raises(pydantic.ValidationError) as refused:
            StelloSettings()
        line = settings_problem(refused.value)
        assert line is not None
        assert "STELLO_DB_POOL_MIN_SIZE=50" in line and "STELLO_DB_POOL_MAX_SIZE=20" in line

    def test_equal_sizes_are_accepted(self) -> None:
        """A pool of a fixed size (min = max) is a configuration, not a mistake."""
        settings = StelloSettings(db_pool_min_size=8, db_pool_max_size=8)
        assert (settings.db_pool_min_size, settings.db_pool_max_size) == (8, 8)


INTERVALS = [
    ("STELLO_HEALTH_INTERVAL_S", StelloSettings, 0.1),
    ("STELLO_STORAGE_EVENT_PURGE_INTERVAL_S", StorageSettings, 0.1),
    ("STELLO_STORAGE_SEARCH_BACKFILL_INTERVAL_S", StorageSettings, 1.0),
    ("STELLO_TREE_SWEEP_INTERVAL_S", TreeSettings, 0.1),
    ("STELLO_TREE_ERASE_INTERVAL_S", TreeSettings, 0.1),
    ("STELLO_TREE_RETENTION_INTERVAL_S", TreeSettings, 1.0),
    ("STELLO_GATEWAY_WATCH_POLL_INTERVAL_S", GatewaySettings, 0.05),
    ("STELLO_GATEWAY_JOB_TAKEOVER_INTERVAL_S", GatewaySettings, 0.1),
]
"""Every period of a Settings class (a loop's round), with its lower bound."""


class TestIntervals:
    @pytest.mark.parametrize(
        ("variable", "settings", "least"),
        [pytest.param(*case, id=case[0].removeprefix("STELLO_").lower()) for case in INTERVALS],
    )
    def test_a_period_below_its_bound_is_refused_naming_the_variable(
        self, monkeypatch: pytest.MonkeyPatch, variable: str, settings: type[Any], least: float
    ) -> None:
        """STELLO_TREE_SWEEP_INTERVAL_S=1e-9 made the sweep a busy loop: every period has a
        lower bound, and a refusal names the variable and the bound."""
        monkeypatch.setenv(variable, "1e-9")
        with pytest.raises(pydantic.ValidationError) as refused:
            settings()
        line = settings_problem(refused.value)
        assert line is not None and line.startswith(f"{variable}: ")
        assert f"{least:g}" in line
        monkeypatch.setenv(variable, str(least))
        assert settings() is not None

    def test_every_period_has_a_bound(self) -> None:
        """A new *_interval_s field is listed above (with its bound) or this fails."""
        listed = {variable for variable, _, _ in INTERVALS}
        found = {
            f"{cls.model_config['env_prefix']}{name}".upper()
            for cls in (StelloSettings, StorageSettings, TreeSettings, GatewaySettings)
            for name in cls.model_fields
            if name.endswith("interval_s")
        }
        assert found == listed

    def test_no_takeover_stays_allowed(self) -> None:
        """STELLO_GATEWAY_JOB_TAKEOVER_INTERVAL_S=0 still means: never look for left jobs."""
        assert GatewaySettings(job_takeover_interval_s=0).job_takeover_interval_s == 0

    def test_a_watch_age_below_a_second_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_GATEWAY_WATCH_MAX_AGE_S=1e-9 ended every stream at once, and the SDK
        watched again at once: 0 (no limit) or at least 1 s."""
        monkeypatch.setenv("STELLO_GATEWAY_WATCH_MAX_AGE_S", "1e-9")
        with pytest.raises(pydantic.ValidationError) as refused:
            GatewaySettings()
        line = settings_problem(refused.value)
        assert line is not None and line.startswith("STELLO_GATEWAY_WATCH_MAX_AGE_S: ")
        assert "at least 1 seconds" in line
        monkeypatch.setenv("STELLO_GATEWAY_WATCH_MAX_AGE_S", "0")
        assert GatewaySettings().watch_max_age_s == 0


class TestStatementTimeouts:
    @pytest.mark.parametrize(
        ("variable", "settings"),
        [
            ("STELLO_STORAGE_SEARCH_TIMEOUT_S", StorageSettings),
            ("STELLO_TREE_GET_TREE_TIMEOUT_S", TreeSettings),
        ],
    )
    def test_a_timeout_past_postgresqls_longest_is_refused_naming_it(
        self, monkeypatch: pytest.MonkeyPatch, variable: str, settings: type[Any]
    ) -> None:
        """STELLO_TREE_GET_TREE_TIMEOUT_S=3000000 (a month: "no real bound") started, then
        every GetTree answered INTERNAL (PostgreSQL refuses a statement_timeout past an int
        of milliseconds); it is refused at start naming the variable and the bound."""
        monkeypatch.setenv(variable, "3000000")
        with pytest.raises(pydantic.ValidationError) as refused:
            settings()
        line = settings_problem(refused.value)
        assert line is not None and line.startswith(f"{variable}: ")
        assert str(MAX_STATEMENT_TIMEOUT_S) in line
        monkeypatch.setenv(variable, str(MAX_STATEMENT_TIMEOUT_S))
        assert settings() is not None
