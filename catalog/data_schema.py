"""The shape of a catalog data file (catalog/data/<profile>.json), checked before any write.

Every record carries `source`: the source keys of ../shared/catalog-facts.md (e.g.
"A100-GK, SEED-TURING") that back its figures. Unknown keys are refused (extra="forbid") so a
typo never silently drops a figure. `catalog.data_file.validate_catalog_file()` returns the
parsed document or raises CatalogFileError whose message names the file, the entry and the field:

    catalog/data/default.json: systems[3] (jade2).node_types[0].gpus_per_node: Input should be
    greater than 0

Each record extends the engine's spec of the same entry (catalog_schema: AcceleratorSpec,
SystemSpec, ...), so a field the engine needs is declared once and a data file can give it.
A record adds what only a file and the catalog keep (source, notes, dates, the seed's
figures) and redeclares a field only to check input harder than the engine must (key
patterns, positive figures, a required flag). Text the catalog stores as "" stays "" here;
the specs read it as None (catalog_schema.specs.BlankIsNone), from a file as from a row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    Field,
    StringConstraints,
    model_validator,
)

from catalog_schema import (
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    ChargeRateSpec,
    CurrencyValueSpec,
    DataSensitivity,
    Frozen,
    InterNodeInterconnect,
    IntraNodeInterconnect,
    NodeTypeSpec,
    PartitionSpec,
    RankingPolicySpec,
    SystemKind,
    SystemSpec,
    SystemStatus,
)

Key = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)]
BenchmarkKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=100)]
Source = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
Tflops = Annotated[float, Field(gt=0)]


SpecT = TypeVar("SpecT", bound=Frozen)


class CatalogFileError(Exception):
    """A data file that cannot be loaded; the message names file, entry and field."""


class _In(Frozen):
    """Frozen, unknown keys refused; `not_in_file` names spec fields a file must not give."""

    not_in_file: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_spec_only_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in cls.not_in_file:
                if name in data:
                    raise ValueError(f"{name}: not a data-file field")
        return data


class SeedValuesIn(_In):
    """A seed document's figures for this accelerator, verbatim ("N/A" becomes null)."""

    source: Source
    label: str = ""  # the seed's row name, e.g. "J-V100-32"
    memory_gb: float | None = None
    interface: str = ""
    launched: str = ""
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp32_tflops: float | None = None
    fp64_tflops: float | None = None
    disagreement: str = ""  # where the seed and vendor data differ, and why


class AcceleratorIn(_In, AcceleratorSpec):
    # Checked harder than the engine's spec.
    name: Key
    display_name: str = Field(min_length=1, max_length=200)
    vendor: str = Field(min_length=1, max_length=100)
    memory_gb: float = Field(gt=0)
    memory_bandwidth_gb_s: float = Field(gt=0)
    fp64_tflops: Tflops | None = None
    fp32_tflops: Tflops | None = None
    tf32_tflops: Tflops | None = None
    fp16_tflops: Tflops | None = None
    bf16_tflops: Tflops | None = None
    int8_tops: Tflops | None = None
    fp16_nontensor_tflops: Tflops | None = None
    bf16_supported: bool  # a file states both flags
    tensor_cores: bool
    tdp_w: float | None = Field(default=None, gt=0)
    # What the catalog keeps beside the spec.
    interconnect: str = Field(default="", max_length=300)
    launch: str = Field(default="", pattern=r"^(\d{4}-\d{2})?$")
    seed_values: list[SeedValuesIn] = Field(default_factory=list)
    notes: str = ""
    source: Source


class NodeTypeIn(_In, NodeTypeSpec):
    # Checked harder than the engine's spec.
    name: str = Field(min_length=1, max_length=100)
    count: int = Field(ge=0)
    gpus_per_node: int = Field(gt=0)
    accelerator: Key
    cpu_cores: int | None = Field(default=None, gt=0)
    ram_gb: float | None = Field(default=None, gt=0)
    intra_node_interconnect: IntraNodeInterconnect  # a file states both
    inter_node_interconnect: InterNodeInterconnect
    inter_node_gbit_s: float | None = Field(default=None, gt=0)
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    # What the catalog keeps beside the spec.
    interconnect_note: str = Field(default="", max_length=300)
    retired_on: dt.date | None = None
    notes: str = ""
    source: Source


class PartitionIn(_In, PartitionSpec):
    # Checked harder than the engine's spec; "" (not None) for no value, as the catalog stores it.
    name: str = Field(min_length=1, max_length=100)
    slurm_partition: str = Field(default="", max_length=100)
    node_types: list[str] = Field(min_length=1)
    max_wall_hours: float | None = Field(default=None, gt=0)
    max_gpus_per_job: int | None = Field(default=None, gt=0)
    max_nodes_per_job: int | None = Field(default=None, gt=0)
    gpu_request: str = Field(pattern=r"\{n\}", max_length=200)
    constraint: str = Field(default="", max_length=200)
    qos: str = Field(default="", max_length=100)
    # What the catalog keeps beside the spec.
    source: Source


class RequestFieldIn(_In):
    """A field a request to this system must also give (a TRE's data-protection reference)."""

    label: str = Field(min_length=1, max_length=200)
    help: str = ""
    # The only answers the operator accepts (the Turing TRE's security tiers 1 to 3).
    choices: list[str] = Field(default_factory=list)


# An ISO 4217 code: what a conversion converts to (a system's own unit, "SU", may be anything).
CurrencyCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]


class CurrencyValueIn(_In, CurrencyValueSpec):
    """What one unit of the system's currency is worth in `currency` (0.01 USD per UVA Service
    Unit), so its charges compare with the profile's; the engine's spec carries the source as
    one text."""

    per_unit: float = Field(gt=0, allow_inf_nan=False)
    currency: CurrencyCode
    # What the value is, in words: "purchased Service Units cost $0.01 each".
    basis: str = Field(min_length=1, max_length=200)
    source: Source
    as_of: dt.date  # when the value was read or set (a file states it)

    def spec_source(self) -> str:
        return f"{self.basis} ({self.source})"


class SystemIn(_In, SystemSpec):
    # The spec's per-tool sources come from the file's one `tooling_source`.
    not_in_file: ClassVar[frozenset[str]] = frozenset({"tooling_sources"})

    # Checked harder than the engine's spec (and stated, not defaulted).
    name: Key
    display_name: str = Field(min_length=1, max_length=200)
    operator: str = Field(default="", max_length=300)
    kind: SystemKind
    scheduler: str = Field(min_length=1, max_length=100)
    status: SystemStatus
    notebooks: bool
    data_sensitivity: list[DataSensitivity] = Field(min_length=1)
    trial_gpu_hours: float | None = Field(default=None, ge=0)
    minimum_gpu_hours: float | None = Field(default=None, ge=0)
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    currency: str = Field(default="", max_length=10)
    currency_value: CurrencyValueIn | None = None
    typical_queue_wait_hours: float | None = Field(default=None, ge=0)
    container: str = Field(default="", max_length=300)  # "" (not None), as the catalog stores it
    # Tool name -> True (supported), False (not supported), None (unknown: an empty cell).
    tooling: dict[Annotated[str, StringConstraints(min_length=1, max_length=100)], bool | None] = (
        Field(default_factory=dict)
    )
    # A secure environment may list no hardware (it is provisioned per project).
    node_types: list[NodeTypeIn] = Field(default_factory=list)
    partitions: list[PartitionIn] = Field(default_factory=list)
    # What the catalog keeps beside the spec.
    status_since: dt.date | None = None
    status_note: str = ""
    closed_to_new_users_on: dt.date | None = None
    compute_ends_on: dt.date | None = None
    access_ends_on: dt.date | None = None
    notebook_note: str = ""
    # What the operator documents about the data it may hold, citing it; where nothing
    # establishes more than public data, the note says so.
    data_sensitivity_note: str = ""
    request_fields: list[RequestFieldIn] = Field(default_factory=list)
    trial_note: str = ""
    price_note: str = ""
    tooling_source: str = Field(default="", max_length=300)
    notes: str = ""
    source: Source

    @model_validator(mode="after")
    def _hardware(self) -> SystemIn:
        if not self.node_types and self.kind != "secure":
            raise ValueError(
                "node_types: list at least one node type (only a secure "
                "environment may leave its hardware to each project)"
            )
        return self


class BenchmarkIn(_In, BenchmarkSpec):
    # Checked harder than the engine's spec; strategy "" (not None), as the catalog stores it.
    name: BenchmarkKey
    accelerator: Key
    system: Key | None = None
    model: str = Field(min_length=1, max_length=200)
    params: int | None = Field(default=None, gt=0)
    strategy: str = Field(default="", max_length=30)
    num_gpus: int = Field(default=1, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    seq_len: int | None = Field(default=None, ge=1)
    tokens_per_second: float | None = Field(default=None, gt=0)
    peak_memory_gb: float | None = Field(default=None, gt=0)
    mfu: float | None = Field(default=None, gt=0, le=1)
    hidden_size: int | None = Field(default=None, ge=1)
    num_layers: int | None = Field(default=None, ge=1)
    vocab_size: int | None = Field(default=None, ge=1)
    source: Source


class ChargeRateIn(_In, ChargeRateSpec):
    """The notional rate per GPU hour of an accelerator on the profile's HPC systems that have
    no price of their own (a staff-set rate's default; staff change it in the admin)."""

    # In the profile's charge_currency; the engine's spec carries the source as one text.
    not_in_file: ClassVar[frozenset[str]] = frozenset({"currency"})

    accelerator: Key
    rate_per_gpu_hour: float = Field(ge=0, allow_inf_nan=False)
    # What the rate is, in words: "cloud-equivalent default: Azure Standard_ND96asr_v4 ...".
    basis: str = Field(min_length=1, max_length=200)
    source: Source
    as_of: dt.date  # when the rate was set or its price read (a file states it)

    def spec_source(self) -> str:
        """The text the engine shows as the rate's source: its basis and source keys."""
        return f"{self.basis} ({self.source})"


class ProfileIn(_In):
    name: Key
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    # The currency of the file's charge_rates (Profile.charge_currency).
    charge_currency: str = Field(default="USD", min_length=1, max_length=10)


class CatalogFile(_In):
    profile: ProfileIn
    # Source key -> citation; every `source` above must use keys listed here.
    sources: dict[str, str] = Field(min_length=1)
    # Matrix row order.
    tools: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = Field(
        default_factory=list
    )
    accelerators: list[AcceleratorIn] = Field(min_length=1)
    systems: list[SystemIn] = Field(min_length=1)
    benchmarks: list[BenchmarkIn] = Field(default_factory=list)
    # One per accelerator at most; accelerators without one are charged "unknown" on HPC
    # systems without a price.
    charge_rates: list[ChargeRateIn] = Field(default_factory=list)

    def to_spec(
        self,
        *,
        shared_benchmarks: Sequence[BenchmarkIn] = (),
        shared_accelerators: Sequence[AcceleratorIn] = (),
        include_retired: bool = False,
    ) -> CatalogSpec:
        """The engine's catalog from this file without a database: what
        advisor.engine_catalog.engine_catalog() builds from the rows after `manage.py
        load_catalog` (and `load_benchmarks` for `shared_benchmarks`), in the same order.
        Retired systems and node types are left out unless `include_retired`.

        Accelerators are shared by every profile, so a shared benchmark on an accelerator
        another file defined (the default profile's H100, which bin/dev loads first) reaches
        this profile's engine too: pass that file's accelerators as `shared_accelerators`
        (this file's own records win; the files keep identical ones)."""
        position = {name: i for i, name in enumerate(self.tools)}
        systems = [
            _system_spec(system, include_retired=include_retired, tool_position=position)
            for system in sorted(self.systems, key=lambda s: s.display_name)
            if include_retired or system.status != "retired"
        ]
        names = {system.name for system in systems}
        by_name = {acc.name: acc for acc in [*shared_accelerators, *self.accelerators]}
        benchmarks = [
            bench
            for bench in [*self.benchmarks, *shared_benchmarks]
            if bench.accelerator in by_name and (bench.system is None or bench.system in names)
        ]
        benchmarks.sort(
            key=lambda b: (by_name[b.accelerator].vendor, b.accelerator, b.model, b.name)
        )
        used = {nt.accelerator for system in systems for nt in system.node_types}
        used |= {bench.accelerator for bench in benchmarks}
        return CatalogSpec(
            accelerators=[_spec(by_name[name], AcceleratorSpec) for name in sorted(used)],
            systems=systems,
            benchmarks=[_spec(bench, BenchmarkSpec) for bench in benchmarks],
            ranking=self.ranking_spec(),
        )

    def ranking_spec(self) -> RankingPolicySpec:
        """The profile's ranking policy as engine_catalog() builds it after loading the file:
        the default tie-breaker order, the file's charge rates by accelerator name."""
        currency = self.profile.charge_currency
        return RankingPolicySpec(
            currency=currency,
            charge_rates=[
                _spec(rate, ChargeRateSpec, currency=currency, source=rate.spec_source())
                for rate in sorted(self.charge_rates, key=lambda r: r.accelerator)
            ],
        )


def _spec(record: _In, spec: type[SpecT], **given: Any) -> SpecT:
    """The spec `record` extends, with its own fields and `given` ones replacing some."""
    values = {name: getattr(record, name) for name in spec.model_fields if name not in given}
    return spec.model_validate({**values, **given})


def _system_spec(
    system: SystemIn, *, include_retired: bool, tool_position: dict[str, int]
) -> SystemSpec:
    node_types = sorted(
        (nt for nt in system.node_types if include_retired or nt.status != "retired"),
        key=lambda nt: nt.name,
    )
    kept = {nt.name for nt in node_types}
    partitions = []
    for partition in sorted(system.partitions, key=lambda p: p.name):
        names = sorted(name for name in partition.node_types if name in kept)
        if names:
            partitions.append(_spec(partition, PartitionSpec, node_types=names))
    tools = sorted(system.tooling, key=lambda t: (tool_position.get(t, len(tool_position)), t))
    value = system.currency_value
    return _spec(
        system,
        SystemSpec,
        currency_value=None
        if value is None
        else _spec(value, CurrencyValueSpec, source=value.spec_source()),
        tooling={tool: system.tooling[tool] for tool in tools},
        tooling_sources=dict.fromkeys(tools, system.tooling_source),
        node_types=[_spec(nt, NodeTypeSpec) for nt in node_types],
        partitions=partitions,
    )
