"""Writes to the catalog: loading a profile's data file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from catalog.data_file import display_path, validate_catalog_file
from catalog.data_schema import (
    BenchmarkIn,
    CatalogFile,
    CatalogFileError,
    SystemIn,
)
from catalog.models import (
    Accelerator,
    Benchmark,
    BenchmarkSourceKind,
    ChargeRate,
    NodeType,
    Partition,
    Profile,
    System,
    Tool,
    ToolingSupport,
)

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass
class LoadSummary:
    profile: str
    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    # Without reset: rows whose values differ from the file (kept as staff left them), and rows
    # the file does not list (kept too), each as one line naming the entry and field.
    reset: bool = True
    differences: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        counts = ", ".join(
            f"{n} {what if n != 1 else what.removesuffix('s')}" for what, n in self.counts.items()
        )
        if self.reset:
            return (
                f"{self.profile}: {counts} ({self.created} created, {self.updated} updated, "
                f"{self.unchanged} unchanged, {self.deleted} removed)"
            )
        lines = [
            f"{self.profile}: {counts} ({self.created} created, {self.unchanged} unchanged, "
            f"{len(self.differences)} values differ from the file and were kept, "
            f"{len(self.kept)} rows not in the file were kept)"
        ]
        lines += [f"  differs: {line}" for line in self.differences]
        lines += [f"  not in the file: {line}" for line in self.kept]
        if self.differences or self.kept:
            lines.append("  (load with --reset to replace the database's values with the file's)")
        return "\n".join(lines)


def catalog_resolve_path(*, profile_or_path: str) -> Path:
    """A profile name ("default") means catalog/data/<name>.json; anything else is a path."""
    candidate = Path(profile_or_path)
    if candidate.suffix == ".json" or candidate.parent != Path("."):
        return candidate
    return DATA_DIR / f"{profile_or_path}.json"


def _shown(value) -> str:
    return str(value) if isinstance(value, Model) else repr(value)


class _Upserter:
    """Create rows by natural key; update and delete only on reset, else report differences."""

    def __init__(self, summary: LoadSummary) -> None:
        self.summary = summary
        self.created: set[tuple[type[Model], int]] = set()

    def is_new(self, obj: Model) -> bool:
        return (type(obj), obj.pk) in self.created

    def save(self, model: type[Model], lookup: dict, values: dict, *, where: str) -> Model:
        obj = model.objects.filter(**lookup).first()
        created = obj is None
        if created:
            obj = model(**lookup, **values)
            changed = None
        else:
            changed = [name for name, value in values.items() if getattr(obj, name) != value]
            if changed and not self.summary.reset:
                # Staff may have edited the row in the admin: their value stays.
                self.summary.differences += [
                    f"{where}.{name}: {_shown(getattr(obj, name))} here, "
                    f"{_shown(values[name])} in the file"
                    for name in changed
                ]
                self.summary.unchanged += 1
                return obj
            for name in changed:
                setattr(obj, name, values[name])
        if created or changed:
            try:
                obj.full_clean()
            except ValidationError as exc:
                # The schema mirrors the model, so this is rare; still name the entry and field.
                field, messages = next(iter(exc.message_dict.items()))
                raise CatalogFileError(
                    f"{display_path(self.summary.path)}: {where}.{field}: {' '.join(messages)}"
                ) from exc
            if changed:
                obj.save(update_fields=changed)
            else:
                obj.save()
        if created:
            self.summary.created += 1
            self.created.add((model, obj.pk))
        elif changed:
            self.summary.updated += 1
        else:
            self.summary.unchanged += 1
        return obj

    def delete(self, queryset, *, where: str) -> None:
        if not self.summary.reset:
            self.summary.kept += [f"{where}: {obj}" for obj in queryset]
            return
        deleted, _ = queryset.delete()
        self.summary.deleted += deleted

    def set_related(self, obj: Model, name: str, wanted: set[int], *, where: str) -> None:
        manager = getattr(obj, name)
        current = set(manager.values_list("pk", flat=True))
        if current == wanted:
            return
        if self.summary.reset or self.is_new(obj):
            manager.set(wanted)
        else:
            self.summary.differences.append(
                f"{where}.{name}: {len(current)} here, {len(wanted)} in the file"
            )


def catalog_load(
    *, profile_or_path: str, activate: bool = True, reset: bool = False
) -> LoadSummary:
    """Validate a profile's data file fully, then write it in one transaction.

    Rows are matched by natural key (accelerator name, system name, (system, node type name),
    ...), so a re-run never duplicates. By default the load never overwrites what staff edited:
    it creates what is missing and reports, in the summary, every value that differs from the
    file and every row the file does not list, changing neither. With `reset` the file wins:
    values are updated and the profile's systems, node types, partitions, tooling cells and
    benchmarks the file no longer lists are removed (accelerators and tools are shared by all
    profiles and are never removed here). With `activate`, the loaded profile becomes the
    active one (the advisor's catalog).
    Raises CatalogFileError (nothing written) when the file is malformed.
    """
    path = catalog_resolve_path(profile_or_path=profile_or_path)
    doc = validate_catalog_file(path)
    with transaction.atomic():
        summary = _write(doc, path, activate=activate, reset=reset)
    return summary


def catalog_is_empty() -> bool:
    """No profile was ever loaded: a fresh deployment."""
    return not Profile.objects.exists()


def _refuse_other_profiles_rows(
    model: type[System | Benchmark],
    entries: list,
    key: str,
    *,
    doc: CatalogFile,
    path: Path,
    why: str = "",
) -> None:
    """Raise CatalogFileError if an entry's name is another profile's row (names are unique
    across profiles), naming the first such entry."""
    owners = dict(
        model.objects.filter(name__in=[entry.name for entry in entries])
        .exclude(profile__name=doc.profile.name)
        .values_list("name", "profile__name")
    )
    for index, entry in enumerate(entries):
        if entry.name in owners:
            raise CatalogFileError(
                f"{display_path(path)}: {key}[{index}] ({entry.name}).name: already belongs "
                f"to profile {owners[entry.name]!r}" + (f"; {why}" if why else "")
            )


def benchmark_row_values(
    bench: BenchmarkIn,
    *,
    accelerators: dict[str, Accelerator],
    systems: dict[str, System],
    profile: Profile | None,
) -> dict:
    """A Benchmark row's values from a file's record (a profile's, or None: shared)."""
    values = bench.model_dump(exclude={"name", "accelerator", "system"})
    for text_field in ("task", "precision"):
        values[text_field] = values[text_field] or ""  # the catalog stores "no value" as ""
    values["accelerator"] = accelerators[bench.accelerator]
    values["system"] = systems[bench.system] if bench.system else None
    values["profile"] = profile
    return values


def currency_value_row_values(sys_in: SystemIn) -> dict:
    """The System row's currency_value_* fields from a file's nested record ("" and None for
    a system without one)."""
    value = sys_in.currency_value
    return {
        "currency_value_per_unit": value.per_unit if value else None,
        "currency_value_currency": value.currency if value else "",
        "currency_value_source": value.spec_source() if value else "",
        "currency_value_as_of": value.as_of if value else None,
    }


def _write(doc: CatalogFile, path: Path, *, activate: bool, reset: bool) -> LoadSummary:
    summary = LoadSummary(profile=doc.profile.name, path=path, reset=reset)
    up = _Upserter(summary)

    one_profile = "a system can be in one profile only"
    _refuse_other_profiles_rows(System, doc.systems, "systems", doc=doc, path=path, why=one_profile)
    _refuse_other_profiles_rows(Benchmark, doc.benchmarks, "benchmarks", doc=doc, path=path)

    profile = _write_profile(doc, up, path=path, activate=activate)

    for position, name in enumerate(doc.tools):
        up.save(Tool, {"name": name}, {"position": position}, where=f"tools[{position}]")

    accelerators: dict[str, Accelerator] = {}
    for i, acc in enumerate(doc.accelerators):
        values = acc.model_dump(exclude={"name"}, mode="json")
        accelerators[acc.name] = up.save(
            Accelerator, {"name": acc.name}, values, where=f"accelerators[{i}] ({acc.name})"
        )

    systems = {
        sys_in.name: _write_system(doc, up, sys_in, i, profile=profile, accelerators=accelerators)
        for i, sys_in in enumerate(doc.systems)
    }
    up.delete(profile.systems.exclude(name__in=list(systems)), where="systems")

    for i, bench in enumerate(doc.benchmarks):
        values = benchmark_row_values(
            bench, accelerators=accelerators, systems=systems, profile=profile
        )
        up.save(Benchmark, {"name": bench.name}, values, where=f"benchmarks[{i}] ({bench.name})")
    # The institute's own runs are not in the data file: a reload keeps them, even with reset.
    up.delete(
        profile.benchmarks.exclude(name__in=[b.name for b in doc.benchmarks]).exclude(
            source_kind=BenchmarkSourceKind.INSTITUTE_RUN
        ),
        where="benchmarks",
    )

    _write_charge_rates(doc, up, profile=profile, accelerators=accelerators)

    summary.counts = {
        "systems": len(doc.systems),
        "accelerators": len(doc.accelerators),
        "node types": sum(len(s.node_types) for s in doc.systems),
        "partitions": sum(len(s.partitions) for s in doc.systems),
        "benchmarks": len(doc.benchmarks),
    }
    return summary


def _write_profile(doc: CatalogFile, up: _Upserter, *, path: Path, activate: bool) -> Profile:
    """The profile row, with the load's own facts (file, time, activation)."""
    if activate:
        Profile.objects.exclude(name=doc.profile.name).filter(is_active=True).update(
            is_active=False
        )
    profile = up.save(
        Profile,
        {"name": doc.profile.name},
        {
            "title": doc.profile.title,
            "description": doc.profile.description,
            "charge_currency": doc.profile.charge_currency,
        },
        where="profile",
    )
    # Which file and when, and (asked for explicitly) activation: facts of this load, not data
    # staff edit, so they are written in either mode and kept out of the change count.
    Profile.objects.filter(pk=profile.pk).update(
        loaded_at=timezone.now(),
        source_file=str(path),
        **({"is_active": True} if activate else {}),
    )
    profile.refresh_from_db()
    return profile


def _write_system(
    doc: CatalogFile,
    up: _Upserter,
    sys_in: SystemIn,
    i: int,
    *,
    profile: Profile,
    accelerators: dict[str, Accelerator],
) -> System:
    """One system with its node types, partitions and tooling support; rows the file no longer
    lists are deleted (or, without reset, kept and counted)."""
    where = f"systems[{i}] ({sys_in.name})"
    values = sys_in.model_dump(
        exclude={
            "name",
            "node_types",
            "partitions",
            "tooling",
            "tooling_source",
            "tooling_sources",
            "currency_value",
        }
    )
    values.update(currency_value_row_values(sys_in))
    system = up.save(System, {"name": sys_in.name}, {"profile": profile, **values}, where=where)

    node_types: dict[str, NodeType] = {}
    for j, nt_in in enumerate(sys_in.node_types):
        values = nt_in.model_dump(exclude={"name", "accelerator"})
        values["accelerator"] = accelerators[nt_in.accelerator]
        node_types[nt_in.name] = up.save(
            NodeType,
            {"system": system, "name": nt_in.name},
            values,
            where=f"{where}.node_types[{j}]",
        )
    up.delete(system.node_types.exclude(name__in=list(node_types)), where=f"{where}.node_types")

    kept_partitions = []
    for j, part_in in enumerate(sys_in.partitions):
        values = part_in.model_dump(exclude={"name", "node_types"})
        partition = up.save(
            Partition,
            {"system": system, "name": part_in.name},
            values,
            where=f"{where}.partitions[{j}]",
        )
        wanted = {node_types[name].pk for name in part_in.node_types}
        up.set_related(partition, "node_types", wanted, where=f"{where}.partitions[{j}]")
        kept_partitions.append(part_in.name)
    up.delete(system.partitions.exclude(name__in=kept_partitions), where=f"{where}.partitions")

    kept_tools = []
    for tool_name, supported in sys_in.tooling.items():
        tool, _ = Tool.objects.get_or_create(name=tool_name, defaults={"position": len(doc.tools)})
        up.save(
            ToolingSupport,
            {"system": system, "tool": tool},
            {"supported": supported, "source": sys_in.tooling_source},
            where=f"{where}.tooling",
        )
        kept_tools.append(tool.pk)
    up.delete(system.tooling.exclude(tool__in=kept_tools), where=f"{where}.tooling")
    return system


def _write_charge_rates(
    doc: CatalogFile, up: _Upserter, *, profile: Profile, accelerators: dict[str, Accelerator]
) -> None:
    """The profile's charge rates by accelerator; without reset a rate staff changed stays."""
    for i, rate in enumerate(doc.charge_rates):
        accelerator = accelerators[rate.accelerator]
        up.save(
            ChargeRate,
            {"profile": profile, "accelerator": accelerator},
            {
                "rate_per_gpu_hour": rate.rate_per_gpu_hour,
                "source": rate.spec_source(),
                "as_of": rate.as_of,
            },
            where=f"charge_rates[{i}] ({rate.accelerator})",
        )
    up.delete(
        profile.charge_rates.exclude(
            accelerator__name__in=[rate.accelerator for rate in doc.charge_rates]
        ),
        where="charge_rates",
    )
