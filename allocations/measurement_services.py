"""Writes for trial-run measurements and Slurm accounts: upload, staff review, calibration.

An accepted measurement becomes a catalog Benchmark (source kind "institute_run"), so the
engine's ordinary benchmark-to-utilisation path uses it from the next estimate on.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from advisor.engine import run_loss_facts
from advisor.engine.models import EstimateRequest
from allocations.models import (
    AllocationRequest,
    MeasurementReview,
    Status,
    TrialMeasurement,
)
from allocations.services import allocation_request_approve
from allocations.trial_runs import TrialRunInvalid, TrialRunReport, trial_run_parse
from allocations.usage_services import usage_rematch
from catalog.models import Accelerator, Benchmark, BenchmarkSourceKind, Profile

# Measurements a request may hold: enough for a few trial configurations, not a dumping ground.
MAX_MEASUREMENTS_PER_REQUEST = 20
# Requests a researcher can still learn from: everything but a closed one.
UPLOAD_STATUSES = (
    Status.DRAFT,
    Status.SUBMITTED,
    Status.CHANGES_REQUESTED,
    Status.RESUBMITTED,
    Status.APPROVED,
)
# sacctmgr account names: letters, digits and a few separators (Slurm lower-cases them).
SLURM_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _clean_name(name: str) -> str:
    name = (name or "").replace("\x00", "").strip()
    return name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1][:200]


@transaction.atomic
def trial_measurement_upload(
    *, allocation_request: AllocationRequest, uploaded_by, raw: bytes, file_name: str = ""
) -> TrialMeasurement:
    """Validate the file and attach it; raises ValidationError (one message per bad field)."""
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    if not uploaded_by.is_staff and locked.researcher_id != uploaded_by.pk:
        raise ValidationError("Only the researcher who made this request can add measurements.")
    if locked.status not in UPLOAD_STATUSES:
        raise ValidationError(
            f"A request that is {locked.get_status_display().lower()} takes no measurements."
        )
    if locked.measurements.count() >= MAX_MEASUREMENTS_PER_REQUEST:
        raise ValidationError(
            f"This request already holds {MAX_MEASUREMENTS_PER_REQUEST} measurements; ask "
            "research computing to remove old ones first."
        )
    try:
        report = trial_run_parse(raw)
    except TrialRunInvalid as exc:
        raise ValidationError({"file": exc.errors}) from exc
    measurement = TrialMeasurement(
        allocation_request=locked,
        uploaded_by=uploaded_by,
        file_name=_clean_name(file_name),
        report=report.model_dump(mode="json", by_alias=True),
        **_columns(report),
    )
    measurement.full_clean()
    measurement.save(force_insert=True)
    return measurement


def _columns(report: TrialRunReport) -> dict:
    return {
        "device_name": report.device.name or "",
        "gpu_present": report.device.gpu_present,
        "num_gpus": report.device.count,
        "task": report.workload.task,
        "precision": report.workload.precision,
        "micro_batch_size": report.workload.micro_batch_size,
        "seq_len": report.workload.seq_len,
        "params": report.workload.params,
        "tokens_per_second": report.measurement.tokens_per_second,
        "max_memory_allocated_bytes": report.memory.max_allocated_bytes,
        "max_memory_reserved_bytes": report.memory.max_reserved_bytes,
    }


def trial_measurement_report(measurement: TrialMeasurement) -> TrialRunReport:
    return TrialRunReport.model_validate(measurement.report)


def _benchmark_name(measurement: TrialMeasurement) -> str:
    return f"institute-run-{measurement.pk.hex[:12]}"


def trial_measurement_benchmark_values(
    *, measurement: TrialMeasurement, accelerator: Accelerator, params: int | None
) -> dict:
    """The catalog benchmark row a measurement becomes, as plain field values."""
    allocation_request = measurement.allocation_request
    snapshot = allocation_request.estimate_snapshot or {}
    report = trial_measurement_report(measurement)
    model = (
        report.workload.model_name
        or (snapshot.get("request") or {}).get("model_id")
        or f"{params or 0:,}-parameter model"
    )
    system = allocation_request.system
    if system is not None and not system.node_types.filter(accelerator=accelerator).exists():
        system = None  # measured elsewhere than the facility asked for
    packages = ", ".join(f"{k} {v}" for k, v in sorted(report.software.packages.items()))
    memory = report.memory.max_reserved_bytes
    vocab_size, fused_loss = _snapshot_loss(snapshot)
    return {
        "accelerator": accelerator,
        "system": system,
        "model": model[:200],
        "params": params,
        "task": report.workload.task,
        "strategy": (report.workload.strategy or "")[:30],
        "precision": report.workload.precision,
        "num_gpus": max(report.device.count, 1),
        "batch_size": report.workload.micro_batch_size,
        "seq_len": report.workload.seq_len,
        "tokens_per_second": report.measurement.tokens_per_second,
        "peak_memory_gb": memory / 1e9 if memory else None,
        "vocab_size": vocab_size,
        "fused_loss": fused_loss,
        "notes": (
            f"Trial run measured with the trial-run helper {report.helper_version}: "
            f"{report.measurement.steady_steps} steady steps after "
            f"{report.measurement.warmup_steps} warm-up; "
            f"{packages or 'no framework versions recorded'}. Peak memory is PyTorch's "
            "max_memory_reserved (without the CUDA context)."
        ),
        "source": (
            f"Institute trial run for allocation request {allocation_request.pk} "
            f"(“{allocation_request.project_title or 'untitled'}”)"
        )[:300],
        "source_kind": BenchmarkSourceKind.INSTITUTE_RUN,
        "source_reference": (
            f"allocation-request:{allocation_request.pk}/measurement:{measurement.pk}"
        ),
    }


@transaction.atomic
def trial_measurement_accept(
    *,
    measurement: TrialMeasurement,
    reviewer,
    accelerator_name: str,
    params: int | None = None,
    note: str = "",
) -> Benchmark:
    """Staff accept a measurement: it becomes a catalog benchmark in the active profile."""
    locked = (
        TrialMeasurement.objects.select_for_update(of=("self",))
        .select_related("allocation_request__system")
        .get(pk=measurement.pk)
    )
    if not reviewer.is_staff:
        raise ValidationError("Only research-computing staff can accept measurements.")
    if locked.review == MeasurementReview.ACCEPTED:
        raise ValidationError("This measurement is already in the catalog.")
    if not locked.gpu_present:
        raise ValidationError(
            {"accelerator": "Measured on the CPU: it says nothing about a GPU's throughput."}
        )
    problem = trial_measurement_calibration_problem(locked)
    if problem:
        raise ValidationError(problem)
    accelerator = Accelerator.objects.filter(name=accelerator_name).first()
    if accelerator is None:
        raise ValidationError({"accelerator": "Choose the catalog GPU the run measured."})
    params = params or locked.params or _snapshot_params(locked.allocation_request)
    if locked.task in ("full_finetune", "pretrain") and not params:
        raise ValidationError(
            {"params": "Give the model's parameter count: utilisation is worked out from it."}
        )
    profile = Profile.objects.filter(is_active=True).first()
    if locked.allocation_request.system_id:
        profile = locked.allocation_request.system.profile
    if profile is None:
        raise ValidationError("No catalog profile is loaded: load one before calibrating.")
    values = trial_measurement_benchmark_values(
        measurement=locked, accelerator=accelerator, params=params
    )
    if values["system"] is not None and values["system"].profile_id != profile.pk:
        values["system"] = None
    benchmark = Benchmark(profile=profile, name=_benchmark_name(locked), **values)
    benchmark.full_clean()
    benchmark.save()
    locked.review = MeasurementReview.ACCEPTED
    locked.reviewed_by = reviewer
    locked.reviewed_at = timezone.now()
    locked.review_note = (note or "").strip()
    locked.accelerator = accelerator.name
    locked.benchmark_name = benchmark.name
    locked.full_clean()
    locked.save()
    return benchmark


def trial_measurement_calibration_problem(measurement: TrialMeasurement) -> str:
    """Why the run's throughput cannot calibrate the catalog ("" when it can). A DPO run whose
    reference model runs every step, or any KTO run (its KL pass), spends forward passes more
    per token than the training benchmarks the catalog reads utilisation from; counted as one
    of them it would understate the GPU for every later job."""
    request = (measurement.allocation_request.estimate_snapshot or {}).get("request") or {}
    workload = trial_measurement_report(measurement).workload
    # What the run itself says (helper 1.1), else what its request was estimated for.
    if workload.training_objective is not None:
        request = {
            "training_objective": workload.training_objective,
            "precompute_reference": workload.precompute_reference,
        }
    if request.get("training_objective") == "grpo":
        return (
            "This request trains with GRPO, whose steps also generate their completions with "
            "vLLM and recompute their log-probabilities: its tokens per second do not measure "
            "the GPU as the catalog's training benchmarks do. A trial run of supervised "
            "fine-tuning calibrates it."
        )
    if request.get("training_objective") == "kto":
        return (
            "This request trains with KTO, whose model also runs a forward pass over its KL "
            "sequences in every step (and its reference model two, unless precomputed): its "
            "tokens per second do not measure the GPU as the catalog's training benchmarks do. "
            "A trial run of supervised fine-tuning calibrates it."
        )
    if request.get("training_objective") == "dpo" and not request.get("precompute_reference"):
        return (
            "This request trains with DPO, whose reference model runs a forward pass in every "
            "step: its tokens per second do not measure the GPU as the catalog's training "
            "benchmarks do. A trial run with precompute_ref_log_probs=True, or of supervised "
            "fine-tuning, calibrates it."
        )
    return ""


def _snapshot_loss(snapshot: dict) -> tuple[int | None, bool | None]:
    """The vocabulary and the fused-or-not loss the request's estimate assumed (the library it
    named, or the one it assumed), which the trial run ran: its benchmark then transfers its
    speed without charging an unfused loss twice. Unknown where the frozen inputs no longer
    parse."""
    try:
        request = EstimateRequest.model_validate((snapshot or {}).get("request") or {})
    except ValueError:
        return None, None
    return run_loss_facts(request)


def _snapshot_params(allocation_request: AllocationRequest) -> int | None:
    result = (allocation_request.estimate_snapshot or {}).get("result") or {}
    value = result.get("params_total")
    return int(value) if isinstance(value, int | float) and value > 0 else None


@transaction.atomic
def trial_measurement_reject(*, measurement: TrialMeasurement, reviewer, note: str = "") -> None:
    """Keep the measurement on the request but out of the catalog (and take it out if it was in)."""
    locked = TrialMeasurement.objects.select_for_update().get(pk=measurement.pk)
    if not reviewer.is_staff:
        raise ValidationError("Only research-computing staff can review measurements.")
    if locked.benchmark_name:
        Benchmark.objects.filter(
            name=locked.benchmark_name, source_kind=BenchmarkSourceKind.INSTITUTE_RUN
        ).delete()
    locked.review = MeasurementReview.REJECTED
    locked.reviewed_by = reviewer
    locked.reviewed_at = timezone.now()
    locked.review_note = (note or "").strip()
    locked.benchmark_name = ""
    locked.save()


def slurm_account_validate(value: str) -> str:
    value = (value or "").strip()
    if value and not SLURM_ACCOUNT.match(value):
        raise ValidationError(
            {
                "slurm_account": "A Slurm account is letters, digits, '.', '_' or '-' "
                "(at most 100 characters), as sacctmgr shows it."
            }
        )
    return value.lower()


@transaction.atomic
def allocation_request_set_slurm_account(
    *, allocation_request: AllocationRequest, reviewer, slurm_account: str
) -> AllocationRequest:
    if not reviewer.is_staff:
        raise ValidationError("Only research-computing staff can set the Slurm account.")
    value = slurm_account_validate(slurm_account)
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    previous = locked.slurm_account
    locked.slurm_account = value
    locked.save(update_fields=["slurm_account", "updated_at"])
    for account in {previous, value} - {""}:
        usage_rematch(account=account)
    return locked


@transaction.atomic
def allocation_request_approve_with_account(
    *,
    allocation_request: AllocationRequest,
    reviewer,
    slurm_account: str = "",
    granted_gpu_hours: int | None = None,
    message: str = "",
    note: str = "",
) -> AllocationRequest:
    """Approve and record the Slurm account in one transaction: the approval e-mail, sent after
    commit, reads the account from the request and tells the researcher to charge jobs to it."""
    value = slurm_account_validate(slurm_account)
    approved = allocation_request_approve(
        allocation_request=allocation_request,
        reviewer=reviewer,
        granted_gpu_hours=granted_gpu_hours,
        message=message,
        note=note,
    )
    if value:
        approved.slurm_account = value
        approved.save(update_fields=["slurm_account", "updated_at"])
        usage_rematch(account=value)  # jobs imported before the approval now count
    return approved
