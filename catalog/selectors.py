"""Reads from the catalog: the rows the engine's catalog is built from (mapped to the engine's
specs by `advisor.engine_catalog`), its version stamp, and the systems comparison page."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch, Q, QuerySet, Subquery

from catalog.models import (
    Accelerator,
    Benchmark,
    CatalogVersion,
    ChargeRate,
    NodeType,
    Partition,
    Profile,
    System,
    SystemKind,
    SystemStatus,
    ToolingSupport,
)


def system_display_name(key: str) -> str:
    """The name people use for a system ("Dawn (Cambridge, AI Research Resource)"), or its key
    once the catalog no longer has it."""
    return _display_name(System, key)


def accelerator_display_name(key: str) -> str:
    """The name people use for a GPU ("NVIDIA A100 40GB SXM4"), or its key."""
    return _display_name(Accelerator, key)


def _display_name(model, key: str) -> str:
    if not key:
        return ""
    name = model.objects.filter(name=key).values_list("display_name", flat=True).first()
    return name or str(key)


def profile_active() -> Profile | None:
    return Profile.objects.filter(is_active=True).first()


def _systems(*, profile: Profile | None) -> QuerySet[System]:
    systems = System.objects.select_related("profile").prefetch_related(
        Prefetch(
            "node_types",
            queryset=NodeType.objects.select_related("accelerator").order_by("name"),
        ),
        Prefetch(
            "partitions",
            queryset=Partition.objects.prefetch_related("node_types").order_by("name"),
        ),
        Prefetch(
            "tooling",
            queryset=ToolingSupport.objects.select_related("tool").order_by(
                "tool__position", "tool__name"
            ),
        ),
    )
    if profile is not None:
        systems = systems.filter(profile=profile)
    return systems


def catalog_version() -> str | None:
    """The stamp that changes with every catalog write (None before the first one)."""
    return CatalogVersion.objects.current()


@dataclass(frozen=True)
class CatalogRows:
    """The rows one profile's engine catalog is made of, related rows prefetched."""

    systems: list[System]
    benchmarks: list[Benchmark]
    accelerators: list[Accelerator]
    profile: Profile | None = None  # its ranking policy (tie-breakers, charge rates)


def catalog_rows(*, include_retired: bool = False, profile: str | None = None) -> CatalogRows:
    """Systems of one profile (default: the active one), their benchmarks and accelerators.

    Retired systems and retired node types (e.g. Azure's NCv3 sizes) are left out unless
    `include_retired`, so the engine never recommends them. Accelerators are those the chosen
    systems and benchmarks use. A fixed number of queries whatever the catalog's size.
    """
    chosen = Profile.objects.filter(name=profile).first() if profile else profile_active()
    if chosen is None:
        return CatalogRows(systems=[], benchmarks=[], accelerators=[])
    systems = _systems(profile=chosen)
    if not include_retired:
        systems = systems.exclude(status=SystemStatus.RETIRED)
    systems = list(systems)
    names = {s.name for s in systems}
    benchmarks = [
        b
        # The profile's own rows and the shared ones (catalog/data/shared/benchmarks.json).
        for b in Benchmark.objects.select_related("accelerator", "system").filter(
            Q(profile=chosen) | Q(profile__isnull=True)
        )
        if b.system is None or b.system.name in names
    ]
    used = {
        nt.accelerator_id
        for s in systems
        for nt in s.node_types.all()
        if include_retired or nt.status != SystemStatus.RETIRED
    }
    used |= {b.accelerator_id for b in benchmarks}
    accelerators = list(Accelerator.objects.filter(pk__in=used).order_by("name"))
    # The rates with their accelerators in one query (every profile file gives some).
    rates = Prefetch("charge_rates", queryset=ChargeRate.objects.select_related("accelerator"))
    chosen = Profile.objects.filter(pk=chosen.pk).prefetch_related(rates).first()
    return CatalogRows(
        systems=systems, benchmarks=benchmarks, accelerators=accelerators, profile=chosen
    )


# --- The /catalog/ comparison page -------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonRow:
    """One system x GPU type on the comparison page."""

    system: System
    accelerator: Accelerator
    gpus_per_node: list[int]
    gpus_total: int | None  # None on a cloud (on demand)
    node_types: list[NodeType]
    interconnect: list[str]
    tools_supported: list[str] = field(default_factory=list)
    tools_unsupported: list[str] = field(default_factory=list)
    status: str = SystemStatus.ACTIVE
    status_label: str = ""
    price_per_gpu_hour: list[float] = field(default_factory=list)


# Sort keys the page accepts; each maps to a row -> comparable value (None sorts last).
SORT_KEYS = {
    "system": lambda r: r.system.display_name.lower(),
    "gpu": lambda r: r.accelerator.display_name.lower(),
    "memory": lambda r: r.accelerator.memory_gb,
    "gpus_per_node": lambda r: max(r.gpus_per_node),
    "bf16": lambda r: r.accelerator.bf16_tflops,
    "fp16": lambda r: r.accelerator.fp16_tflops,
    "fp32": lambda r: r.accelerator.fp32_tflops,
    "bandwidth": lambda r: r.accelerator.memory_bandwidth_gb_s,
    "scheduler": lambda r: r.system.scheduler,
    "notebooks": lambda r: r.system.notebooks,
    "status": lambda r: ["active", "limited", "retired"].index(r.status),
}
DEFAULT_SORT = "system"


def _interconnect_words(node_type: NodeType) -> str:
    inside = node_type.get_intra_node_interconnect_display()
    across = node_type.get_inter_node_interconnect_display()
    if node_type.inter_node_gbit_s:
        across = f"{across} {node_type.inter_node_gbit_s:g} Gbit/s"
    return f"{inside} within node; {across} across nodes"


def comparison_rows(*, profile: Profile | None, sort: str = DEFAULT_SORT) -> list[ComparisonRow]:
    """Rows for the comparison page, sorted by `sort` ("memory", "-memory", ...)."""
    descending = sort.startswith("-")
    key_name = sort.lstrip("-")
    if key_name not in SORT_KEYS:
        key_name, descending = DEFAULT_SORT, False

    rows: list[ComparisonRow] = []
    for system in _systems(profile=profile):
        supported = [t.tool.name for t in system.tooling.all() if t.supported is True]
        unsupported = [t.tool.name for t in system.tooling.all() if t.supported is False]
        by_accelerator: dict[int, list[NodeType]] = {}
        for node_type in system.node_types.all():
            by_accelerator.setdefault(node_type.accelerator_id, []).append(node_type)
        for node_types in by_accelerator.values():
            accelerator = node_types[0].accelerator
            # A system x GPU type is retired when the system is, or when all its sizes are.
            if system.is_retired or all(nt.status == SystemStatus.RETIRED for nt in node_types):
                status = SystemStatus.RETIRED
            else:
                status = system.status
            cloud = system.kind == "cloud"
            rows.append(
                ComparisonRow(
                    system=system,
                    accelerator=accelerator,
                    gpus_per_node=sorted({nt.gpus_per_node for nt in node_types}),
                    gpus_total=None
                    if cloud
                    else sum(nt.count * nt.gpus_per_node for nt in node_types),
                    node_types=node_types,
                    interconnect=sorted({_interconnect_words(nt) for nt in node_types}),
                    tools_supported=supported,
                    tools_unsupported=unsupported,
                    status=status,
                    status_label=SystemStatus(status).label,
                    price_per_gpu_hour=sorted(
                        {nt.price_per_gpu_hour for nt in node_types if nt.price_per_gpu_hour}
                    ),
                )
            )

    key = SORT_KEYS[key_name]
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]
    # Ties stay in system, then GPU order whichever the direction (sort is stable).
    present.sort(key=lambda r: (r.system.display_name.lower(), r.accelerator.display_name.lower()))
    present.sort(key=key, reverse=descending)
    return present + missing


def secure_systems(*, profile: Profile | None) -> QuerySet[System]:
    """The profile's secure environments (Trusted Research Environments), for sensitive data."""
    if profile is None:
        return System.objects.none()
    return System.objects.filter(profile=profile, kind=SystemKind.SECURE).order_by("display_name")


def profiles_loaded() -> QuerySet[Profile]:
    return Profile.objects.order_by("name")


def profiles_and_stamp() -> tuple[list[Profile], str | None]:
    """The loaded profiles and the catalog's version stamp, read in one query (the stamp is
    None before the first catalog write, or with no profile loaded)."""
    stamp = CatalogVersion.objects.filter(pk=CatalogVersion.SINGLETON).values("stamp")[:1]
    profiles = list(profiles_loaded().annotate(catalog_stamp=Subquery(stamp)))
    return profiles, profiles[0].catalog_stamp if profiles else None
