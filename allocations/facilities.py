"""What allocations needs to know about the systems: names, service, trial limit, status.

The catalog app owns the systems (`catalog.selectors.engine_catalog()`, engine SystemSpec
models). This module is the one place allocations reads them, so a catalog that is missing
or empty degrades to "facility names from the estimate" instead of breaking the form.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from django.conf import settings

from allocations.models import Service

# SystemSpec.kind -> the form's "Which service?" (seed 001 shows HPC and implies Azure).
_SERVICE_BY_KIND = {"hpc_batch": Service.HPC, "cloud": Service.AZURE, "interactive": Service.LOCAL}


@dataclass(frozen=True)
class Facility:
    name: str
    display_name: str
    service: str
    status: str = "active"
    trial_gpu_hours: float | None = None


def _catalog_systems() -> list:
    try:
        engine_catalog = import_module("catalog.selectors").engine_catalog
    except (ImportError, AttributeError):  # no catalog selectors yet: names from the estimate
        return []
    return list(engine_catalog().systems)


def facility_list() -> list[Facility]:
    return [
        Facility(
            name=system.name,
            display_name=system.display_name,
            service=_SERVICE_BY_KIND.get(system.kind, Service.HPC),
            status=system.status,
            trial_gpu_hours=system.trial_gpu_hours,
        )
        for system in _catalog_systems()
    ]


def facility_get(name: str) -> Facility | None:
    return next((f for f in facility_list() if f.name == name), None)


def facility_choices(*, extra: list[str] | None = None) -> list[tuple[str, str]]:
    """Active systems from the catalog, plus any names the estimate itself mentions."""
    choices = [
        (f.name, f.display_name if f.status == "active" else f"{f.display_name} ({f.status})")
        for f in facility_list()
        if f.status != "retired"
    ]
    known = {name for name, _label in choices}
    for name in extra or []:
        if name and name not in known:
            choices.append((name, name))
            known.add(name)
    return choices


def trial_gpu_hours_limit(facility_name: str) -> float:
    facility = facility_get(facility_name) if facility_name else None
    if facility and facility.trial_gpu_hours is not None:
        return facility.trial_gpu_hours
    return settings.ALLOCATION_TRIAL_GPU_HOURS_DEFAULT
