"""Writes to the catalog: loading a profile's data file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from catalog.data_schema import (
    CatalogFile,
    CatalogFileError,
    display_path,
    validate_catalog_file,
)
from catalog.models import (
    Accelerator,
    Benchmark,
    BenchmarkSourceKind,
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

    def __str__(self) -> str:
        counts = ", ".join(
            f"{n} {what if n != 1 else what.removesuffix('s')}" for what, n in self.counts.items()
        )
        return (
            f"{self.profile}: {counts} ({self.created} created, {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.deleted} removed)"
        )


def catalog_resolve_path(*, profile_or_path: str) -> Path:
    """A profile name ("default") means catalog/data/<name>.json; anything else is a path."""
    candidate = Path(profile_or_path)
    if candidate.suffix == ".json" or candidate.parent != Path("."):
        return candidate
    return DATA_DIR / f"{profile_or_path}.json"


class _Upserter:
    """Create or update rows by natural key, counting what really changed."""

    def __init__(self, summary: LoadSummary) -> None:
        self.summary = summary

    def save(self, model: type[Model], lookup: dict, values: dict, *, where: str) -> Model:
        obj = model.objects.filter(**lookup).first()
        created = obj is None
        if created:
            obj = model(**lookup, **values)
            changed = None
        else:
            changed = [name for name, value in values.items() if getattr(obj, name) != value]
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
        elif changed:
            self.summary.updated += 1
        else:
            self.summary.unchanged += 1
        return obj

    def delete(self, queryset) -> None:
        deleted, _ = queryset.delete()
        self.summary.deleted += deleted


def catalog_load(*, profile_or_path: str, activate: bool = True) -> LoadSummary:
    """Validate a profile's data file fully, then write it in one transaction.

    Idempotent: rows are matched by natural key (accelerator name, system name, (system, node
    type name), ...), so a re-run updates values and never duplicates. The profile's systems,
    node types, partitions, tooling cells and benchmarks that the file no longer lists are
    removed; accelerators and tools are shared by all profiles and are never removed here.
    With `activate`, the loaded profile becomes the active one (the advisor's catalog).
    Raises CatalogFileError (nothing written) when the file is malformed.
    """
    path = catalog_resolve_path(profile_or_path=profile_or_path)
    doc = validate_catalog_file(path)
    with transaction.atomic():
        summary = _write(doc, path, activate=activate)
    return summary


def _write(doc: CatalogFile, path: Path, *, activate: bool) -> LoadSummary:
    summary = LoadSummary(profile=doc.profile.name, path=path)
    up = _Upserter(summary)

    owners = dict(
        System.objects.filter(name__in=[s.name for s in doc.systems])
        .exclude(profile__name=doc.profile.name)
        .values_list("name", "profile__name")
    )
    for index, sys_in in enumerate(doc.systems):
        if sys_in.name in owners:
            raise CatalogFileError(
                f"{display_path(path)}: systems[{index}] ({sys_in.name}).name: already belongs "
                f"to profile {owners[sys_in.name]!r}; a system can be in one profile only"
            )

    owners = dict(
        Benchmark.objects.filter(name__in=[b.name for b in doc.benchmarks])
        .exclude(profile__name=doc.profile.name)
        .values_list("name", "profile__name")
    )
    for index, bench in enumerate(doc.benchmarks):
        if bench.name in owners:
            raise CatalogFileError(
                f"{display_path(path)}: benchmarks[{index}] ({bench.name}).name: already belongs "
                f"to profile {owners[bench.name]!r}"
            )

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
            "source_file": str(path),
            **({"is_active": True} if activate else {}),
        },
        where="profile",
    )
    # loaded_at changes on every load; keep it out of the change count.
    Profile.objects.filter(pk=profile.pk).update(loaded_at=timezone.now())

    for position, name in enumerate(doc.tools):
        up.save(Tool, {"name": name}, {"position": position}, where=f"tools[{position}]")

    accelerators: dict[str, Accelerator] = {}
    for i, acc in enumerate(doc.accelerators):
        values = acc.model_dump(exclude={"name"}, mode="json")
        accelerators[acc.name] = up.save(
            Accelerator, {"name": acc.name}, values, where=f"accelerators[{i}] ({acc.name})"
        )

    systems: dict[str, System] = {}
    for i, sys_in in enumerate(doc.systems):
        where = f"systems[{i}] ({sys_in.name})"
        values = sys_in.model_dump(
            exclude={"name", "node_types", "partitions", "tooling", "tooling_source"}
        )
        system = up.save(System, {"name": sys_in.name}, {"profile": profile, **values}, where=where)
        systems[sys_in.name] = system

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
        up.delete(system.node_types.exclude(name__in=list(node_types)))

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
            if set(partition.node_types.values_list("pk", flat=True)) != wanted:
                partition.node_types.set(wanted)
            kept_partitions.append(part_in.name)
        up.delete(system.partitions.exclude(name__in=kept_partitions))

        kept_tools = []
        for tool_name, supported in sys_in.tooling.items():
            tool, _ = Tool.objects.get_or_create(
                name=tool_name, defaults={"position": len(doc.tools)}
            )
            up.save(
                ToolingSupport,
                {"system": system, "tool": tool},
                {"supported": supported, "source": sys_in.tooling_source},
                where=f"{where}.tooling",
            )
            kept_tools.append(tool.pk)
        up.delete(system.tooling.exclude(tool__in=kept_tools))

    up.delete(profile.systems.exclude(name__in=list(systems)))

    for i, bench in enumerate(doc.benchmarks):
        values = bench.model_dump(exclude={"name", "accelerator", "system"})
        for text_field in ("task", "precision"):
            values[text_field] = values[text_field] or ""
        values["accelerator"] = accelerators[bench.accelerator]
        values["system"] = systems[bench.system] if bench.system else None
        values["profile"] = profile
        up.save(Benchmark, {"name": bench.name}, values, where=f"benchmarks[{i}] ({bench.name})")
    # The institute's own runs are not in the data file: a reload keeps them.
    up.delete(
        profile.benchmarks.exclude(name__in=[b.name for b in doc.benchmarks]).exclude(
            source_kind=BenchmarkSourceKind.INSTITUTE_RUN
        )
    )

    summary.counts = {
        "systems": len(doc.systems),
        "accelerators": len(doc.accelerators),
        "node types": sum(len(s.node_types) for s in doc.systems),
        "partitions": sum(len(s.partitions) for s in doc.systems),
        "benchmarks": len(doc.benchmarks),
    }
    return summary
