"""Writes shared benchmarks (`manage.py load_benchmarks FILE`); the file format and its checks
are in catalog.benchmark_file."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from catalog.benchmark_file import benchmark_file_read, fail
from catalog.data_schema import BenchmarkIn
from catalog.models import Accelerator, Benchmark, System
from catalog.services import LoadSummary, _Upserter, benchmark_row_values


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


def benchmarks_shared_exist() -> bool:
    return Benchmark.objects.filter(profile__isnull=True).exists()


def benchmarks_load(*, path: Path, reset: bool = False) -> LoadSummary:
    """Validate the whole file, then create its rows as shared benchmarks in one transaction
    (matched by name). As load_catalog does, values staff changed in the admin are kept and
    reported unless `reset`, and re-running changes nothing."""
    parsed = benchmarks_validate(path)
    summary = LoadSummary(profile="shared benchmarks", path=path, reset=reset)
    accelerators = {a.name: a for a in Accelerator.objects.all()}
    systems = {s.name: s for s in System.objects.all()}
    up = _Upserter(summary)
    with transaction.atomic():
        for index, bench in enumerate(parsed):
            values = benchmark_row_values(
                bench, accelerators=accelerators, systems=systems, profile=None
            )
            up.save(
                Benchmark, {"name": bench.name}, values, where=f"row {index + 1} ({bench.name})"
            )
    summary.counts = {"benchmarks": len(parsed)}
    return summary
