"""The catalog as the engine sees it: frozen pydantic specs, no Django.

These are the one definition of a catalog entry. The engine takes them (re-exported by
advisor.engine.models); catalog.data_schema extends each with what a data file adds (sources,
notes, dates) and the stricter checks input needs; advisor.engine_catalog builds them from the
catalog's rows with `Spec.model_validate(row, from_attributes=True)`.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from catalog_schema.enums import (
    DEFAULT_TIE_BREAKERS,
    BenchmarkOutcome,
    DataSensitivity,
    InterNodeInterconnect,
    IntraNodeInterconnect,
    Precision,
    SystemKind,
    SystemStatus,
    Task,
    TieBreaker,
)


def _blank_is_none(value: Any) -> Any:
    return None if value == "" else value


# The catalog's rows store "no value" in text fields as "" (Django's convention), the specs as
# None: a spec field marked BlankIsNone reads "" as None, whichever side it is built from.
BlankIsNone = BeforeValidator(_blank_is_none)


class Frozen(BaseModel):
    """Immutable, and refusing unknown fields, so a typo never silently drops a value."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class AcceleratorSpec(Frozen):
    name: str  # catalog key, e.g. "a100-80-sxm4"
    display_name: str
    vendor: str
    memory_gb: float  # decimal GB as vendors state it (80 GB = 80e9 bytes)
    memory_bandwidth_gb_s: float
    # Dense peaks (never with sparsity) in TFLOP/s; None where the hardware lacks the precision.
    fp64_tflops: float | None = None
    fp32_tflops: float | None = None  # non-tensor
    tf32_tflops: float | None = None
    fp16_tflops: float | None = None  # tensor, fp32 accumulate
    bf16_tflops: float | None = None
    int8_tops: float | None = None
    fp16_nontensor_tflops: float | None = None
    bf16_supported: bool = False
    tensor_cores: bool = False
    tdp_w: float | None = None


class NodeTypeSpec(Frozen):
    name: str
    count: int
    gpus_per_node: int
    accelerator: str  # AcceleratorSpec.name
    cpu_cores: int | None = None
    ram_gb: float | None = None
    intra_node_interconnect: IntraNodeInterconnect = "pcie"
    inter_node_interconnect: InterNodeInterconnect = "none"
    inter_node_gbit_s: float | None = None
    # Cloud VM sizes carry their own price (in the system's currency), overriding
    # SystemSpec.price_per_gpu_hour; count 0 on a cloud system means "on demand" rather than
    # "none".
    price_per_gpu_hour: float | None = None
    status: SystemStatus = "active"  # a retired VM size / node type is never recommended


class PartitionSpec(Frozen):
    name: str  # catalog key, unique within the system
    # The value for `#SBATCH --partition`; None: the system's default, leave the option out.
    slurm_partition: Annotated[str | None, BlankIsNone] = None
    node_types: list[str]  # NodeTypeSpec.name
    max_wall_hours: float | None = None
    max_gpus_per_job: int | None = None
    max_nodes_per_job: int | None = None
    # How to ask for GPUs, with {n} for the count: "--gres=gpu:{n}", "--gpus={n}".
    gpu_request: str = "--gres=gpu:{n}"
    constraint: Annotated[str | None, BlankIsNone] = None  # "-C a100_80" / "--constraint=..."
    qos: Annotated[str | None, BlankIsNone] = None
    notes: str = ""


class CurrencyValueSpec(Frozen):
    """What one unit of a system's charge currency is worth in another currency (0.01 USD per
    UVA Service Unit), so the ranking can compare its charges with the profile's."""

    per_unit: float = Field(gt=0)
    currency: str  # ISO 4217 code of the currency it converts to, e.g. "USD"
    source: str = ""
    as_of: dt.date | None = None  # when the value was read or set


class SystemSpec(Frozen):
    name: str  # catalog key, e.g. "baskerville"
    display_name: str
    operator: str = ""
    kind: SystemKind = "hpc_batch"
    scheduler: str = "slurm"
    status: SystemStatus = "active"
    status_note: str = ""
    notebooks: bool = False
    data_sensitivity: list[DataSensitivity] = Field(default_factory=lambda: ["public"])
    trial_gpu_hours: float | None = None
    minimum_gpu_hours: float | None = None  # the smallest allocation the site grants
    price_per_gpu_hour: float | None = None
    currency: str = ""  # of the system's and its node types' prices
    currency_value: CurrencyValueSpec | None = None  # what one unit of `currency` is worth
    typical_queue_wait_hours: float | None = None
    access_route: str = ""
    queue_guidance: str = ""
    modules: list[str] = Field(default_factory=list)  # e.g. ["module load PyTorch/2.1"]
    container: Annotated[str | None, BlankIsNone] = None
    tooling: dict[str, bool | None] = Field(default_factory=dict)
    # Tool -> where the cell comes from and as of when ("SEED-TURING, 2024-05").
    tooling_sources: dict[str, str] = Field(default_factory=dict)
    node_types: list[NodeTypeSpec] = Field(default_factory=list)
    partitions: list[PartitionSpec] = Field(default_factory=list)


class BenchmarkSpec(Frozen):
    """A measured run, used to calibrate utilisation (achieved / dense peak)."""

    name: str | None = None  # the catalog's id for it; options name it as their source
    accelerator: str
    system: str | None = None
    model: str
    params: int | None = None
    task: Annotated[Task | None, BlankIsNone] = None
    strategy: Annotated[str | None, BlankIsNone] = None
    precision: Annotated[Precision | None, BlankIsNone] = None
    num_gpus: int = 1
    batch_size: int | None = None
    seq_len: int | None = None
    tokens_per_second: float | None = None  # whole job
    peak_memory_gb: float | None = None
    # Model FLOPs utilisation, when the source states it: of the dense 16-bit tensor peak, or of
    # the fp32 peak for an fp32 run (its matmuls ran on the CUDA cores; speed.py).
    mfu: float | None = None
    # The model's shape, when the source gives it (else inferred from params).
    hidden_size: int | None = None
    num_layers: int | None = None
    gradient_checkpointing: bool | None = None
    # The run's vocabulary and whether its loss was fused (flash-attention's or Liger's
    # cross-entropy, which never moves fp32 logits): an unfused loss's traffic is part of the
    # run's speed (advisor/engine/roofline.py, loss_traffic). Unknown reads as fused.
    vocab_size: int | None = None
    fused_loss: bool | None = None
    outcome: BenchmarkOutcome = "completed"
    notes: str = ""
    source: str


class ChargeRateSpec(Frozen):
    """What the institute charges (or counts) per GPU hour on an accelerator, for HPC systems
    that have no price of their own: a published charge, a committee's decision, or the
    documented cloud-equivalent default a profile's data file gives (catalog/data/README.md)."""

    accelerator: str
    rate_per_gpu_hour: float = Field(ge=0)
    currency: str = ""
    source: str = ""
    as_of: dt.date | None = None  # when the rate was set or its price read


class RankingPolicySpec(Frozen):
    """A profile's ranking: the order of the tie-breakers after "feasible and supported", and
    the notional charge rates for HPC GPU hours (an accelerator without one is charged
    "unknown", never 0)."""

    tie_breakers: list[TieBreaker] = Field(default_factory=lambda: list(DEFAULT_TIE_BREAKERS))
    charge_rates: list[ChargeRateSpec] = Field(default_factory=list)
    currency: str = "USD"  # of the profile's charge rates


class CatalogSpec(Frozen):
    accelerators: list[AcceleratorSpec]
    systems: list[SystemSpec]
    benchmarks: list[BenchmarkSpec] = Field(default_factory=list)
    ranking: RankingPolicySpec = Field(default_factory=RankingPolicySpec)
