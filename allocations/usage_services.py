"""Importing Slurm accounting: jobs become UsageRecords matched to approved requests.

All or nothing: the whole file is parsed before anything is written, and a malformed row stops
the import with every problem listed. Idempotent on (cluster, job id): importing the same file
again changes no record; a newer export of a job that was still running updates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from allocations.models import AllocationRequest, Status, UsageImport, UsageRecord
from allocations.sacct import SacctError, SacctJob, sacct_parse

RECORD_FIELDS = (
    "account",
    "user",
    "partition",
    "state",
    "start",
    "end",
    "elapsed_seconds",
    "gpus",
    "gpu_type",
    "gpu_hours",
)


@dataclass
class ImportSummary:
    usage_import: UsageImport
    skipped: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        u = self.usage_import
        return (
            f"{u.jobs_read} jobs read: {u.jobs_new} new, {u.jobs_updated} updated, "
            f"{u.jobs_unchanged} unchanged; {u.jobs_matched} matched to approved requests; "
            f"{u.gpu_hours_new:,.1f} new GPU hours; {len(self.skipped)} row(s) left out"
        )


def _day(moment: datetime) -> date:
    return timezone.localtime(moment).date()


def usage_match_request(
    *, account: str, start: datetime, candidates=None
) -> AllocationRequest | None:
    """The approved request charged by `account` whose dates hold the job's start.

    A request without dates takes the job when it is the account's only approved request.
    """
    if candidates is None:
        candidates = list(
            AllocationRequest.objects.filter(status=Status.APPROVED, slurm_account=account)
        )
    day = _day(start)
    dated = [
        r
        for r in candidates
        if r.slurm_account == account
        and (r.start_date is None or r.start_date <= day)
        and (r.end_date is None or day <= r.end_date)
    ]
    if len(dated) == 1:
        return dated[0]
    if len(dated) > 1:  # overlapping grants on one account: the latest that had started
        return max(dated, key=lambda r: (r.start_date or date.min, r.decided_at or r.created_at))
    return None


def _record_values(job: SacctJob, request: AllocationRequest | None) -> dict:
    return {
        "account": job.account,
        "user": job.user,
        "partition": job.partition,
        "state": job.state,
        "start": job.start,
        "end": job.end,
        "elapsed_seconds": job.elapsed_seconds,
        "gpus": job.gpus,
        "gpu_type": job.gpu_type,
        "gpu_hours": round(job.gpu_hours, 6),
        "allocation_request": request,
    }


def usage_import(
    *,
    raw: bytes,
    file_name: str = "",
    imported_by=None,
    cluster: str = "",
    time_zone: str | None = None,
) -> ImportSummary:
    """Import one accounting file; raises ValidationError listing every malformed row."""
    try:
        tz = ZoneInfo(time_zone or settings.TIME_ZONE)
    except (KeyError, ValueError) as exc:
        raise ValidationError({"time_zone": f"Unknown time zone {time_zone!r}."}) from exc
    cluster = (cluster or "").strip()[:100]
    try:
        parsed = sacct_parse(raw, cluster=cluster, tz=tz)
    except SacctError as exc:
        raise ValidationError({"file": exc.errors}) from exc
    jobs: dict[tuple[str, str], SacctJob] = {}
    skipped = list(parsed.skipped)
    for job in parsed.jobs:
        key = (job.cluster, job.job_id)
        if key in jobs:
            skipped.append(f"job {job.job_id}: listed twice; the later row is kept")
        jobs[key] = job
    return _write(
        jobs=jobs,
        skipped=skipped,
        file_name=file_name,
        file_format=parsed.file_format,
        release=parsed.slurm_release,
        imported_by=imported_by,
    )


@transaction.atomic
def _write(*, jobs, skipped, file_name, file_format, release, imported_by) -> ImportSummary:
    accounts = {job.account for job in jobs.values()}
    candidates = list(
        AllocationRequest.objects.filter(status=Status.APPROVED, slurm_account__in=accounts)
    )
    by_account: dict[str, list[AllocationRequest]] = {}
    for candidate in candidates:
        by_account.setdefault(candidate.slurm_account, []).append(candidate)
    existing = {
        (r.cluster, r.job_id): r
        for r in UsageRecord.objects.select_for_update().filter(
            job_id__in=[job_id for _, job_id in jobs]
        )
    }
    usage = UsageImport.objects.create(
        file_name=(file_name or "").replace("\x00", "")[:200],
        file_format=file_format,
        slurm_release=release,
        imported_by=imported_by,
        jobs_read=len(jobs),
    )
    new, changed = [], []
    for key, job in jobs.items():
        request = usage_match_request(
            account=job.account, start=job.start, candidates=by_account.get(job.account, [])
        )
        values = _record_values(job, request)
        if request is not None:
            usage.jobs_matched += 1
        record = existing.get(key)
        if record is None:
            new.append(UsageRecord(cluster=key[0], job_id=key[1], usage_import=usage, **values))
            usage.gpu_hours_new += values["gpu_hours"]
            continue
        differs = any(getattr(record, name) != values[name] for name in RECORD_FIELDS) or (
            record.allocation_request_id != (request.pk if request else None)
        )
        if differs:
            usage.gpu_hours_new += values["gpu_hours"] - record.gpu_hours
            for name, value in values.items():
                setattr(record, name, value)
            changed.append(record)
        else:
            usage.jobs_unchanged += 1
    UsageRecord.objects.bulk_create(new, batch_size=500)
    UsageRecord.objects.bulk_update(changed, [*RECORD_FIELDS, "allocation_request"], batch_size=500)
    usage.jobs_new = len(new)
    usage.jobs_updated = len(changed)
    usage.gpu_hours_new = round(usage.gpu_hours_new, 3)
    usage.save()
    return ImportSummary(usage_import=usage, skipped=skipped)


@transaction.atomic
def usage_rematch(*, account: str | None = None) -> int:
    """Match stored jobs again (after staff set or change a request's Slurm account)."""
    records = UsageRecord.objects.select_for_update()
    if account:
        records = records.filter(account=account)
    candidates = list(
        AllocationRequest.objects.filter(status=Status.APPROVED).exclude(slurm_account="")
    )
    by_account: dict[str, list[AllocationRequest]] = {}
    for candidate in candidates:
        by_account.setdefault(candidate.slurm_account, []).append(candidate)
    changed = []
    for record in records:
        request = usage_match_request(
            account=record.account,
            start=record.start,
            candidates=by_account.get(record.account, []),
        )
        if record.allocation_request_id != (request.pk if request else None):
            record.allocation_request = request
            changed.append(record)
    UsageRecord.objects.bulk_update(changed, ["allocation_request"], batch_size=500)
    return len(changed)
