"""Where a client connects: arguments, then the environment, then what `stello up` saved."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stello_client import AsyncClient, Client, ConfigurationError
from stello_client.calls import Retry
from stello_client.connection.target import resolve_target

SAVED = {"space_id": "saved-space", "key": "saved-key", "gateway": "127.0.0.1:50063"}


@pytest.fixture(name="saved")
def _saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A credentials file as `stello up` writes it, and no STELLO_* connection variables."""
    (tmp_path / "credentials.json").write_text(json.dumps(SAVED))
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    for name in ("STELLO_GATEWAY", "STELLO_KEY", "STELLO_SPACE_ID", "STELLO_CA_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("saved")
class TestSaved:
    def test_nothing_given_is_the_saved_key_and_space(self) -> None:
        target = resolve_target()
        assert (target.gateway, target.key, target.space) == (
            "127.0.0.1:50063",
            "saved-key",
            "saved-space",
        )

    def test_another_gateway_keeps_the_saved_key_and_space(self) -> None:
        target = resolve_target(gateway="10.0.0.1:50063")
        assert (target.gateway, target.key, target.space) == (
            "10.0.0.1:50063",
            "saved-key",
            "saved-space",
        )

    def test_another_key_leaves_the_saved_space_out(self) -> None:
        """The saved space is the saved key's: another key's is settled by WhoAmI (its one
        space), never the saved one, which that key may not reach."""
        target = resolve_target(key="other-key")
        assert (target.key, target.space) == ("other-key", "")

    def test_another_key_from_the_environment_too(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("STELLO_KEY", "other-key")
        assert resolve_target().space == ""

    def test_another_key_with_its_space(self) -> None:
        assert resolve_target(key="other-key", space="team-a").space == "team-a"

    def test_the_saved_key_given_again_keeps_the_saved_space(self) -> None:
        assert resolve_target(key="saved-key").space == "saved-space"


class TestGatewayAddress:
    @pytest.mark.parametrize(
        ("gateway", "said"),
        [
            pytest.param("http://127.0.0.1:50063", "not a URL", id="url"),
            pytest.param("127.0.0.1", "the port is missing", id="no-port"),
            pytest.param("127.0.0.1:99999", "the port must be 1..65535, got '99999'", id="range"),
            pytest.param("127.0.0.1:0", "the port must be 1..65535, got '0'", id="port-zero"),
            pytest.param(":50063", "the host is missing", id="no-host"),
            pytest.param("::1:50063", "an IPv6 address goes in brackets", id="bare-ipv6"),
        ],
    )
    def test_what_is_not_host_port_is_refused_naming_it(
        self, gateway: str, said: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """gateway= (or STELLO_GATEWAY) that is not HOST:PORT is a ConfigurationError naming
        where it came from and what is wrong; gRPC failed later in its resolver's words."""
        with pytest.raises(ConfigurationError, match=rf"^gateway: .*{re.escape(said)}") as caught:
            resolve_target(gateway, "key", "space")
        assert caught.value.setting == "gateway"
        monkeypatch.setenv("STELLO_GATEWAY", gateway)
        with pytest.raises(ConfigurationError, match=rf"^STELLO_GATEWAY: .*{re.escape(said)}"):
            resolve_target(None, "key", "space")
        with pytest.raises(ConfigurationError, match=re.escape(said)):
            AsyncClient.keyless(gateway)

    @pytest.mark.parametrize(
        "gateway", ["127.0.0.1:50063", "localhost:1", "[::1]:50063", "unix:/tmp/stello.sock"]
    )
    def test_host_port_ipv6_and_grpc_targets_pass(self, gateway: str) -> None:
        """HOST:PORT, a bracketed IPv6 address and gRPC's own targets (unix:PATH) are kept."""
        assert resolve_target(gateway, "key", "space").gateway == gateway
        assert AsyncClient.keyless(gateway).gateway == gateway


# Nothing listens on port 1: a call that reached for the gateway would fail UNAVAILABLE.
NOWHERE = "127.0.0.1:1"
SPACE = "00000000-0000-4000-8000-000000000001"


class TestKeyless:
    async def test_a_call_without_a_key_is_refused_before_connecting(self) -> None:
        """A keyless client's own call (or one through `using` with a space and no key) raises
        ConfigurationError naming the missing key before any connection; on main it went out
        without one and the gateway answered UNAUTHENTICATED."""
        async with AsyncClient.keyless(NOWHERE, retry=Retry(attempts=1)) as client:
            for caller in (client, client.using(space=SPACE)):
                with pytest.raises(ConfigurationError, match=r"^no API key: .*using\(key=") as err:
                    await caller.get_tree()
                assert err.value.setting == "key"
            with pytest.raises(ConfigurationError, match=r"^no API key"):
                async with client.using(space=SPACE).watch() as watch:
                    await watch.start()

    def test_the_sync_client_too(self) -> None:
        """`Client.keyless(gateway).get_tree()` raises the same ConfigurationError."""
        with (
            Client.keyless(NOWHERE, retry=Retry(attempts=1)) as client,
            pytest.raises(ConfigurationError, match=r"^no API key") as caught,
        ):
            client.get_tree()
        assert caught.value.setting == "key"
