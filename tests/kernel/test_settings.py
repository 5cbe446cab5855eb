"""The kernel's settings: the pooled and the direct database URL (README: PgBouncer)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from agent_gateway.config import GatewaySettings
from stello.settings import StelloSettings

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
