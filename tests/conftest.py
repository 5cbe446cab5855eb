"""Test configuration: the shared fixtures live in tests/support (STYLE §11)."""

import gc
import os

import pytest

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)

# gRPC's C core logs connection churn (GOAWAY on server stop) at INFO; keep errors only.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

pytest_plugins = ["tests.support.fixtures", "tests.support.certs", "tests.support.fresh"]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every test module, its imports, the items: 450,000 objects for
    the whole suite) lives until the run ends: it goes to the collector's permanent
    generation, which no collection walks again. Each full collection walked all of it (in
    CI's long runs, several tenths of a second each), and so did each `gc.get_referrers`
    of the read counts (tests/support/history.py): 22.0 -> 18.0 s of the pytest process's
    CPU over tests/storage/{records,events,jobs} and tests/kernel, its collections 3.2 -> 0.9 s.
    Nothing a test creates is frozen, and nothing frozen was garbage (collected first)."""
    gc.collect()
    gc.freeze()
