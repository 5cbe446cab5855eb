"""The kernel's settings: the pooled and the direct database URL (README: PgBouncer)."""

from __future__ import annotations

import pydantic
import pytest

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


class TestShutdownGrace:
    def test_an_endless_grace_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_SHUTDOWN_GRACE_S=inf is refused at start, naming the setting: a shutdown
        would wait for every stream to end by itself (nan is refused by its bound)."""
        monkeypatch.setenv("STELLO_SHUTDOWN_GRACE_S", "inf")
        with pytest.raises(pydantic.ValidationError, match="STELLO_SHUTDOWN_GRACE_S must be"):
            StelloSettings()
