"""The background jobs' wire forms: requests into domain values, and back (DESIGN §4.8).

Kinds and statuses travel as `stello.common.v1` enums and are stored as
their lower-case names; an UNSPECIFIED or unknown value is a field violation.
"""

from __future__ import annotations

import uuid

from stello.common.v1 import common_pb2
from stello.enum_words import given, one_of
from stello.errors import Violations
from stello.formats.timestamps import timestamp
from stello.storage.v1 import storage_pb2
from stello.validation import not_one_of, parse_uuid
from storage_service.jobs.repository import Coverage, JobState, OrphanedJob
from storage_service.models import JobKindName, JobStatusName
from storage_service.transact.operations import JobCheck, MemoryVersionCheck, UpdateJobOp

KINDS: dict[common_pb2.JobKind, JobKindName] = {
    common_pb2.JOB_KIND_CONSOLIDATE: "consolidate",
    common_pb2.JOB_KIND_FOLD: "fold",
}
MAX_ORPHANS = 1000
DEFAULT_ORPHANS = 100

STATUSES: dict[common_pb2.JobStatus, JobStatusName] = {
    common_pb2.JOB_STATUS_RUNNING: "running",
    common_pb2.JOB_STATUS_DONE: "done",
    common_pb2.JOB_STATUS_BUDGET_SPENT: "budget_spent",
    common_pb2.JOB_STATUS_STOPPED: "stopped",
    common_pb2.JOB_STATUS_FAILED: "failed",
}
KIND_VALUES = {name: value for value, name in KINDS.items()}
STATUS_VALUES = {name: value for value, name in STATUSES.items()}


def job_kind(value: common_pb2.JobKind, path: str, v: Violations) -> JobKindName:
    """A job kind; a violation for UNSPECIFIED or an unknown value."""
    kind = KINDS.get(value)
    if kind is None:
        v.add(path, not_one_of(common_pb2.JobKind, given(value)))
        return "consolidate"
    return kind


def token(value: str, path: str, v: Violations) -> str:
    """A claim token: required."""
    if not value:
        v.add(path, "is required")
    return value


def job_check(
    message: storage_pb2.Precondition.BackgroundJobCheck, path: str, v: Violations
) -> JobCheck:
    """Transact's BackgroundJobCheck."""
    sid = parse_uuid(message.session_id, f"{path}.session_id", v)
    kind = job_kind(message.kind, f"{path}.kind", v)
    return JobCheck(sid, kind, token(message.token, f"{path}.token", v))


def memory_version_check(
    message: storage_pb2.Precondition.MemoryVersionCheck, path: str, v: Violations
) -> MemoryVersionCheck:
    """Transact's MemoryVersionCheck."""
    sid = parse_uuid(message.session_id, f"{path}.session_id", v)
    if message.expected < 0:
        v.add(f"{path}.expected", "must not be negative")
    return MemoryVersionCheck(sid, message.expected)


def update_job_op(
    sid: uuid.UUID, body: storage_pb2.Operation.UpdateJobOp, path: str, v: Violations
) -> UpdateJobOp:
    """Transact's UpdateJobOp."""
    kind = job_kind(body.kind, f"{path}.kind", v)
    for name in ("covered_until_seq", "model_calls", "tokens"):
        if getattr(body, name) < 0:
            v.add(f"{path}.{name}", "must not be negative")
    status: JobStatusName = "running"
    if body.release:
        status = STATUSES.get(body.status, "running")
        if status == "running":
            got = STATUSES.get(body.status) or given(body.status)
            ended = one_of([name for name in STATUS_VALUES if name != "running"], got)
            v.add(f"{path}.status", f"{ended} (a released run says how it ended)")
    return UpdateJobOp(
        sid,
        kind,
        token(body.token, f"{path}.token", v),
        body.covered_until_seq,
        body.model_calls,
        body.tokens,
        body.release,
        status,
    )


def job_to_proto(job: JobState) -> common_pb2.BackgroundJob:
    """The wire form of a job."""
    return common_pb2.BackgroundJob(
        kind=KIND_VALUES[job.kind],
        status=STATUS_VALUES[job.status],
        covered_until_seq=job.covered_until_seq,
        model_calls=job.model_calls,
        tokens=job.tokens,
        runs=job.runs,
        claimed=job.claimed,
        updated_at=timestamp(job.updated_at),
    )


def progress_to_proto(coverage: Coverage, jobs: list[JobState]) -> common_pb2.HistoryProgress:
    """The wire form of a session's progress."""
    return common_pb2.HistoryProgress(
        last_seq=coverage.last_seq,
        summary_covered_until_seq=coverage.summary_seq,
        summary_lossy=coverage.summary_lossy,
        complete_summary_covered_until_seq=coverage.complete_seq,
        memory_covered_until_seq=coverage.memory_seq,
        memory_version=coverage.memory_version,
        inherited_until_seq=coverage.inherited_seq,
        jobs=[job_to_proto(job) for job in jobs],
    )


def orphans_limit(value: int, v: Violations) -> int:
    """ListOrphanedJobs' limit: 0..MAX_ORPHANS, 0 = DEFAULT_ORPHANS."""
    if not 0 <= value <= MAX_ORPHANS:
        v.add("limit", f"must be between 0 and {MAX_ORPHANS}, got {value}")
    return value or DEFAULT_ORPHANS


def orphan_to_proto(orphan: OrphanedJob) -> storage_pb2.OrphanedJob:
    """The wire form of a job left without a gateway."""
    return storage_pb2.OrphanedJob(
        space_id=str(orphan.space_id),
        session_id=str(orphan.session_id),
        kind=KIND_VALUES[orphan.job.kind],
        job=job_to_proto(orphan.job),
    )
