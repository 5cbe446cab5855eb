"""Test configuration: the shared fixtures live in tests/support (STYLE §11)."""

import os

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)

# gRPC's C core logs connection churn (GOAWAY on server stop) at INFO; keep errors only.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

pytest_plugins = ["tests.support.fixtures", "tests.support.certs", "tests.support.fresh"]
