"""Gateway behaviour with in-process calls to storage and tree (`stello up`'s default).

The classes below are the ones of the modules they come from, collected again
here with the `local_calls` fixture True: the gateway's clients reach the
backends through `stello.serving.inproc.LocalChannel` (their interceptors and handlers,
no network). Chosen to cover every shape of internal call: reads that fan out
and the calls they count (pages of slots past storage's reply limit too), forks
(the saga), turns and their streams, leases, consolidation, the error boundary
and refused input (with the fixtures of their modules). Not here: tests whose
point is a backend's network (an unreachable or failing storage server, TLS,
outages), which in-process calls do not have.
"""

from __future__ import annotations

import pytest

from tests.gateway.forks.test_fork import TestForkContext as TestForkContextLocal
from tests.gateway.forks.test_fork import TestForkPlacementAndConfig as TestForkPlacementLocal
from tests.gateway.history.test_consolidate import TestConsolidate as TestConsolidateLocal
from tests.gateway.servicer.test_bad_input import TestLabelsAndIds as TestLabelsAndIdsLocal
from tests.gateway.servicer.test_bad_input import _source
from tests.gateway.servicer.test_boundary import (
    TestLimitsBeforeWrites as TestLimitsBeforeWritesLocal,
)
from tests.gateway.servicer.test_boundary import _guarded, _spy
from tests.gateway.sessions.test_large_slots import TestSlotsAtTheLimit as TestSlotsAtTheLimitLocal
from tests.gateway.sessions.test_large_slots import _chained
from tests.gateway.sessions.test_read_calls import TestGetSession as TestGetSessionCallsLocal
from tests.gateway.sessions.test_read_calls import TestOtherReads as TestOtherReadsLocal
from tests.gateway.sessions.test_sessions import TestDigests as TestDigestsLocal
from tests.gateway.sessions.test_sessions import TestWrites as TestWritesLocal
from tests.gateway.sessions.test_sessions import _small_gateway
from tests.gateway.turns.test_lease import TestRenewal as TestRenewalLocal
from tests.gateway.turns.test_send import TestStream as TestStreamLocal
from tests.gateway.turns.test_send import TestTurnResult as TestTurnResultLocal

__all__ = [
    "TestConsolidateLocal",
    "TestDigestsLocal",
    "TestForkContextLocal",
    "TestForkPlacementLocal",
    "TestGetSessionCallsLocal",
    "TestLabelsAndIdsLocal",
    "TestLimitsBeforeWritesLocal",
    "TestOtherReadsLocal",
    "TestRenewalLocal",
    "TestSlotsAtTheLimitLocal",
    "TestStreamLocal",
    "TestTurnResultLocal",
    "TestWritesLocal",
    "_chained",
    "_guarded",
    "_small_gateway",
    "_source",
    "_spy",
]


@pytest.fixture(name="local_calls")
def _local_calls() -> bool:
    return True
