"""Client fixtures: the gateway suite's storage, tree and gateway servers, reused as they are."""

from __future__ import annotations

# Imported for pytest, which registers these fixtures by name (backends, stack, ...).
from tests.gateway.conftest import (  # noqa: F401
    _backends,
    _local_calls,
    _profiles_file,
    _provisioning_ttl_s,
    _stack,
    _start_gateway,
    _summarizer,
)
