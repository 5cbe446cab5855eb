"""The checks `agent_gateway.config.GatewaySettings` makes of its values beside pydantic's
bounds: an interval's floor, TLS settings that need a CA, and the storage and tree
addresses (host:port, gRPC targets, comma-separated lists) with the targets they become.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_gateway.config import GatewaySettings


MIN_TAKEOVER_INTERVAL_S = 0.1
"""The shortest STELLO_GATEWAY_JOB_TAKEOVER_INTERVAL_S but 0 (never): each look is a call to
storage, so a tinier period is a busy loop."""
MIN_WATCH_MAX_AGE_S = 1.0
"""The shortest STELLO_GATEWAY_WATCH_MAX_AGE_S but 0 (no limit): each end makes the client
watch again, so a tinier age is a busy loop of reconnections."""


def zero_or_at_least(value: float, least: float, zero: str) -> float:
    """`value`, refused when above 0 (which means `zero`) but below `least` seconds."""
    if 0 < value < least:
        raise ValueError(f"must be 0 ({zero}) or at least {least:g} seconds, got {value:g}")
    return value


def plaintext_only(config: GatewaySettings) -> None:
    """Refuse TLS settings that would be ignored because no CA turns TLS on."""
    for name, value in (
        ("STELLO_GATEWAY_SERVICES_CERT_FILE", config.services_cert_file),
        ("STELLO_GATEWAY_SERVICES_SERVER_NAME", config.services_server_name),
    ):
        if value:
            raise ValueError(
                f"{name} needs STELLO_GATEWAY_SERVICES_CA_FILE: TLS to storage and tree is on "
                f"only with the CA that verifies their certificates; set it, or unset {name}"
            )


GRPC_SCHEMES = ("dns:", "ipv4:", "ipv6:", "xds:")
"""gRPC target schemes whose rest is host:port (`dns:///stello-storage:50061` in k8s)."""
PATH_SCHEMES = ("unix:", "unix-abstract:", "vsock:")
"""gRPC target schemes whose rest is no host:port (a socket's path), taken as given."""


def check_addresses(address: str) -> None:
    """Refuse an address that is not host:port, or a comma-separated list of them: gRPC
    would take it and fail only at the first call."""
    parts = [part.strip() for part in address.split(",") if part.strip()]
    if not parts:
        raise ValueError("expected host:port, got nothing")
    for part in parts:
        if part.startswith(PATH_SCHEMES):
            continue
        rest = part
        for scheme in GRPC_SCHEMES:
            if rest.startswith(scheme):
                rest = rest.removeprefix(scheme)
                if rest.startswith("//"):  # dns://authority/host:port
                    rest = rest[2:].partition("/")[2]
                break
        host, colon, port = rest.rpartition(":")
        if not (colon and host.strip("[]") and port.isdigit() and 0 < int(port) <= 65535):
            raise ValueError(f"expected host:port (several: comma-separated), got {part!r}")


def targets(address: str) -> str | list[str]:
    """One address as given, or the list of a comma-separated one (round robin)."""
    parts = [part.strip() for part in address.split(",") if part.strip()]
    return parts[0] if len(parts) == 1 else parts
