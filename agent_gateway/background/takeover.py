"""The takeover of jobs left without a gateway (DESIGN §4.8), with no new trigger.

With ``STELLO_GATEWAY_JOBS_KEY`` set, every ``STELLO_GATEWAY_JOB_TAKEOVER_INTERVAL_S``
(and once at start) the runner lists them (storage's ListOrphanedJobs: a claim
that expired because its gateway died, or a run STOPPED by a shutdown, in the
spaces the key reaches) and submits each to itself, built by the factory its
kind registered (`BackgroundRunner.register`). The claim decides who runs it: of
every gateway doing the same, one run gets each job (the others' are busy and
skipped), and it continues from the job's saved progress. A key storage refuses
(unknown, or revoked by a rotation) is said in one WARNING line naming the
setting, at most every `KEY_WARNING_EVERY_S`, and tried again every interval: a
key made live again works from the next round.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_gateway.background.jobs import Job
from agent_gateway.clients import Caller
from stello.db.periodic import Periodic, Refused
from stello.errors import Unauthenticated
from stello.telemetry.log_every import WarnEvery

if TYPE_CHECKING:
    from agent_gateway.background.runner import BackgroundRunner

log = logging.getLogger(__name__)

KEY_WARNING_EVERY_S = 300.0
"""How often, at most, the takeover says its key is refused."""
KEY_REFUSED = (
    "STELLO_GATEWAY_JOBS_KEY is refused by storage (%s): jobs left without a gateway are not "
    "taken over. Set it to a live API key (`stello keys create`: a tenant key covers its "
    "space, an admin-scope key every space) and restart, or unset it; tried again every %gs"
)


JobFactory = Callable[[Caller, uuid.UUID, uuid.UUID], Job]
"""Builds a job taken over: (the takeover key's caller, space, session) -> the job."""


class Takeover(Periodic):
    """The runner's periodic look for jobs left without a gateway (at start, then every
    interval)."""

    task_name = "stello-job-takeover"
    what = "background job takeover"

    def __init__(self, runner: BackgroundRunner, interval_s: float) -> None:
        super().__init__(interval_s)
        self._runner = runner
        self._refusals = WarnEvery(log, KEY_WARNING_EVERY_S)
        self._refused = False

    async def run_once(self) -> int:
        """One look; how many jobs were taken over.

        Raises:
            Refused: storage refused the key (said in a rate-limited WARNING).
        """
        try:
            taken = await self._runner.take_over()
        except Unauthenticated as exc:
            self._refused = True
            self._refusals.warning("key", KEY_REFUSED, exc.message, self._interval_s)
            raise Refused(str(exc)) from exc
        if self._refused:
            self._refused = False
            log.info("STELLO_GATEWAY_JOBS_KEY is accepted again: jobs are taken over")
        return taken
