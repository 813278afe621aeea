"""Writes shared benchmarks (`manage.py load_benchmarks FILE`); the file format and its checks
are in catalog.benchmark_file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from catalog.benchmark_file import benchmark_file_read, fail
from catalog.data_schema import BenchmarkIn, display_path
from catalog.models import Accelerator, Benchmark, System


@dataclass
class BenchmarksLoaded:
    path: Path
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def __str__(self) -> str:
        total = self.created + self.updated + self.unchanged
        return (
            f"{display_path(self.path)}: {total} shared benchmark(s) ({self.created} created, "
            f"{self.updated} updated, {self.unchanged} unchanged)"
        )


def benchmarks_validate(path: Path) -> list[BenchmarkIn]:
    """Every row of a benchmark file, checked against the schema and the database's
    accelerators and systems; raises CatalogFileError naming file, row and field."""
    rows = benchmark_file_read(path)
    accelerators = set(Accelerator.objects.values_list("name", flat=True))
    systems = set(System.objects.values_list("name", flat=True))
    owned = dict(
        Benchmark.objects.filter(
            name__in=[b.name for _, b in rows], profile__isnull=False
        ).values_list("name", "profile__name")
    )
    for label, bench in rows:
        if bench.accelerator not in accelerators:
            raise fail(
                path,
                f"{label}.accelerator",
                f"unknown accelerator {bench.accelerator!r} (load a catalog that has it first)",
            )
        if bench.system is not None and bench.system not in systems:
            raise fail(path, f"{label}.system", f"unknown system {bench.system!r}")
        if bench.name in owned:
            raise fail(
                path,
                f"{label}.name",
                f"already belongs to profile {owned[bench.name]!r}; shared benchmarks need "
                "their own names",
            )
    return [bench for _, bench in rows]


def benchmarks_load(*, path: Path) -> BenchmarksLoaded:
    """Validate the whole file, then create or update its rows as shared benchmarks in one
    transaction (matched by name; re-running changes nothing)."""
    parsed = benchmarks_validate(path)
    summary = BenchmarksLoaded(path=path)
    accelerators = {a.name: a for a in Accelerator.objects.all()}
    systems = {s.name: s for s in System.objects.all()}
    with transaction.atomic():
        for bench in parsed:
            values = bench.model_dump(exclude={"name", "accelerator", "system"})
            for text_field in ("task", "precision"):
                values[text_field] = values[text_field] or ""
            values["accelerator"] = accelerators[bench.accelerator]
            values["system"] = systems[bench.system] if bench.system else None
            values["profile"] = None
            existing = Benchmark.objects.filter(name=bench.name).first()
            if existing is None:
                obj = Benchmark(name=bench.name, **values)
                obj.full_clean()
                obj.save()
                summary.created += 1
                continue
            changed = [k for k, v in values.items() if getattr(existing, k) != v]
            if not changed:
                summary.unchanged += 1
                continue
            for key in changed:
                setattr(existing, key, values[key])
            existing.full_clean()
            existing.save()
            summary.updated += 1
    return summary
