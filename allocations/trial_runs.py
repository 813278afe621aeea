"""The trial-run measurement file: its schema, strict parsing, and what it means for an estimate.

The file is what `allocations/helper/trial_run.py` writes (schema version 1). Parsing is strict
(unknown fields, wrong types and impossible values are refused) and every problem comes back as
one message naming its field, so a researcher can fix the file rather than guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from advisor.engine.words import plural
from allocations.json_upload import load_json_upload
from catalog_schema import Precision, Task

HELPER_PATH = Path(__file__).resolve().parent / "helper" / "trial_run.py"
HELPER_FILENAME = "trial_run.py"
SCHEMA = "allocation-triage/trial-run"
SCHEMA_VERSION = 1
# A real report is a few kilobytes; anything far larger is not one of ours.
MAX_FILE_BYTES = 256 * 1024

ShortText = Annotated[str, StringConstraints(max_length=200)]
NoteText = Annotated[str, StringConstraints(max_length=2000)]
PackageName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")]
EnvKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Device(_Strict):
    kind: Literal["cuda", "rocm", "xpu", "mps", "cpu"]
    gpu_present: bool
    name: ShortText | None = None
    count: int = Field(ge=0, le=100_000)
    visible_count: int = Field(default=0, ge=0, le=1024)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    cuda_version: ShortText | None = None
    hip_version: ShortText | None = None


class Software(_Strict):
    python: ShortText
    framework: Literal["pytorch", "none"]
    packages: dict[PackageName, ShortText] = Field(default_factory=dict, max_length=50)


class Workload(_Strict):
    task: Task
    precision: Precision
    micro_batch_size: int = Field(ge=1, le=1_000_000)
    seq_len: int = Field(ge=1, le=100_000_000)
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=1_000_000)
    model_name: ShortText | None = None
    params: int | None = Field(default=None, gt=0, le=100_000_000_000_000)
    strategy: ShortText | None = None
    world_size: int = Field(default=1, ge=1, le=1_000_000)
    # Helper 1.1 and later: what the run learned from, and whether DPO's reference
    # log-probabilities were computed before it (the estimate's fields of the same names);
    # "kto" and "grpo" from helper 1.2.
    training_objective: Literal["sft", "dpo", "reference_free_preference", "kto", "grpo"] | None = (
        None
    )
    precompute_reference: bool | None = None


class Measurement(_Strict):
    steps_total: int = Field(ge=0)
    warmup_steps: int = Field(ge=0)
    steady_steps: int = Field(ge=0)
    tokens_processed: int = Field(ge=0)
    steady_tokens: int = Field(ge=0)
    steady_seconds: float = Field(ge=0)
    step_seconds_median: float | None = Field(default=None, ge=0)
    tokens_per_second_per_process: float | None = Field(default=None, gt=0)
    data_parallel_size: int = Field(default=1, ge=1, le=1_000_000)
    # Required: a file without a steady rate has nothing to compare.
    tokens_per_second: float = Field(gt=0, le=1e12)


class Memory(_Strict):
    source: ShortText | None = None
    max_allocated_bytes: int | None = Field(default=None, ge=0, le=10**15)
    max_reserved_bytes: int | None = Field(default=None, ge=0, le=10**15)


class TrialRunReport(_Strict):
    schema_: Literal["allocation-triage/trial-run"] = Field(alias="schema")
    schema_version: Literal[1]
    helper_version: ShortText
    started_at: ShortText
    finished_at: ShortText
    device: Device
    software: Software
    workload: Workload
    recipe: dict[Annotated[str, StringConstraints(max_length=64)], Any] = Field(
        default_factory=dict, max_length=50
    )
    measurement: Measurement
    memory: Memory
    environment: dict[EnvKey, ShortText] = Field(default_factory=dict, max_length=50)
    notes: list[NoteText] = Field(default_factory=list, max_length=20)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def per_gpu_tokens_per_second(self) -> float:
        return self.measurement.tokens_per_second / max(self.device.count, 1)


class TrialRunInvalid(ValueError):
    """The file is not a usable measurement; `errors` holds one message per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


_FRIENDLY = {
    "measurement.tokens_per_second": (
        "no steady tokens per second: the run had too few steps after the warm-up; run more "
        "steps and write the file again"
    ),
}


def _where(loc: tuple) -> str:
    return ".".join("schema" if part == "schema_" else str(part) for part in loc) or "(file)"


def trial_run_parse(raw: bytes) -> TrialRunReport:
    """The validated report, or TrialRunInvalid listing every bad field."""
    if len(raw) > MAX_FILE_BYTES:
        raise TrialRunInvalid(
            [f"The file is {len(raw):,} bytes; a trial-run file is at most {MAX_FILE_BYTES:,}."]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TrialRunInvalid(
            ["The file is not UTF-8 text: upload the JSON the helper wrote."]
        ) from None
    if "\x00" in text or "\\u0000" in text:
        raise TrialRunInvalid(["The file holds a NUL character; it cannot be a helper's JSON."])
    data = load_json_upload(
        text,
        error=TrialRunInvalid,
        not_json="The file is not valid JSON (line {line}, column {column}: {msg}).",
        too_deep="The file is nested too deeply to be a helper's JSON.",
    )
    if not isinstance(data, dict):
        raise TrialRunInvalid(["The file must hold one JSON object, as the helper writes."])
    try:  # a lone surrogate (\ud800) parses but cannot be stored as UTF-8
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise TrialRunInvalid(
            ["The file holds an invalid Unicode escape; it cannot be a helper's JSON."]
        ) from None
    if data.get("schema") != SCHEMA:
        raise TrialRunInvalid(
            [f"schema: expected {SCHEMA!r}; this is not a file written by the trial-run helper."]
        )
    if data.get("schema_version") != SCHEMA_VERSION:
        raise TrialRunInvalid(
            [
                f"schema_version: this site reads version {SCHEMA_VERSION}, the file says "
                f"{data.get('schema_version')!r}; download the helper again from the request page."
            ]
        )
    try:
        report = TrialRunReport.model_validate(data)
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False):
            where = _where(error["loc"])
            message = _FRIENDLY.get(where) or error["msg"]
            errors.append(f"{where}: {message}")
        raise TrialRunInvalid(errors) from None
    except RecursionError:
        raise TrialRunInvalid(["The file is nested too deeply to be a helper's JSON."]) from None
    problems = _consistency(report)
    if problems:
        raise TrialRunInvalid(problems)
    return report


def _consistency(report: TrialRunReport) -> list[str]:
    m = report.measurement
    problems = []
    if m.steady_steps > m.steps_total:
        problems.append("measurement.steady_steps: more steady steps than steps in total.")
    if m.steady_tokens > m.tokens_processed:
        problems.append("measurement.steady_tokens: more steady tokens than tokens in total.")
    if report.device.gpu_present and report.device.count < 1:
        problems.append("device.count: a GPU run needs at least one GPU.")
    allocated, reserved = report.memory.max_allocated_bytes, report.memory.max_reserved_bytes
    if allocated is not None and reserved is not None and allocated > reserved:
        problems.append(
            "memory.max_allocated_bytes: more than max_reserved_bytes, which PyTorch's "
            "caching allocator never reports."
        )
    return problems


# --- Matching the reported GPU to the catalog --------------------------------------------------

_MEMORY = re.compile(r"(\d{2,3})\s*gb", re.IGNORECASE)


def accelerator_guess(name: str | None, candidates: list[tuple[str, str]]) -> str:
    """The catalog key whose display name best matches the GPU name the driver reported.

    `candidates` holds (key, display name). "NVIDIA A100-SXM4-80GB" matches "a100-80-sxm4" by
    model (a100), memory (80) and form factor (sxm4); an unknown GPU matches nothing ("").
    """
    if not name:
        return ""
    words = set(re.findall(r"[a-z]+\d+[a-z]*\d*|\d+", name.lower().replace("-", " ")))
    memory = _MEMORY.search(name)
    best, best_score = "", 0
    for key, display in candidates:
        key_words = set(re.findall(r"[a-z]+\d+[a-z]*\d*|\d+", f"{key} {display}".lower()))
        model_words = {w for w in key_words if re.match(r"[a-z]+\d", w)}
        if not (model_words & words):
            continue  # the model (a100, h100, mi210, ...) must appear in the reported name
        score = 10 * len(model_words & words) + len(key_words & words)
        if memory and memory.group(1) in key_words:
            score += 5
        if score > best_score:
            best, best_score = key, score
    return best


# --- What a measurement means for an estimate -------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Measured against estimated, in the units a reviewer reads."""

    measured_tokens_per_second: float
    measured_gpus: int
    measured_per_gpu: float
    measured_device: str
    gpu_present: bool
    estimated_tokens_per_second: float | None
    estimated_gpus: int | None
    estimated_accelerator: str
    estimated_compute_gpu_hours: float | None
    estimated_requested_gpu_hours: float | None
    total_tokens: float | None
    measured_compute_gpu_hours: float | None
    measured_requested_gpu_hours: float | None
    hours_change_relative: float | None  # measured / estimated compute - 1
    measured_allocated_gb: float | None
    measured_reserved_gb: float | None
    estimated_memory_gb: float | None
    estimated_torch_gb: float | None  # the estimate less the CUDA context torch never sees
    requested_gpu_hours: int | None
    same_setup: list[str]  # how the trial differed from the estimate's workload, in words
    sentence: str
    estimated_workload: str = ""


GB = 1e9


def _total_tokens(request: dict[str, Any]) -> float | None:
    tokens = request.get("tokens")
    if not tokens:
        return None
    if request.get("task") == "inference":
        return float(tokens)
    return float(tokens) * float(request.get("epochs") or 1)


def measurement_compare(
    *, report: TrialRunReport, snapshot: dict[str, Any], requested_gpu_hours: int | None
) -> Comparison:
    """How the measured throughput and memory compare with the frozen estimate.

    GPU hours scale with per-GPU throughput: the run's total tokens divided by the measured
    tokens per second per GPU. The contingency is kept at the estimate's own ratio, so the
    measured figure is comparable with the hours asked for.
    """
    request = snapshot.get("request") or {}
    result = snapshot.get("result") or {}
    rec = result.get("recommendation") or {}
    total = _total_tokens(request)
    per_gpu = report.per_gpu_tokens_per_second
    est_compute = rec.get("gpu_hours")
    est_requested = rec.get("requested_gpu_hours")
    est_gpus = rec.get("num_gpus")
    est_rate = None
    if total and est_compute:
        est_rate = total / (est_compute * 3600) * (est_gpus or 1)
    measured_compute = total / per_gpu / 3600 if total and report.device.gpu_present else None
    measured_requested = None
    if measured_compute is not None and est_compute and est_requested:
        measured_requested = measured_compute * est_requested / est_compute
    change = measured_compute / est_compute - 1 if measured_compute and est_compute else None

    memory = rec.get("memory") or result.get("memory") or {}
    est_total = memory.get("total_bytes") or rec.get("memory_per_gpu_bytes")
    est_torch = (est_total - (memory.get("cuda_context") or 0)) if est_total else None

    differences = _setup_differences(report, request, rec)
    sentence = _sentence(
        report=report,
        measured_compute=measured_compute,
        measured_requested=measured_requested,
        change=change,
        requested=requested_gpu_hours,
    )
    return Comparison(
        estimated_workload=_estimated_workload(request, rec),
        measured_tokens_per_second=report.measurement.tokens_per_second,
        measured_gpus=report.device.count,
        measured_per_gpu=per_gpu,
        measured_device=report.device.name or report.device.kind,
        gpu_present=report.device.gpu_present,
        estimated_tokens_per_second=est_rate,
        estimated_gpus=est_gpus,
        estimated_accelerator=rec.get("accelerator") or "",
        estimated_compute_gpu_hours=est_compute,
        estimated_requested_gpu_hours=est_requested,
        total_tokens=total,
        measured_compute_gpu_hours=measured_compute,
        measured_requested_gpu_hours=measured_requested,
        hours_change_relative=change,
        measured_allocated_gb=_gb(report.memory.max_allocated_bytes),
        measured_reserved_gb=_gb(report.memory.max_reserved_bytes),
        estimated_memory_gb=_gb(est_total),
        estimated_torch_gb=_gb(est_torch),
        requested_gpu_hours=requested_gpu_hours,
        same_setup=differences,
        sentence=sentence,
    )


def _assumed_precision(request: dict[str, Any], rec: dict[str, Any]) -> str | None:
    """The precision the estimate assumed: the request's, else (left open) the type the
    recommended GPU computes in."""
    return request.get("precision") or rec.get("compute_dtype")


def _setup_differences(
    report: TrialRunReport, request: dict[str, Any], rec: dict[str, Any]
) -> list[str]:
    """What the run did differently from what the estimate assumed, each in words. The
    request's batch_size is the global batch of one optimizer step; the run reports its
    micro-batch, accumulation and ranks, so each is compared with its own counterpart."""
    differences = []
    w = report.workload
    recipe = rec.get("recipe") or {}
    measured_global = w.micro_batch_size * w.gradient_accumulation_steps * w.world_size
    for label, measured, wanted in (
        ("task", w.task, request.get("task")),
        ("precision", w.precision, _assumed_precision(request, rec)),
        ("micro-batch", w.micro_batch_size, recipe.get("micro_batch")),
        ("global batch", measured_global, request.get("batch_size")),
        ("sequence length", w.seq_len, request.get("seq_len")),
    ):
        if wanted is not None and wanted != measured:
            differences.append(f"{label} {measured} (the estimate assumed {wanted})")
    est_gpus = rec.get("num_gpus")
    if est_gpus and report.device.count and est_gpus != report.device.count:
        differences.append(
            f"{plural(report.device.count, 'GPU')} (the estimate assumed {est_gpus}); "
            "GPU hours are scaled per GPU, so scaling losses are not included"
        )
    return differences


def _estimated_workload(request: dict[str, Any], rec: dict[str, Any]) -> str:
    """The estimate's workload in one line, as the comparison table shows it."""
    recipe = rec.get("recipe") or {}
    described = ", ".join(
        str(value) if not label else f"{label} {value}"
        for label, value in (
            ("", request.get("task")),
            ("", _assumed_precision(request, rec)),
            ("micro-batch", recipe.get("micro_batch")),
            ("global batch", request.get("batch_size")),
            ("sequence", request.get("seq_len")),
        )
        if value is not None
    )
    if rec.get("accelerator"):
        described = f"{described} on {rec.get('num_gpus') or 1} × {rec['accelerator']}".strip()
    return described


def _gb(value) -> float | None:
    return value / GB if value else None


def _sentence(*, report, measured_compute, measured_requested, change, requested) -> str:
    rate = report.measurement.tokens_per_second
    if not report.device.gpu_present:
        return (
            f"Measured {rate:,.0f} tokens/s on the CPU: a CPU run says nothing about GPU hours, "
            "so the estimate stands. Measure on the trial GPU to compare."
        )
    if measured_compute is None:
        return (
            f"Measured {rate:,.0f} tokens/s on {plural(report.device.count, 'GPU')}; the estimate "
            "has no token count, so GPU hours cannot be worked out from it."
        )
    words = (
        f"At the measured {rate:,.0f} tokens/s the full run takes {measured_compute:,.0f} GPU hours"
    )
    if change is not None:
        if abs(change) < 0.005:
            words += ", as estimated"
        else:
            direction = "less" if change < 0 else "more"
            words += f", {abs(change):.0%} {direction} than estimated".replace("%", " %")
    words += "."
    if measured_requested is not None and requested:
        words += (
            f" With the estimate's contingency that is {measured_requested:,.0f} GPU hours "
            f"against the {requested:,} asked for."
        )
    return words
