"""Checks the estimation engine against published measurements and writes docs/accuracy.md.

    python scripts/accuracy_report.py          # writes docs/accuracy.md, docs/accuracy/summary.json
    python scripts/accuracy_report.py --check  # exit 1 if the committed files are out of date

Inputs, all in docs/accuracy/: measurements.json (the validation set, with a source for every
point), configs/ (the models' config.json), accelerators.json (the GPUs of the measured runs) and
commentary.md (hand-written analysis, included verbatim in the report). No network, no Django.

Each point goes through `advisor.engine.estimate` with the same settings the source used, on a
small catalog that contains just the GPU of the measurement. The catalog has no benchmarks:
feeding the published runs back into the engine's utilisation would make the GPU-hour check
circular. The report puts each estimate next to the measurement and next to two baselines: the
seed's rules of thumb (seed 002: inference 1.2 x model bytes, fine-tuning 4 x) and the method of
`accelerate estimate-memory` (total size for inference, 4 x total size for training with Adam).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.engine import ENGINE_VERSION, estimate  # noqa: E402
from advisor.engine.constants import GPU_HOURS_MARGIN, MEMORY_MARGIN  # noqa: E402
from advisor.engine.device_memory import device_bytes  # noqa: E402
from advisor.engine.memory import COMPONENTS  # noqa: E402
from advisor.engine.models import (  # noqa: E402
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    EstimateRequest,
    EstimateResult,
    MemoryBreakdown,
    NodeTypeSpec,
    Option,
    PartitionSpec,
    SystemSpec,
)

DATA_DIR = ROOT / "docs" / "accuracy"
REPORT_PATH = ROOT / "docs" / "accuracy.md"
SUMMARY_PATH = DATA_DIR / "summary.json"
# The engine's stated memory uncertainty per task family, from the test points' errors.
UNCERTAINTY_PATH = ROOT / "advisor" / "engine" / "uncertainty.json"

# Targets from issue 3, section 7.
MEMORY_MEDIAN_TARGET = 0.10
MEMORY_UNDER_TARGET = -0.10
GPU_HOURS_MEDIAN_TARGET = 0.20
# Targets on test points (issue 13, section 3).
TEST_MEMORY_MEDIAN_TARGET = 0.05
TEST_ADAPTER_BOUND = 0.25
# Targets on GPU-hour test points (issue 14, section 1).
TEST_GPU_HOURS_MEDIAN_TARGET = 0.12
TEST_GPU_HOURS_WORST_TARGET = 0.35
# The stated uncertainty must cover at least this share of each family's test points.
UNCERTAINTY_COVERAGE = 0.80
# Fewer test points than this in a family: the engine keeps its calibration margin.
UNCERTAINTY_MIN_POINTS = 3
FAMILIES = {
    "inference": ("inference",),
    "adapters": ("lora", "qlora"),
    "full": ("full_finetune", "pretrain"),
}

BYTES_PER_UNIT = {"GB": 1e9, "GiB": 2**30, "MiB": 2**20}
BYTES_PER_PARAM = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
SEED_INFERENCE_FACTOR = (
    1.2  # seed 002: "GPU Memory Estimate for Inference (B): 1.2 * (LLM Memory in B)"
)
SEED_TRAINING_FACTOR = (
    4.0  # seed 002: "GPU Memory Estimate for Fine-Tuning (B): 4 * (LLM Memory in B)"
)
ACCELERATE_TRAINING_FACTOR = (
    4.0  # "1x for the model, 1x for the gradients, and 2x for the optimizer"
)


# --- The validation set's schema -----------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Source(_Strict):
    url: str = Field(pattern=r"^https://")
    where: str = Field(min_length=3)


class ModelRef(_Strict):
    id: str
    config: str | None = None  # path relative to docs/accuracy/
    params: int | None = Field(default=None, gt=0)  # fallback when the config cannot be counted

    @model_validator(mode="after")
    def _has_config_or_params(self) -> ModelRef:
        if self.config is None and self.params is None:
            raise ValueError(f"{self.id}: needs a config file or a parameter count")
        return self


class GpuRef(_Strict):
    accelerator: str
    count: int | None = Field(default=None, ge=1)  # None: not published, the engine chooses
    # The run's network between its nodes of eight GPUs where its source names it (a cloud
    # instance type, a cluster's published fabric); None: the reference node's
    # (VALIDATION_INTER_NODE_GBIT_S). Say where it comes from in the point's assumptions.
    inter_node_gbit_s: float | None = Field(default=None, gt=0)


class Measured(_Strict):
    value: float | None = Field(default=None, gt=0)
    unit: Literal["GB", "GiB", "MiB", "GPU-hours"]
    # allocated_peak: torch.cuda.max_memory_allocated (no CUDA context, no allocator cache);
    # nvidia_smi: what nvidia-smi / pynvml shows for the device (context + reserved);
    # allocated_plus_context: max_memory_allocated plus what nvidia-smi shows beyond PyTorch's
    # reserved memory (optimum's benchmark_gptq.py: the CUDA context, no cached blocks);
    # reserved_peak: torch.cuda.max_memory_reserved (PyTorch's cache included, no CUDA context;
    # ms-swift's "GPU Memory");
    # oom / fits: the run did not / did fit; published_total: GPU hours as published;
    # throughput_derived: GPU hours = tokens / measured tokens per second per GPU / 3600.
    what: Literal[
        "allocated_peak",
        "nvidia_smi",
        "allocated_plus_context",
        "reserved_peak",
        "oom",
        "fits",
        "published_total",
        "throughput_derived",
    ]
    as_published: str

    @model_validator(mode="after")
    def _value_matches_what(self) -> Measured:
        needs_value = self.what not in ("oom", "fits")
        if needs_value != (self.value is not None):
            raise ValueError(
                f"measured.value must be {'set' if needs_value else 'null'} for {self.what}"
            )
        return self


class Point(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    kind: Literal["memory", "oom", "fits", "gpu_hours"]
    description: str
    model: ModelRef
    request: dict[str, Any]
    gpu: GpuRef
    measured: Measured
    source: Source
    assumptions: list[str] = Field(default_factory=list)
    not_expressible: list[str] = Field(default_factory=list)
    # full: every setting that moves the number is in the request; partial: some are not (listed
    # in not_expressible, or inferred rather than stated). Targets count only full points.
    expressible: Literal["full", "partial"] = "full"
    # calibration: a constant of the engine may have been set from this point (every point of
    # engine 1.x is one: the engine was tuned against them). test: only ever compared with, never
    # used to set anything; accuracy targets and the stated uncertainty come from test points.
    role: Literal["calibration", "test"]
    # Where the source's own figures contradict this one (a row out of line with its neighbours
    # in the same table), what they say. The point stays in every target; the report also
    # states the figure without such points, so a reader can judge the data and the engine apart.
    source_conflict: str | None = None

    @model_validator(mode="after")
    def _kind_matches_measurement(self) -> Point:
        expected = {
            "memory": ("allocated_peak", "nvidia_smi", "allocated_plus_context", "reserved_peak"),
            "oom": ("oom",),
            "fits": ("fits",),
            "gpu_hours": ("published_total", "throughput_derived"),
        }[self.kind]
        if self.measured.what not in expected:
            raise ValueError(
                f"{self.id}: kind {self.kind} cannot be measured as {self.measured.what}"
            )
        if self.kind != "gpu_hours" and self.gpu.count is None:
            raise ValueError(f"{self.id}: memory points need the GPU count")
        return self


class MeasurementSet(_Strict):
    schema_version: Literal[1]
    description: str
    points: list[Point]

    @model_validator(mode="after")
    def _unique_ids(self) -> MeasurementSet:
        ids = [p.id for p in self.points]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate point ids: {duplicates}")
        return self


def load_measurements(data_dir: Path = DATA_DIR) -> MeasurementSet:
    return MeasurementSet.model_validate_json((data_dir / "measurements.json").read_text())


def load_accelerators(data_dir: Path = DATA_DIR) -> dict[str, AcceleratorSpec]:
    raw = json.loads((data_dir / "accelerators.json").read_text())
    specs = [AcceleratorSpec.model_validate(a) for a in raw["accelerators"]]
    return {s.name: s for s in specs}


# --- The catalog the engine sees ----------------------------------------------------------------


def system_name(accelerator: str) -> str:
    return f"validation-{accelerator}"


# The catalog's shared benchmarks (catalog/data/shared/benchmarks.json) are calibration data: the
# engine takes its utilisation from them here as in the app. Their accelerators under the names
# this validation set uses for the same chips.
BENCHMARKS_PATH = ROOT / "catalog" / "data" / "shared" / "benchmarks.json"
CATALOG_TO_VALIDATION = {
    "a100-40-sxm4": "a100_40gb_sxm4",
    "a100-80-sxm4": "a100_80gb_sxm4",
    "h100-80-sxm5": "h100_80gb_sxm",
    "v100-32-sxm2": "v100_sxm2_16gb",
}


def calibration_benchmarks() -> list[BenchmarkSpec]:
    from catalog.benchmark_file import benchmark_file_read

    out = []
    for _, bench in benchmark_file_read(BENCHMARKS_PATH):
        name = CATALOG_TO_VALIDATION.get(bench.accelerator)
        if name is None:
            continue
        fields = bench.model_dump(exclude={"strategy", "accelerator", "system"})
        out.append(BenchmarkSpec(**fields, accelerator=name, strategy=bench.strategy or None))
    return out


# Inter-node bandwidth per node of eight GPUs, as the published runs had it: one NIC per GPU
# in NVIDIA's reference nodes. DGX A100: eight 200 Gbit/s HDR ports (DGX A100 user guide);
# DGX H100: eight 400 Gbit/s NDR ports (DGX H100 user guide); DGX-1 (V100): four 100 Gbit/s
# EDR ports. Meta's clusters match (Llama 2 paper section 2.2.1: 200 Gbps end-points per GPU
# on RSC and the RoCE cluster; llm-foundry's H100 table: 1600 Gbps RoCE per node).
VALIDATION_INTER_NODE_GBIT_S = {"v100": 400.0, "a100": 1600.0, "h100": 3200.0}
VALIDATION_INTER_NODE_DEFAULT_GBIT_S = 1600.0


def validation_inter_node_gbit_s(name: str) -> float:
    for family, gbit in VALIDATION_INTER_NODE_GBIT_S.items():
        if family in name:
            return gbit
    return VALIDATION_INTER_NODE_DEFAULT_GBIT_S


def validation_catalog(
    accelerators: dict[str, AcceleratorSpec], networks: dict[str, float] | None = None
) -> CatalogSpec:
    """One generous system per accelerator, so capacity limits never decide an estimate; the
    shared benchmarks (calibration data) set utilisation as they do in the app. Nodes of eight
    GPUs with NVLink and one NIC per GPU, like the clusters the published runs used, unless
    `networks` gives an accelerator's run its own (GpuRef.inter_node_gbit_s)."""
    networks = networks or {}
    systems = []
    for name in sorted(accelerators):
        node = NodeTypeSpec(
            name=f"{name}-x8",
            count=1024,
            gpus_per_node=8,
            accelerator=name,
            intra_node_interconnect="nvlink",
            inter_node_interconnect="infiniband",
            inter_node_gbit_s=networks.get(name) or validation_inter_node_gbit_s(name),
        )
        systems.append(
            SystemSpec(
                name=system_name(name),
                display_name=f"Validation system with {accelerators[name].display_name}",
                node_types=[node],
                partitions=[PartitionSpec(name="gpu", node_types=[node.name])],
            )
        )
    return CatalogSpec(
        accelerators=list(accelerators.values()),
        systems=systems,
        benchmarks=calibration_benchmarks(),
    )


# --- Running one point ---------------------------------------------------------------------------


class Outcome(BaseModel):
    """What the engine and the baselines said about one point."""

    point: Point
    error: str | None = None  # why the engine gave no estimate
    params: int | None = None
    params_active: int | None = None  # per token (a mixture of experts' routed share)
    params_source: str = ""
    option: Option | None = None
    memory: MemoryBreakdown | None = None
    engine_bytes: int | None = None  # comparable with the measurement (see normalisation)
    measured_bytes: float | None = None
    seed_bytes: float | None = None
    accelerate_bytes: float | None = None
    capacity_bytes: float | None = None
    gpu_hours: float | None = None
    requested_gpu_hours: float | None = None
    lowest: Option | None = None  # the cheapest fitting option on the measured GPU

    @property
    def compared_field(self) -> str:
        """The engine figure that counts what the measurement counts: `gpu_hours` (compute
        alone) for both kinds. A benchmark's steady throughput is compute alone; a published
        pre-training total is too, in practice: LLaMA-65B's 1.4T tokens at the published 380
        tokens/s/GPU come to 1,023,392 GPU hours against the 1,022,362 reported, so the papers
        count the training run, not restarts or evaluation. The contingency in
        `requested_gpu_hours` is for the researcher's project, not the paper's run (issue 14)."""
        return "gpu_hours"

    @property
    def compared_gpu_hours(self) -> float | None:
        return getattr(self, self.compared_field)

    @property
    def fits(self) -> bool | None:
        return None if self.option is None else self.option.fits

    def rel_error(self, estimate: float | None) -> float | None:
        measured = (
            self.point.measured.value if self.point.kind == "gpu_hours" else self.measured_bytes
        )
        if estimate is None or measured is None:
            return None
        return (estimate - measured) / measured


# A measurement records the recipe its source ran: settings a point leaves out are the ones
# engine 1.x assumed (no checkpointing, AdamW, the batch run whole on each GPU), pinned so the
# recipe search cannot pick another recipe than the one measured.
PINNED_DEFAULTS = {"gradient_checkpointing": False, "optimizer": "adamw"}


def build_request(point: Point, *, use_params: bool) -> EstimateRequest:
    fields = {**PINNED_DEFAULTS, **point.request}
    if fields["task"] != "inference":
        fields.setdefault("micro_batch", fields.get("batch_size", 1))
    fields["model_id"] = point.model.id
    if use_params:
        fields["params"] = point.model.params
    else:
        fields["config"] = json.loads((DATA_DIR / point.model.config).read_text())
    fields["system"] = system_name(point.gpu.accelerator)
    fields["accelerator"] = point.gpu.accelerator
    if point.gpu.count is not None:
        fields["num_gpus"] = point.gpu.count
    return EstimateRequest.model_validate(fields)


def run_engine(
    point: Point, catalog: CatalogSpec
) -> tuple[EstimateResult | None, str | None, bool]:
    """The engine's result, or why not; the flag says whether params replaced the config."""
    attempts = []
    if point.model.config is not None:
        attempts.append(False)
    if point.model.params is not None:
        attempts.append(True)
    errors = []
    for use_params in attempts:
        try:
            return estimate(build_request(point, use_params=use_params), catalog), None, use_params
        except Exception as exc:  # noqa: BLE001  (the report records every failure, it never hides one)
            errors.append(f"{'params' if use_params else 'config'}: {type(exc).__name__}: {exc}")
    return None, "; ".join(errors), False


def pick_option(point: Point, result: EstimateResult) -> Option | None:
    """The option on the measured GPU, with the measured count when the source gives one.

    A point that names its strategy reads that option where the engine offers it; other one-GPU
    points read the plain single-GPU option (those runs offloaded nothing, even where the engine
    would: its estimate of their speed is then still compared with theirs). Otherwise
    the engine's recommendation when it is on the measured GPU; failing that, for a GPU-hour
    point of unknown size, the largest fitting job, as such runs are.
    """
    candidates = [o for o in result.options if o.accelerator == point.gpu.accelerator]
    if point.gpu.count is not None:
        candidates = [o for o in candidates if o.num_gpus == point.gpu.count]
    if not candidates:
        return None
    named = [o for o in candidates if o.strategy == point.request.get("strategy")]
    if named:  # the run's own strategy (CPU offload on one GPU, for one)
        return named[0]
    if point.gpu.count == 1:
        singles = [o for o in candidates if o.strategy == "single"]
        if singles:
            return singles[0]
    rec = result.recommendation
    if rec is not None:
        for option in candidates:
            if (option.system, option.num_gpus, option.strategy) == (
                rec.system,
                rec.num_gpus,
                rec.strategy,
            ):
                return option
    if point.kind == "gpu_hours" and point.gpu.count is None:
        return max(candidates, key=lambda o: (o.fits, o.num_gpus))
    return candidates[0]


def lowest_gpu_hours(point: Point, result: EstimateResult) -> Option | None:
    """The cheapest option on the measured GPU that fits (any size), to separate the compute
    model from the recommender's choice of size and strategy."""
    on_gpu = [o for o in result.options if o.accelerator == point.gpu.accelerator and o.gpu_hours]
    # A one-GPU layout on a pinned larger count is an option that says it cannot run.
    runnable = (o for o in on_gpu if o.fits and not (o.strategy == "single" and o.num_gpus > 1))
    return min(runnable, key=lambda o: o.gpu_hours, default=None)


def _params_from_config(point: Point) -> int | None:
    """Parameter count for the baselines when the engine gave no result."""
    if point.model.config is None:
        return None
    try:
        from advisor.engine.architecture import architecture_from_config

        config = json.loads((DATA_DIR / point.model.config).read_text())
        return architecture_from_config(config).params_total
    except Exception:  # noqa: BLE001  (no count means no baseline for this point, shown as "—")
        return None


def weight_bytes_per_param(point: Point) -> float:
    """Bytes per parameter of the weights as the measured run stored them."""
    request = point.request
    task = request["task"]
    precision = request.get("precision", "bf16")
    if task == "qlora":
        return BYTES_PER_PARAM["int4"]
    if task in ("full_finetune", "pretrain") and request.get("mixed_precision", True):
        return BYTES_PER_PARAM["fp32"]  # AMP keeps fp32 weights
    return BYTES_PER_PARAM[precision]


def baselines(point: Point, params: int) -> tuple[float, float]:
    """(seed rule, accelerate's method) in bytes for the point's task."""
    model_bytes = params * weight_bytes_per_param(point)
    if point.request["task"] == "inference":
        return SEED_INFERENCE_FACTOR * model_bytes, model_bytes
    if point.request["task"] in ("full_finetune", "pretrain"):
        return SEED_TRAINING_FACTOR * model_bytes, ACCELERATE_TRAINING_FACTOR * model_bytes
    # LoRA / QLoRA: the seed's rule does not distinguish adapters from full fine-tuning; the
    # accelerate tool has no adapter mode, so what it can size is the frozen base model.
    return SEED_TRAINING_FACTOR * model_bytes, model_bytes


def comparable_engine_bytes(point: Point, memory: MemoryBreakdown) -> int:
    if point.measured.what == "allocated_peak":
        # The source measured torch.cuda.max_memory_allocated: no CUDA context, no cached blocks.
        return memory.total_bytes - memory.cuda_context - memory.allocator_reserve
    if point.measured.what == "allocated_plus_context":
        return memory.total_bytes - memory.allocator_reserve
    if point.measured.what == "reserved_peak":
        # torch.cuda.max_memory_reserved: the allocator's cache counts, the CUDA context not.
        return memory.total_bytes - memory.cuda_context
    return memory.total_bytes


def evaluate(
    point: Point, catalog: CatalogSpec, accelerators: dict[str, AcceleratorSpec]
) -> Outcome:
    outcome = Outcome(point=point)
    if point.measured.value is not None and point.measured.unit in BYTES_PER_UNIT:
        outcome.measured_bytes = point.measured.value * BYTES_PER_UNIT[point.measured.unit]
    outcome.capacity_bytes = device_bytes(accelerators[point.gpu.accelerator])
    result, error, used_params = run_engine(point, catalog)
    params = point.model.params
    if result is not None:
        params = result.params_total
        outcome.params_active = result.params_active
        outcome.params_source = result.params_source + (
            " (config rejected, typed count)" if used_params else ""
        )
        option = pick_option(point, result)
        if option is None:
            outcome.error = "no option on the measured GPU"
        else:
            outcome.option = option
            same_as_result = result.recommendation is not None and (
                (option.system, option.num_gpus, option.strategy)
                == (
                    result.recommendation.system,
                    result.recommendation.num_gpus,
                    result.recommendation.strategy,
                )
            )
            memory = option.memory or (result.memory if same_as_result else None)
            outcome.memory = memory
            if memory is not None:
                outcome.engine_bytes = comparable_engine_bytes(point, memory)
            elif point.measured.what == "nvidia_smi":
                outcome.engine_bytes = option.memory_per_gpu_bytes
            outcome.gpu_hours = option.gpu_hours
            outcome.requested_gpu_hours = option.requested_gpu_hours
            if point.kind == "gpu_hours":
                outcome.lowest = lowest_gpu_hours(point, result)
    else:
        outcome.error = error.replace(str(ROOT) + "/", "") if error else error
        params = params or _params_from_config(point)
    outcome.params = params
    if params is not None and point.kind != "gpu_hours":
        outcome.seed_bytes, outcome.accelerate_bytes = baselines(point, params)
    return outcome


# --- Statistics ----------------------------------------------------------------------------------


def _median_abs(errors: list[float]) -> float | None:
    return statistics.median(abs(e) for e in errors) if errors else None


def _percentiles(errors: list[float]) -> dict[str, float]:
    if not errors:
        return {}
    ordered = sorted(errors)

    def at(q: float) -> float:
        # Linear interpolation between closest ranks, as numpy's default does.
        pos = (len(ordered) - 1) * q
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    return {
        f"p{int(q * 100):02d}": round(at(q), 4) for q in (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95)
    }


def _method_stats(outcomes: list[Outcome], estimate_of) -> dict[str, Any]:
    errors = [e for o in outcomes if (e := o.rel_error(estimate_of(o))) is not None]
    under = [e for e in errors if e < MEMORY_UNDER_TARGET]
    return {
        "points": len(outcomes),
        "estimated": len(errors),
        "median_abs_error": None if not errors else round(_median_abs(errors), 4),
        "mean_error": None if not errors else round(statistics.fmean(errors), 4),
        "worst_under_estimate": None if not errors else round(min(errors), 4),
        "worst_over_estimate": None if not errors else round(max(errors), 4),
        "under_estimates_beyond_10pct": len(under),
        "signed_error_percentiles": _percentiles(errors),
    }


def summarise(outcomes: list[Outcome], engine_version: str) -> dict[str, Any]:
    memory = [o for o in outcomes if o.point.kind == "memory"]
    memory_full = [o for o in memory if o.point.expressible == "full"]
    ooms = [o for o in outcomes if o.point.kind == "oom"]
    fits_cases = [o for o in outcomes if o.point.kind == "fits"]
    gpu_hours = [o for o in outcomes if o.point.kind == "gpu_hours"]

    engine_full = _method_stats(memory_full, lambda o: o.engine_bytes)
    gpu_hours_full = [o for o in gpu_hours if o.point.expressible == "full"]
    gh_stats = _method_stats(gpu_hours_full, lambda o: o.compared_gpu_hours)
    gh_all = _method_stats(gpu_hours, lambda o: o.compared_gpu_hours)
    run_totals = [o for o in gpu_hours_full if o.point.measured.what == "published_total"]
    gh_totals = _method_stats(run_totals, lambda o: o.requested_gpu_hours)
    gh_totals_compute = _method_stats(run_totals, lambda o: o.gpu_hours)
    gh_benchmarks = _method_stats(
        [o for o in gpu_hours_full if o.point.measured.what == "throughput_derived"],
        lambda o: o.gpu_hours,
    )
    gh_requested = _method_stats(gpu_hours_full, lambda o: o.requested_gpu_hours)
    gh_compute_only = _method_stats(gpu_hours_full, lambda o: o.gpu_hours)
    gh_lowest = _method_stats(
        gpu_hours_full, lambda o: None if o.lowest is None else o.lowest.gpu_hours
    )
    oom_caught = sum(1 for o in ooms if o.fits is False)
    summary = {
        "engine_version": engine_version,
        "points": len(outcomes),
        "memory": {
            "engine_full": engine_full,
            "engine_all": _method_stats(memory, lambda o: o.engine_bytes),
            "seed_rule_full": _method_stats(memory_full, lambda o: o.seed_bytes),
            "seed_rule_all": _method_stats(memory, lambda o: o.seed_bytes),
            "accelerate_full": _method_stats(memory_full, lambda o: o.accelerate_bytes),
            "accelerate_all": _method_stats(memory, lambda o: o.accelerate_bytes),
        },
        "oom": _oom_counts(ooms),
        "fits": {
            "cases": len(fits_cases),
            "engine_predicted_fitting": sum(1 for o in fits_cases if o.fits is True),
        },
        "gpu_hours": {
            "like_for_like": gh_stats,
            "like_for_like_all": gh_all,
            "requested_run_totals": gh_totals,
            "compute_run_totals": gh_totals_compute,
            "compute_benchmarks": gh_benchmarks,
            "compute_only": gh_compute_only,
            "requested": gh_requested,
            "lowest_option": gh_lowest,
        },
    }
    targets = {
        "memory_median_abs_error": _target(
            engine_full["median_abs_error"], lambda v: v <= MEMORY_MEDIAN_TARGET, "<= 10 %"
        ),
        "memory_no_under_estimate_beyond_10pct": _target(
            engine_full["worst_under_estimate"],
            lambda v: v >= MEMORY_UNDER_TARGET,
            ">= -10 %",
            complete=engine_full["estimated"] == engine_full["points"],
        ),
        "oom_cases_predicted_not_fitting": {
            "value": f"{oom_caught}/{len(ooms)}",
            "target": "all",
            "status": "PASS" if ooms and oom_caught == len(ooms) else "MISS",
        },
        "gpu_hours_median_abs_error": _target(
            gh_stats["median_abs_error"], lambda v: v <= GPU_HOURS_MEDIAN_TARGET, "<= 20 %"
        ),
    }
    summary["targets"] = targets
    summary["test"] = test_summary(outcomes)
    return summary


# What a GPU-hour point measures: a published run's total, a library's training speed or its
# inference speed. They fail in different ways, so the report states each apart.
GPU_HOUR_KINDS = ("pre-training run totals", "training speed", "inference speed")


def gpu_hour_kind(point: Point) -> str:
    if point.request["task"] == "inference":
        return "inference speed"
    if point.measured.what == "published_total":
        return "pre-training run totals"
    return "training speed"


def family_of(point: Point) -> str:
    task = point.request["task"]
    return next(name for name, tasks in FAMILIES.items() if task in tasks)


def test_summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """The engine and both baselines on the points used only to test (never to set a
    constant), with issue 13's targets and the uncertainty per task family."""
    tests = [o for o in outcomes if o.point.role == "test"]
    memory = [o for o in tests if o.point.kind == "memory"]
    ooms = [o for o in tests if o.point.kind == "oom"]
    fits_cases = [o for o in tests if o.point.kind == "fits"]
    engine = _method_stats(memory, lambda o: o.engine_bytes)
    conflicted = [o for o in memory if o.point.source_conflict]
    consistent = _method_stats(
        [o for o in memory if not o.point.source_conflict], lambda o: o.engine_bytes
    )
    hours = [o for o in tests if o.point.kind == "gpu_hours"]
    hours_stats = _method_stats(hours, lambda o: o.compared_gpu_hours)
    hours_by_kind = {
        kind: _method_stats(
            [o for o in hours if gpu_hour_kind(o.point) == kind], lambda o: o.compared_gpu_hours
        )
        for kind in GPU_HOUR_KINDS
    }
    # The points whose request expresses every setting that moves the number: the engine's
    # own error, apart from settings the request cannot say (a kernel, a library's fusions).
    hours_full = _method_stats(
        [o for o in hours if o.point.expressible == "full"], lambda o: o.compared_gpu_hours
    )
    targets = _test_targets(memory, hours, ooms, engine, hours_stats)
    return {
        "points": len(tests),
        "memory": {
            "engine": engine,
            "seed_rule": _method_stats(memory, lambda o: o.seed_bytes),
            "accelerate": _method_stats(memory, lambda o: o.accelerate_bytes),
        },
        "oom": _oom_counts(ooms),
        "fits": {
            "cases": len(fits_cases),
            "engine_predicted_fitting": sum(1 for o in fits_cases if o.fits is True),
        },
        "gpu_hours": hours_stats,
        "gpu_hours_by_kind": hours_by_kind,
        "gpu_hours_fully_expressible": hours_full,
        "source_conflicts": {
            "points": [
                {
                    "id": o.point.id,
                    "error": o.rel_error(o.engine_bytes),
                    "why": o.point.source_conflict,
                }
                for o in conflicted
            ],
            "memory_without_them": consistent,
        },
        "uncertainty": uncertainty_by_family(memory, lambda o: o.engine_bytes, MEMORY_MARGIN),
        "gpu_hours_uncertainty": uncertainty_by_family(
            hours, lambda o: o.compared_gpu_hours, GPU_HOURS_MARGIN
        ),
        "targets": targets,
    }


def _test_targets(
    memory: list[Outcome],
    hours: list[Outcome],
    ooms: list[Outcome],
    engine: dict[str, Any],
    hours_stats: dict[str, Any],
) -> dict[str, Any]:
    """Issue 13's and 14's targets on the test points."""
    hour_errors = [e for o in hours if (e := o.rel_error(o.compared_gpu_hours)) is not None]
    worst_hours = max((abs(e) for e in hour_errors), default=None)
    every_hour_point = hours_stats["estimated"] == hours_stats["points"]
    adapter_errors = [
        e
        for o in memory
        if family_of(o.point) == "adapters" and (e := o.rel_error(o.engine_bytes)) is not None
    ]
    worst_adapter = max((abs(e) for e in adapter_errors), default=None)
    caught = sum(1 for o in ooms if o.fits is False)
    return {
        "memory_median_abs_error": _target(
            engine["median_abs_error"], lambda v: v <= TEST_MEMORY_MEDIAN_TARGET, "<= 5 %"
        ),
        "memory_no_under_estimate_beyond_10pct": _target(
            engine["worst_under_estimate"],
            lambda v: v >= MEMORY_UNDER_TARGET,
            ">= -10 %",
            complete=engine["estimated"] == engine["points"],
        ),
        "adapter_points_within_25pct": _target(
            None if worst_adapter is None else round(worst_adapter, 4),
            lambda v: v <= TEST_ADAPTER_BOUND,
            "<= 25 %",
        ),
        "gpu_hours_median_abs_error": _target(
            hours_stats["median_abs_error"],
            lambda v: v <= TEST_GPU_HOURS_MEDIAN_TARGET,
            "<= 12 %",
            complete=every_hour_point,
        ),
        "gpu_hours_worst_abs_error": _target(
            None if worst_hours is None else round(worst_hours, 4),
            lambda v: v <= TEST_GPU_HOURS_WORST_TARGET,
            "<= 35 %",
            complete=every_hour_point,
        ),
        "oom_cases_predicted_not_fitting": {
            "value": f"{caught}/{len(ooms)}",
            "target": "all",
            "status": "NO DATA" if not ooms else ("PASS" if caught == len(ooms) else "MISS"),
        },
    }


def _oom_counts(ooms: list[Outcome]) -> dict[str, int]:
    """Measured out-of-memory cases each method predicts as not fitting."""
    return {
        "cases": len(ooms),
        "engine_predicted_not_fitting": sum(1 for o in ooms if o.fits is False),
        "seed_rule_predicted_not_fitting": sum(
            1 for o in ooms if _rule_fits(o, o.seed_bytes) is False
        ),
        "accelerate_predicted_not_fitting": sum(
            1 for o in ooms if _rule_fits(o, o.accelerate_bytes) is False
        ),
    }


def uncertainty_by_family(outcomes: list[Outcome], estimate_of, margin) -> dict[str, Any]:
    """Per task family, from the errors of `estimate_of` on the family's test points:

    * `relative`: the smallest absolute error covering UNCERTAINTY_COVERAGE of them (the
      "+-" summary the allocation workflow compares with its threshold);
    * `under`, `over`: the signed errors between which the central UNCERTAINTY_COVERAGE of
      them lie, the range a result states. The engine's errors lean one way (it is more often
      too fast than too slow), so a range read from signed errors is narrower on the side the
      engine seldom errs and as wide as the data on the other; `covered` counts the points in
      it.

    With fewer than UNCERTAINTY_MIN_POINTS, the calibration `margin` widened to cover each one
    (both ways); None where there are none."""
    out: dict[str, Any] = {}
    for family in FAMILIES:
        signed = sorted(
            e
            for o in outcomes
            if family_of(o.point) == family and (e := o.rel_error(estimate_of(o))) is not None
        )
        errors = sorted(abs(e) for e in signed)
        relative = under = over = None
        if len(errors) >= UNCERTAINTY_MIN_POINTS:
            relative = _round_out(errors[_rank(len(errors), UNCERTAINTY_COVERAGE)])
            tail = (1 - UNCERTAINTY_COVERAGE) / 2
            # Nearest ranks from each end, so at least UNCERTAINTY_COVERAGE lie between.
            under = -_round_out(-min(signed[_rank(len(signed), tail)], 0.0))
            over = _round_out(max(signed[_rank(len(signed), 1 - tail)], 0.0))
        elif errors:
            # Too few to read a share from: the calibration margin, widened to cover each one.
            relative = _round_out(max(margin.value, errors[-1]))
            under = -_round_out(max(margin.value, -signed[0]))
            over = _round_out(max(margin.value, signed[-1]))
        covered = sum(1 for e in signed if under is not None and under <= e <= over)
        out[family] = {
            "relative": relative,
            "under": under,
            "over": over,
            "points": len(errors),
            "covered": covered,
        }
    return out


def _rank(n: int, share: float) -> int:
    """The index of the nearest-rank `share` quantile of n sorted values."""
    return max(0, math.ceil(round(n * share, 9)) - 1)  # 10 x 0.9 is 9.000000000000002


def _round_out(value: float) -> float:
    """Rounded up to 0.01 %, so the stated figure still covers the point it was read from."""
    return math.ceil(value * 1e4) / 1e4


def uncertainty_file(summary: dict[str, Any]) -> str:
    """advisor/engine/uncertainty.json: what the engine states as its memory uncertainty."""
    doc = {
        "about": "Generated by scripts/accuracy_report.py from the test points of "
        "docs/accuracy/measurements.json (role test): per task family, the relative memory and "
        f"GPU-hour errors that cover {UNCERTAINTY_COVERAGE:.0%} of them; where a family has fewer "
        f"than {UNCERTAINTY_MIN_POINTS} test points, the calibration margin widened to cover each "
        "one; null where it has none (the engine then states its calibration margin).",
        "engine_version": summary["engine_version"],
        "memory": summary["test"]["uncertainty"],
        "gpu_hours": summary["test"]["gpu_hours_uncertainty"],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _test_section(test: dict[str, Any]) -> list[str]:
    """Issue 13: the engine, the seed rules and accelerate's method on the test points."""
    lines = [
        "## Test points (never used to set a constant)",
        "",
        f"{test['points']} point(s) have `role: test`: measurements from sources the engine was "
        "not built on, compared with but never used to set anything. Every other point is a "
        "calibration point (engine 1.x was tuned against them, and a constant may be set from "
        "one). The targets below count test points only.",
        "",
        *_header("Target (test points)", "Required", "Engine", "Status"),
    ]
    labels = {
        "memory_median_abs_error": ("Memory: median absolute error", _abs_pct),
        "memory_no_under_estimate_beyond_10pct": ("Memory: worst under-estimate", _pct),
        "adapter_points_within_25pct": ("LoRA/QLoRA: worst absolute error", _abs_pct),
        "gpu_hours_median_abs_error": ("GPU hours: median absolute error", _abs_pct),
        "gpu_hours_worst_abs_error": ("GPU hours: worst absolute error", _abs_pct),
        "oom_cases_predicted_not_fitting": ("Measured out-of-memory predicted as not fitting", str),
    }
    for key, (label, fmt) in labels.items():
        t = test["targets"][key]
        lines.append(_row(label, t["target"], fmt(t["value"]), f"**{t['status']}**"))
    lines += [
        "",
        *_header(
            "Method (test points)", "Estimated", "Median abs. error", "Worst under", "Worst over"
        ),
    ]
    for label, key in (
        ("Engine", "engine"),
        ("Seed 002 rules (1.2x / 4x)", "seed_rule"),
        ("`accelerate estimate-memory` method", "accelerate"),
    ):
        lines.append(_stats_row(label, test["memory"][key]))
    return (
        lines
        + _source_conflict_lines(test["source_conflicts"])
        + _gpu_hour_test_lines(test)
        + _test_uncertainty_lines(test)
    )


def _stats_row(label: str, st: dict[str, Any]) -> str:
    return _row(
        label,
        f"{st['estimated']}/{st['points']}",
        _abs_pct(st["median_abs_error"]),
        _pct(st["worst_under_estimate"]),
        _pct(st["worst_over_estimate"]),
    )


def _source_conflict_lines(conflicts: dict[str, Any]) -> list[str]:
    if not conflicts["points"]:
        return []
    rest = conflicts["memory_without_them"]
    lines = ["", "Test points their own source contradicts (kept in every target above):"]
    lines += [f"- `{c['id']}` (engine {_pct(c['error'])}): {c['why']}" for c in conflicts["points"]]
    return [
        *lines,
        "",
        f"Without them the engine's memory figures on the other {rest['points']} test "
        f"points: median absolute error {_abs_pct(rest['median_abs_error'])}, worst "
        f"under-estimate {_pct(rest['worst_under_estimate'])}, worst over-estimate "
        f"{_pct(rest['worst_over_estimate'])}.",
    ]


def _gpu_hour_test_lines(test: dict[str, Any]) -> list[str]:
    gh = test["gpu_hours"]
    lines = [
        "",
        f"GPU-hour test points ({gh['estimated']}/{gh['points']} estimated, each compared with "
        "`gpu_hours`): worst under-estimate "
        f"{_pct(gh['worst_under_estimate'])}, worst over-estimate "
        f"{_pct(gh['worst_over_estimate'])}, mean signed error {_pct(gh['mean_error'])}.",
        "",
        "| GPU-hour test points by kind | Points | Median abs. error | Worst under | Worst over |",
        "| --- | --- | --- | --- | --- |",
    ]
    by_kind = [(kind[0].upper() + kind[1:], st) for kind, st in test["gpu_hours_by_kind"].items()]
    full = ("Every setting expressible (`full`), all kinds", test["gpu_hours_fully_expressible"])
    return lines + [_stats_row(label, st) for label, st in [*by_kind, full]]


def _test_uncertainty_lines(test: dict[str, Any]) -> list[str]:
    oom = test["oom"]
    return [
        "",
        f"Out-of-memory test cases predicted as not fitting: engine "
        f"{oom['engine_predicted_not_fitting']}/{oom['cases']}, seed rules "
        f"{oom['seed_rule_predicted_not_fitting']}/{oom['cases']}, accelerate's method "
        f"{oom['accelerate_predicted_not_fitting']}/{oom['cases']}.",
        "",
        "Stated memory uncertainty per task family (`advisor/engine/uncertainty.json`, what the "
        "result's `uncertainty` and the result page's range use): the signed errors between "
        f"which the central {UNCERTAINTY_COVERAGE:.0%} of the family's test points lie (error = "
        "(estimate - measured) / measured, so a range of -a to +b puts the measurement between "
        "estimate / (1 + b) and estimate / (1 - a)), with the absolute error covering "
        f"{UNCERTAINTY_COVERAGE:.0%} of them beside it; with fewer than "
        f"{UNCERTAINTY_MIN_POINTS}, the calibration margin (+-{MEMORY_MARGIN.value:.0%}) "
        "widened to cover every one.",
        "",
        *_header("Family", "Test points", "Uncertainty", "Covered"),
        *_uncertainty_rows(test["uncertainty"]),
        "",
        "Stated GPU-hour uncertainty per task family, the same way (the calibration margin is "
        f"+-{GPU_HOURS_MARGIN.value:.0%}):",
        "",
        *_header("Family", "Test points", "Uncertainty", "Covered"),
        *_uncertainty_rows(test["gpu_hours_uncertainty"]),
        "",
    ]


def _uncertainty_rows(by_family: dict[str, Any]) -> list[str]:
    rows = []
    for family, u in by_family.items():
        value = "calibration margin (no test points)"
        if u["relative"] is not None:
            signed = f"{u['under'] * 100:+.1f} % to {u['over'] * 100:+.1f} %"
            value = f"{signed} (+-{u['relative'] * 100:.1f} %)"
            if u["points"] < UNCERTAINTY_MIN_POINTS:
                value += " (margin widened to cover them all)"
        rows.append(_row(family, u["points"], value, f"{u['covered']}/{u['points']}"))
    return rows


def _target(value: float | None, ok, target: str, *, complete: bool = True) -> dict[str, Any]:
    status = "PASS" if value is not None and complete and ok(value) else "MISS"
    return {"value": value, "target": target, "status": status}


# --- The report ----------------------------------------------------------------------------------


METHOD_TEXT = """\
## How the validation set was built

- Every point is a published measurement with its source (URL and section or table) in
  `docs/accuracy/measurements.json`, which the script validates with pydantic before use.
- Points record the settings the source states; `assumptions` say what it does not state and
  how the gap was filled (from the source's own scripts where possible); `not_expressible` lists
  settings `EstimateRequest` has no field for. A point is `full` when nothing that moves the
  number is missing, else `partial`. Memory targets count `full` points only; every point is shown.
- Model shapes come from each model's config.json (`docs/accuracy/configs/`; copies of
  `/work/shared/hf-configs/` where one exists, else transcribed from the public file). A typed
  parameter count is used only where the engine rejects the config; the parameter table below
  shows what the engine counted and how.
- The engine runs on a catalog with one system per GPU of the measurements (specs from
  `docs/accuracy/accelerators.json`), nodes of eight GPUs with NVLink and the reference
  network of their generation (one NIC per GPU, as DGX nodes and Meta's clusters have) unless a
  point states its run's own (`gpu.inter_node_gbit_s`: Falcon's P4d instances, 400 Gbit/s a
  node), and the catalog's shared benchmarks, which are calibration data: a test point's own
  run is never among them. The option read is the one on the measured GPU with the measured
  GPU count.
- Sources: Hugging Face Transformers docs (BERT-large on a V100 with the Trainer; OctoCoder
  generation in bf16/int8/int4), LitGPT's resource tables (LoRA, QLoRA and inference on an A100
  40GB, including out-of-memory rows), the PEFT README's memory table (A100 80GB), the QLoRA
  paper (65B on one 48 GB GPU), published pretraining GPU-hour totals (Llama 1, 2, 3,
  MPT-7B, TinyLlama, BLOOM) and MosaicML's llm-foundry throughput tables (GPU hours for 10B
  tokens at the measured tokens/s/GPU).
- Test points added in the fifth pass (27, all `role: test`), from four sources the engine had
  never used, chosen by a rule fixed before the engine was run on them: *every* row of the
  named table that the request can state, whatever its error. (1) The Qwen2.5 speed benchmark
  (Transformers tables): every BF16 row of the 0.5B and 7B models, the two whose config.json
  the team holds, at each input length (1, 6144, 14336, 30720; 2048 new tokens,
  `max_memory_allocated` in GiB). (2) optimum's GPTQ benchmark README, generation tables: every
  row of Llama-2-13b-chat in fp16 and with bitsandbytes 4-bit, batch 1-16 (GPTQ rows left out:
  a request cannot say GPTQ). (3) The Hugging Face blog "Accelerate Large Model Training using
  PyTorch FSDP", Table 2 (GPT-2 XL full fine-tuning on 24 GB Titan RTX cards): every row, three
  measured out-of-memory cases and three largest batches that ran. (4) The Hugging Face blog
  "Fit More and Train Faster With ZeRO", section "Fitting A Huge Model Onto One GPU" (t5-3b on
  one RTX 3090): every outcome it states (OOM without DeepSpeed at batch 1, batch 20 with
  ZeRO-Offload, OOM at batch 30).

## Normalisation

- Units: `GB` = 1e9 bytes, `GiB` = 2^30, `MiB` = 2^20. pynvml/nvidia-smi figures printed as
  "MB" are `used // 1024**2`, so MiB. LitGPT prints `max_memory_allocated() / 1e9` (GB); the
  HF OctoCoder page divides by 1024^3 (GiB). Tables show decimal GB.
- What was measured: `allocated_peak` (torch.cuda.max_memory_allocated) has no CUDA context and
  no allocator cache, so it is compared with the engine's `total_bytes - cuda_context -
  allocator_reserve`; `nvidia_smi` is compared with `total_bytes` (the contract says total_bytes is
  what nvidia-smi shows); `allocated_plus_context` (optimum's GPTQ benchmark: peak allocated plus
  the memory nvidia-smi shows outside PyTorch's reserve) with `total_bytes - allocator_reserve`;
  `reserved_peak` (torch.cuda.max_memory_reserved, ms-swift's "GPU Memory": PyTorch's cached
  blocks but no CUDA context) with `total_bytes - cuda_context`.
  The baselines are single numbers and are compared with the measurement as published.
- Seed rules (seed 002): model bytes = parameters x bytes of the dtype the run stored its weights
  in (fp32 4, 16-bit 2, int8 1, 4-bit 0.5; AMP full fine-tuning keeps fp32 weights). Inference
  1.2 x model bytes; any training 4 x model bytes.
- `accelerate estimate-memory`: "Total Size" (parameters x dtype bytes) for inference and
  "Training using Adam" = 4 x Total Size for full training. It has no adapter mode, so for LoRA
  and QLoRA it is the frozen base's Total Size.
- Both baselines use the engine's parameter count, so the comparison is about method, not counting.
- Fit checks compare with the memory the measured GPU reports (its label read as GiB, less
  ECC and driver reserve where nvidia-smi shows them: `advisor/engine/device_memory.py`).
- GPU hours: both kinds are compared with `gpu_hours`, the compute alone (issue 14). A
  throughput benchmark (tokens per second over a few steps) is compute alone; so, in practice,
  is a published pre-training total: LLaMA-65B's 1.4T tokens at the published 380
  tokens/s/GPU come to 1,023,392 GPU hours against the 1,022,362 reported. The contingency in
  `requested_gpu_hours` is for the researcher's project, not the paper's run. Both columns are
  shown for every point, and the summary above gives every other reading.
- The engine runs with the catalog's shared benchmarks (`catalog/data/shared/benchmarks.json`),
  which include llm-foundry's throughput tables: the `foundry-*` points are therefore
  reproduced from their own table (calibration, not evidence), and GPU-hour accuracy is
  judged on the `test-gpuh-*` points: published pre-training totals (GPUs x days or GPU
  hours) of runs whose stacks set no constant and gave no catalog benchmark.

"""


def _gb(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e9:.2f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.0f} %"


def _abs_pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _fit_word(fits: bool | None) -> str:
    return {True: "fits", False: "does not fit", None: "—"}[fits]


def _hours(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _settings(point: Point) -> str:
    r = point.request
    # No precision given: the checkpoint as published (gpt-oss's MXFP4 experts, an fp8 model).
    parts = [r["task"], r.get("precision", "as published")]
    if r["task"] != "inference" and r["task"] != "pretrain":
        parts.append("AMP" if r.get("mixed_precision", True) else "pure")
    parts.append(f"b{r.get('batch_size', 1)}")
    parts.append(f"s{r.get('seq_len', 2048)}")
    if r.get("gradient_checkpointing"):
        parts.append("GC")
    if r.get("optimizer", "adamw") != "adamw" and r["task"] != "inference":
        parts.append(r["optimizer"])
    if r.get("lora_rank"):
        parts.append(f"r{r['lora_rank']}")
    if r.get("tokens"):
        parts.append(f"{r['tokens'] / 1e9:,.0f}B tok")
    count = point.gpu.count
    parts.append(f"{count if count else '?'}x {point.gpu.accelerator}")
    return ", ".join(parts)


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _header(*cells: str) -> list[str]:
    return [_row(*cells), _row(*("---" for _ in cells))]


def _target_rows(t: dict[str, Any]) -> list[str]:
    rows = _header("Target", "Required", "Engine", "Status")
    for key, label, fmt in (
        ("memory_median_abs_error", "Memory: median absolute error (full points)", _abs_pct),
        (
            "memory_no_under_estimate_beyond_10pct",
            "Memory: worst under-estimate (full points)",
            _pct,
        ),
        (
            "oom_cases_predicted_not_fitting",
            "Measured out-of-memory cases predicted as not fitting",
            str,
        ),
        ("gpu_hours_median_abs_error", "GPU hours: median absolute error (full points)", _abs_pct),
    ):
        target = t[key]
        rows.append(_row(label, target["target"], fmt(target["value"]), f"**{target['status']}**"))
    return rows


def _baseline_rows(mem: dict[str, Any]) -> list[str]:
    rows = _header(
        "Method",
        "Estimated (full / all)",
        "Median abs. error, full",
        "Worst under, full",
        "Under -10 %, full",
        "Median abs. error, all",
        "Worst under, all",
    )
    for label, key in (
        ("Engine", "engine"),
        ("Seed 002 rules (1.2x / 4x)", "seed_rule"),
        ("`accelerate estimate-memory` method", "accelerate"),
    ):
        full, every = mem[f"{key}_full"], mem[f"{key}_all"]
        rows.append(
            _row(
                label,
                f"{full['estimated']}/{full['points']} / {every['estimated']}/{every['points']}",
                _abs_pct(full["median_abs_error"]),
                _pct(full["worst_under_estimate"]),
                full["under_estimates_beyond_10pct"],
                _abs_pct(every["median_abs_error"]),
                _pct(every["worst_under_estimate"]),
            )
        )
    return rows


def _memory_rows(outcomes: list[Outcome]) -> list[str]:
    rows = _header(
        "Point",
        "Settings",
        "Measured (as published)",
        "Measured GB",
        "Engine GB",
        "Error",
        "Seed rule GB",
        "Error",
        "Accelerate GB",
        "Error",
        "Expr.",
    )
    for o in outcomes:
        m = o.point.measured
        rows.append(
            _row(
                o.point.id,
                _settings(o.point),
                f"{m.value:g} {m.unit} ({m.what})",
                _gb(o.measured_bytes),
                "error" if o.error else _gb(o.engine_bytes),
                _pct(o.rel_error(o.engine_bytes)),
                _gb(o.seed_bytes),
                _pct(o.rel_error(o.seed_bytes)),
                _gb(o.accelerate_bytes),
                _pct(o.rel_error(o.accelerate_bytes)),
                o.point.expressible,
            )
        )
    return rows


def _fit_rows(outcomes: list[Outcome]) -> list[str]:
    rows = _header(
        "Point",
        "Settings",
        "Measured",
        "GPU GB",
        "Engine GB (total)",
        "Engine",
        "Seed rule GB",
        "Seed rule",
        "Accelerate GB",
        "Accelerate",
    )
    for o in outcomes:
        total = None if o.memory is None else o.memory.total_bytes
        if total is None and o.option is not None:
            total = o.option.memory_per_gpu_bytes
        rows.append(
            _row(
                o.point.id,
                _settings(o.point),
                "out of memory" if o.point.kind == "oom" else "fits",
                _gb(o.capacity_bytes),
                _gb(total),
                "error" if o.error else _fit_word(o.fits),
                _gb(o.seed_bytes),
                _fit_word(_rule_fits(o, o.seed_bytes)),
                _gb(o.accelerate_bytes),
                _fit_word(_rule_fits(o, o.accelerate_bytes)),
            )
        )
    return rows


def _layout(option: Option) -> str:
    """The strategy, with the tensor-parallel degree and pipeline stages where there are any
    ("tensor_parallel 4x4": TP 4 x PP 4)."""
    recipe = option.recipe
    if recipe is None or option.strategy != "tensor_parallel" or recipe.tp <= 1:
        return option.strategy
    return f"{option.strategy} {recipe.tp}" + (f"x{recipe.pp}" if recipe.pp > 1 else "")


def _gpu_hour_rows(outcomes: list[Outcome]) -> list[str]:
    rows = _header(
        "Point",
        "Settings",
        "Published GPU-h",
        "Engine gpu_hours",
        "Error",
        "requested_gpu_hours",
        "Error",
        "Engine's job (GPUs, strategy TP x PP, fits)",
        "Lowest gpu_hours on this GPU (GPUs, strategy)",
        "Error",
        "Target compares",
    )
    for o in outcomes:
        job = lowest = "—"
        if o.error:
            job = "error"
        elif o.option is not None:
            job = f"{o.option.num_gpus}, {_layout(o.option)}, {_fit_word(o.option.fits)}"
        if o.lowest is not None:
            lowest = f"{_hours(o.lowest.gpu_hours)} ({o.lowest.num_gpus}, {_layout(o.lowest)})"
        elif o.option is not None:
            lowest = "no job fits"
        rows.append(
            _row(
                o.point.id,
                _settings(o.point),
                _hours(o.point.measured.value),
                _hours(o.gpu_hours),
                _pct(o.rel_error(o.gpu_hours)),
                _hours(o.requested_gpu_hours),
                _pct(o.rel_error(o.requested_gpu_hours)),
                job,
                lowest,
                _pct(o.rel_error(None if o.lowest is None else o.lowest.gpu_hours)),
                o.compared_field,
            )
        )
    return rows


def _miss_lines(outcomes: list[Outcome]) -> list[str]:
    misses = []
    for o in outcomes:
        kind, pid = o.point.kind, f"`{o.point.id}`"
        if o.error:
            misses.append(f"- {pid}: no estimate ({o.error}).")
        elif kind == "memory":
            err = o.rel_error(o.engine_bytes)
            if err is not None and abs(err) > MEMORY_MEDIAN_TARGET:
                misses.append(f"- {pid} ({o.point.expressible}): {_pct(err)}. {_breakdown(o)}")
        elif kind == "oom" and o.fits is not False:
            said = _fit_word(o.fits)
            misses.append(f"- {pid}: measured out of memory, engine says {said}. {_breakdown(o)}")
        elif kind == "fits" and o.fits is not True:
            said = _fit_word(o.fits)
            misses.append(f"- {pid}: measured to fit, engine says {said}. {_breakdown(o)}")
        elif kind == "gpu_hours":
            err = o.rel_error(o.compared_gpu_hours)
            if err is not None and abs(err) > GPU_HOURS_MEDIAN_TARGET:
                misses.append(
                    f"- {pid}: GPU hours {_pct(err)} (`{o.compared_field}`)."
                    f"{_implied_throughput(o)}"
                )
    return misses or ["No point is off by more than its target."]


def render_report(outcomes: list[Outcome], summary: dict[str, Any], commentary: str) -> str:
    by_kind: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_kind.setdefault(o.point.kind, []).append(o)
    oom, fits, gh = summary["oom"], summary["fits"], summary["gpu_hours"]
    lines = [
        "# Accuracy of the estimation engine",
        "",
        "Generated by `scripts/accuracy_report.py` from `docs/accuracy/measurements.json`; do not",
        "edit by hand (`python scripts/accuracy_report.py` regenerates it; `--check` says whether",
        "it is current).",
        f"Engine version: `{summary['engine_version']}`. Points: {summary['points']}.",
        "",
        "## Targets (issue 3, section 7)",
        "",
        *_target_rows(summary["targets"]),
        "",
        *_test_section(summary["test"]),
        "## Against the baselines (every point, calibration and test)",
        "",
        "Memory points the request can express fully (`full`), and all memory points (`all`).",
        "",
        *_baseline_rows(summary["memory"]),
        "",
        f"Out-of-memory cases predicted as not fitting: engine "
        f"{oom['engine_predicted_not_fitting']}/{oom['cases']}, seed rules "
        f"{oom['seed_rule_predicted_not_fitting']}/{oom['cases']}, accelerate's method "
        f"{oom['accelerate_predicted_not_fitting']}/{oom['cases']}. Cases measured to fit that the "
        f"engine also predicts as fitting: {fits['engine_predicted_fitting']}/{fits['cases']}.",
        f"GPU hours (full points): median absolute error "
        f"{_abs_pct(gh['like_for_like']['median_abs_error'])} like for like (the target): "
        f"{_abs_pct(gh['requested_run_totals']['median_abs_error'])} for `requested_gpu_hours` "
        "against published run totals, "
        f"{_abs_pct(gh['compute_benchmarks']['median_abs_error'])} for `gpu_hours` against "
        "throughput benchmarks. Other readings: "
        f"{_abs_pct(gh['compute_only']['median_abs_error'])} for `gpu_hours` against every point "
        f"({_abs_pct(gh['compute_run_totals']['median_abs_error'])} on run totals); "
        f"{_abs_pct(gh['requested']['median_abs_error'])} for `requested_gpu_hours` against every "
        f"point; {_abs_pct(gh['like_for_like_all']['median_abs_error'])} like for like with the "
        "planned TinyLlama figure included; "
        f"{_abs_pct(gh['lowest_option']['median_abs_error'])} for the lowest `gpu_hours` of any "
        "fitting job on the measured GPU. The baselines give no GPU hours.",
        "",
        *METHOD_TEXT.splitlines(),
        "## Memory points",
        "",
        "Error = (estimate - measured) / measured. GB are decimal.",
        "",
        *_memory_rows(by_kind.get("memory", [])),
        "",
        "## Out-of-memory and fit cases",
        "",
        *_fit_rows(by_kind.get("oom", []) + by_kind.get("fits", [])),
        "",
        "## GPU-hour points",
        "",
        *_gpu_hour_rows(by_kind.get("gpu_hours", [])),
        "",
        "## Where the engine is wrong",
        "",
        *_miss_lines(outcomes),
        "",
        "### Analysis",
        "",
        *commentary.strip().splitlines(),
        "",
        "## Parameter counts the engine used",
        "",
        *_params_rows(outcomes),
        "",
        "## Sources",
        "",
    ]
    seen: dict[str, list[str]] = {}
    for o in outcomes:
        seen.setdefault(o.point.source.url, []).append(o.point.id)
    lines.extend(f"- <{url}>: {', '.join(ids)}" for url, ids in seen.items())
    lines.append("")
    return "\n".join(lines)


def _params_rows(outcomes: list[Outcome]) -> list[str]:
    rows = _header("Model", "Parameters", "How the engine counted them")
    seen = set()
    for o in outcomes:
        if o.point.model.id in seen:
            continue
        seen.add(o.point.model.id)
        count = "—" if o.params is None else f"{o.params:,}"
        rows.append(_row(o.point.model.id, count, o.params_source or "—"))
    return rows


def _rule_fits(o: Outcome, rule_bytes: float | None) -> bool | None:
    if rule_bytes is None or o.capacity_bytes is None:
        return None
    return rule_bytes <= o.capacity_bytes


def _breakdown(o: Outcome) -> str:
    m = o.memory
    if m is None:
        return ""
    parts = [f"{name} {getattr(m, name) / 1e9:.2f}" for name in COMPONENTS if getattr(m, name)]
    return f"Engine components (GB): {', '.join(parts)}; total {m.total_bytes / 1e9:.2f}."


def _implied_throughput(o: Outcome) -> str:
    """The throughput the published total implies, to compare with the engine's assumption:
    6 N D for training, 2 N D (a forward pass) for inference, N the parameters each token
    uses (a mixture of experts' active ones)."""
    tokens = o.point.request.get("tokens")
    params = o.params_active or o.params
    if params is None or not tokens:
        return ""
    passes, formula = (2, "2 N D") if o.point.request.get("task") == "inference" else (6, "6 N D")
    # measured.value is GPU hours: the FLOPs over them are per GPU already.
    per_gpu = passes * params * tokens / (o.point.measured.value * 3600) / 1e12
    return (
        f" The published total implies {per_gpu:.0f} TFLOP/s per GPU ({formula}, N the "
        "parameters a token uses, attention not counted)."
    )


# --- Entry point ---------------------------------------------------------------------------------


def catalog_for(
    point: Point, catalog: CatalogSpec, accelerators: dict[str, AcceleratorSpec]
) -> CatalogSpec:
    """The validation catalog, with the run's own network where its source names one."""
    gbit = point.gpu.inter_node_gbit_s
    if gbit is None:
        return catalog
    return validation_catalog(accelerators, {point.gpu.accelerator: gbit})


def generate(data_dir: Path = DATA_DIR) -> tuple[str, str, str]:
    """The report, the summary JSON and the engine's uncertainty file, as text."""
    measurements = load_measurements(data_dir)
    accelerators = load_accelerators(data_dir)
    catalog = validation_catalog(accelerators)
    outcomes = [
        evaluate(p, catalog_for(p, catalog, accelerators), accelerators)
        for p in measurements.points
    ]
    engine_version = ENGINE_VERSION
    summary = summarise(outcomes, engine_version)
    commentary_path = data_dir / "commentary.md"
    commentary = commentary_path.read_text() if commentary_path.exists() else "(no commentary yet)"
    report = render_report(outcomes, summary, commentary)
    return (
        report,
        json.dumps(summary, indent=2, sort_keys=True) + "\n",
        uncertainty_file(summary),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed files are out of date"
    )
    args = parser.parse_args(argv)
    report, summary, uncertainty = generate()
    outputs = ((REPORT_PATH, report), (SUMMARY_PATH, summary), (UNCERTAINTY_PATH, uncertainty))
    if args.check:
        stale = [
            str(path.relative_to(ROOT))
            for path, text in outputs
            if not path.exists() or path.read_text() != text
        ]
        if stale:
            print(
                f"out of date: {', '.join(stale)}; run python scripts/accuracy_report.py",
                file=sys.stderr,
            )
            return 1
        print("docs/accuracy.md and docs/accuracy/summary.json are current")
        return 0
    for path, text in outputs:
        path.write_text(text)
    print("wrote " + ", ".join(str(path.relative_to(ROOT)) for path, _ in outputs))
    for name, target in json.loads(summary)["targets"].items():
        print(f"  {name}: {target['value']} (target {target['target']}): {target['status']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
