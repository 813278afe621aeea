"""The catalog as the engine takes it: the one place catalog rows become the engine's specs.

`engine_catalog()` is the only way the catalog reaches the engine. It builds the frozen
`CatalogSpec` from the catalog's rows with `Spec.model_validate(row, from_attributes=True)`,
so the schema is written once (in the engine's models), and keeps what it built in this
process, keyed by the catalog's version stamp. Every catalog write (admin, loader, bulk
update, delete) replaces the stamp in its own transaction, so a cached catalog is used only
while the rows it was built from are the rows in the database. A page therefore pays one
one-row query for the catalog, and a build (about ten queries) only after a change.

Dependencies point one way: this module imports `catalog`; `catalog` never imports `advisor`.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import connection

from advisor.engine.models import (
    DEFAULT_TIE_BREAKERS,
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    ChargeRateSpec,
    CurrencyValueSpec,
    NodeTypeSpec,
    PartitionSpec,
    RankingPolicySpec,
    SystemSpec,
)
from catalog.models import Benchmark, NodeType, Partition, System, SystemStatus
from catalog.selectors import catalog_rows, catalog_version

# Catalogs built at one stamp: (include_retired, profile) -> CatalogSpec. A new stamp empties
# it, so it holds at most the few variants pages ask for (active profile, with or without
# retired systems).
_built: dict[tuple[str, str], dict[tuple[bool, str | None], CatalogSpec]] = {}
_lock = threading.Lock()


class _Row:
    """A model instance's attributes, with the few the spec spells differently given here."""

    __slots__ = ("_instance", "_given")

    def __init__(self, instance: Any, **given: Any) -> None:
        self._instance = instance
        self._given = given

    def __getattr__(self, name: str) -> Any:
        given = self._given
        return given[name] if name in given else getattr(self._instance, name)


def node_type_spec(node_type: NodeType) -> NodeTypeSpec:
    row = _Row(node_type, accelerator=node_type.accelerator.name)
    return NodeTypeSpec.model_validate(row, from_attributes=True)


def partition_spec(partition: Partition, *, node_type_names: list[str]) -> PartitionSpec:
    row = _Row(partition, node_types=node_type_names)
    return PartitionSpec.model_validate(row, from_attributes=True)


def system_spec(system: System, *, include_retired: bool = False) -> SystemSpec:
    """Uses the prefetched node types (with accelerator), partitions and tooling."""
    node_types = [
        nt for nt in system.node_types.all() if include_retired or nt.status != SystemStatus.RETIRED
    ]
    kept = {nt.pk: nt.name for nt in node_types}
    partitions = []
    for partition in system.partitions.all():
        names = [kept[nt.pk] for nt in partition.node_types.all() if nt.pk in kept]
        if names:
            partitions.append(partition_spec(partition, node_type_names=names))
    row = _Row(
        system,
        currency_value=currency_value_spec(system),
        tooling={cell.tool.name: cell.supported for cell in system.tooling.all()},
        tooling_sources={cell.tool.name: cell.source for cell in system.tooling.all()},
        node_types=[node_type_spec(nt) for nt in node_types],
        partitions=partitions,
    )
    return SystemSpec.model_validate(row, from_attributes=True)


def currency_value_spec(system: System) -> CurrencyValueSpec | None:
    """What one unit of the system's currency is worth in another; None where staff or the
    data file give no value (its charges are then not compared across currencies)."""
    if system.currency_value_per_unit is None:
        return None
    return CurrencyValueSpec(
        per_unit=system.currency_value_per_unit,
        currency=system.currency_value_currency,
        source=system.currency_value_source,
        as_of=system.currency_value_as_of,
    )


def benchmark_spec(benchmark: Benchmark) -> BenchmarkSpec:
    row = _Row(
        benchmark,
        accelerator=benchmark.accelerator.name,
        system=benchmark.system.name if benchmark.system_id else None,
    )
    return BenchmarkSpec.model_validate(row, from_attributes=True)


def _build(*, include_retired: bool, profile: str | None) -> CatalogSpec:
    rows = catalog_rows(include_retired=include_retired, profile=profile)
    return CatalogSpec(
        accelerators=[
            AcceleratorSpec.model_validate(a, from_attributes=True) for a in rows.accelerators
        ],
        systems=[system_spec(s, include_retired=include_retired) for s in rows.systems],
        benchmarks=[benchmark_spec(b) for b in rows.benchmarks],
        ranking=ranking_policy_spec(rows.profile),
    )


def ranking_policy_spec(profile) -> RankingPolicySpec:
    """The profile's tie-breaker order and charge rates (the engine's defaults without one)."""
    if profile is None:
        return RankingPolicySpec()
    return RankingPolicySpec(
        tie_breakers=list(profile.tie_breakers) or list(DEFAULT_TIE_BREAKERS),
        currency=profile.charge_currency,
        charge_rates=[
            ChargeRateSpec(
                accelerator=rate.accelerator.name,
                rate_per_gpu_hour=rate.rate_per_gpu_hour,
                currency=profile.charge_currency,
                source=rate.source,
                as_of=rate.as_of,
            )
            for rate in sorted(profile.charge_rates.all(), key=lambda r: r.accelerator.name)
        ],
    )


def engine_catalog(*, include_retired: bool = False, profile: str | None = None) -> CatalogSpec:
    """The catalog of one profile (default: the active one) as the engine's frozen specs.

    Retired systems and node types are left out unless `include_retired` (results then say why
    they are not recommended). One query while the catalog is unchanged; CatalogSpec is frozen,
    so callers share the cached object safely.
    """
    return engine_catalog_stamped(include_retired=include_retired, profile=profile)[0]


def engine_catalog_stamped(
    *, include_retired: bool = False, profile: str | None = None, stamp: str | None = None
) -> tuple[CatalogSpec, str | None]:
    """`engine_catalog()` and the version stamp it was built at (None: no stamp yet), for what
    is cached on the catalog's version (the advisor's rendered pages). `stamp`: the stamp as
    the caller already read it, earlier in this request (else it is read here)."""
    stamp = stamp or catalog_version()
    if stamp is None:  # nothing ever written, or the tables were emptied without the ORM
        return _build(include_retired=include_retired, profile=profile), None
    at = (connection.alias + ":" + str(connection.settings_dict["NAME"]), stamp)
    key = (include_retired, profile)
    built = _built.get(at, {})
    spec = built.get(key)
    if spec is None:
        spec = _build(include_retired=include_retired, profile=profile)
        with _lock:
            if at not in _built:
                _built.clear()
                _built[at] = {}
            _built[at][key] = spec
    return spec, stamp


def engine_catalog_forget() -> None:
    """Drop what this process built (tests that rewrite tables behind the ORM's back)."""
    with _lock:
        _built.clear()
