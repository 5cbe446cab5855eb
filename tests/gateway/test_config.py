"""Gateway settings, the fault seam's parsing and the package's exports."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import agent_gateway
from agent_gateway.config import GatewaySettings
from agent_gateway.config_checks import targets
from agent_gateway.forks.faults import (
    FAULT_POINTS,
    ExitFaults,
    NoFaults,
    faults_from_setting,
    parse_fault,
)


class TestGatewaySettings:
    """STELLO_GATEWAY_* variables."""

    def test_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without variables the gateway listens on 50063 and finds storage and tree locally."""
        for name in ("PORT", "STORAGE_ADDRESS", "TREE_ADDRESS", "SAGA_TIMEOUT_S", "FAULT"):
            monkeypatch.delenv(f"STELLO_GATEWAY_{name}", raising=False)
        config = GatewaySettings()
        assert config.address == "127.0.0.1:50063"
        assert (config.storage_address, config.tree_address) == (
            "127.0.0.1:50061",
            "127.0.0.1:50062",
        )
        assert config.saga_budget_s == 30.0
        assert config.max_tool_rounds == 5
        assert config.consolidate_every_n_turns == 0

    def test_reads_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Variables with the STELLO_GATEWAY_ prefix are read, JSON lists included."""
        monkeypatch.setenv("STELLO_GATEWAY_PORT", "0")
        monkeypatch.setenv("STELLO_GATEWAY_DEFAULT_SKILLS", '["a", "b"]')
        monkeypatch.setenv("STELLO_GATEWAY_DEFAULT_SYSTEM_PROMPT", "be brief")
        config = GatewaySettings()
        assert config.port == 0
        assert config.default_skills == ["a", "b"]
        assert config.default_system_prompt == "be brief"

    def test_saga_budget_bounded_by_half_the_ttl(self) -> None:
        """A saga timeout above half the provisioning TTL is refused with an actionable message."""
        with pytest.raises(ValidationError, match="at most half"):
            GatewaySettings(provisioning_ttl_s=2, saga_timeout_s=1.5)
        assert GatewaySettings(provisioning_ttl_s=2).saga_budget_s == 1.0

    def test_bad_fault_refused(self) -> None:
        """A malformed STELLO_GATEWAY_FAULT is refused at startup."""
        with pytest.raises(ValidationError, match="unknown fault point"):
            GatewaySettings(fault="fork.nowhere:exit")

    @pytest.mark.parametrize(
        "address", ["nohostport", "host:", ":50061", "host:port", "a:1,b", "a:70000", " , "]
    )
    def test_an_address_without_host_port_is_refused(self, address: str) -> None:
        """A storage or tree address must be host:port (each of a list): gRPC would take it
        and fail at the first call."""
        with pytest.raises(ValidationError, match="expected host:port"):
            GatewaySettings(storage_address=address)
        with pytest.raises(ValidationError, match="expected host:port"):
            GatewaySettings(tree_address=address)

    @pytest.mark.parametrize(
        "address",
        [
            "storage:50061",
            "a:1, b:2",
            "[::1]:50061",
            "dns:///stello-storage:50061",
            "dns://8.8.8.8/stello-storage:50061",
            "ipv4:10.0.0.1:50061,10.0.0.2:50061",
            "unix:/run/stello/storage.sock",
        ],
    )
    def test_host_port_and_grpc_targets_are_taken(self, address: str) -> None:
        assert GatewaySettings(storage_address=address).storage_address == address

    def test_targets_round_robin(self) -> None:
        """A comma-separated address becomes a list of targets."""
        assert targets("a:1") == "a:1"
        assert targets("a:1, b:2") == ["a:1", "b:2"]


class TestFaults:
    """The fault seam of DESIGN §4.1."""

    def test_parse(self) -> None:
        """'<point>:exit' names a known point; anything else is refused."""
        assert parse_fault("fork.after_create:exit") == ("fork.after_create", "exit")
        with pytest.raises(ValueError, match="<point>:exit"):
            parse_fault("fork.after_create:raise")

    def test_from_setting(self) -> None:
        """No setting gives the no-op seam; a setting gives an ExitFaults at that point."""
        assert isinstance(faults_from_setting(None), NoFaults)
        exit_faults = faults_from_setting("fork.before_commit:exit")
        assert isinstance(exit_faults, ExitFaults)
        assert exit_faults.point == "fork.before_commit"

    async def test_exit_faults_pass_other_points(self) -> None:
        """An ExitFaults lets every other point pass."""
        faults = ExitFaults("fork.after_commit")
        for point in FAULT_POINTS[:-1]:
            await faults.hit(point)


def test_all_is_exported() -> None:
    """Every name in agent_gateway.__all__ exists, once."""
    for name in agent_gateway.__all__:
        assert hasattr(agent_gateway, name), name
    assert len(set(agent_gateway.__all__)) == len(agent_gateway.__all__)
