"""What allocations needs to know about the systems (catalog data, never code).

Facility choices are the active catalog profile's systems. Their status, the dates their
access ends, the data they may hold and their trial limit are the per-facility limits a
request is checked against; per-service limits (the Azure end date) are ServiceLimit rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.conf import settings

from allocations.models import Service
from catalog.models import System, SystemKind, SystemStatus
from catalog.selectors import profile_active

# System.kind -> the form's "Which service?" (seed 001 shows HPC and implies Azure).
_SERVICE_BY_KIND = {
    SystemKind.HPC_BATCH: Service.HPC,
    SystemKind.CLOUD: Service.AZURE,
    SystemKind.INTERACTIVE: Service.LOCAL,
    SystemKind.SECURE: Service.SECURE,
}


@dataclass(frozen=True)
class RequestField:
    """A question a system asks beyond the institute's form (a TRE's security tier)."""

    label: str
    help: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Facility:
    name: str
    display_name: str
    service: str
    status: str = SystemStatus.ACTIVE
    trial_gpu_hours: float | None = None
    data_sensitivity: tuple[str, ...] = ()
    closed_to_new_users_on: date | None = None
    access_ends_on: date | None = None
    pk: int | None = None
    request_fields: tuple[RequestField, ...] = ()


def _facility(system: System) -> Facility:
    # The earliest of the dates after which nobody can compute on the system.
    ends = [d for d in (system.compute_ends_on, system.access_ends_on) if d]
    return Facility(
        name=system.name,
        display_name=system.display_name,
        service=_SERVICE_BY_KIND.get(system.kind, Service.HPC),
        status=system.status,
        trial_gpu_hours=system.trial_gpu_hours,
        data_sensitivity=tuple(system.data_sensitivity or ()),
        closed_to_new_users_on=system.closed_to_new_users_on,
        access_ends_on=min(ends) if ends else None,
        pk=system.pk,
        request_fields=tuple(
            RequestField(
                label=str(field.get("label", "")),
                help=str(field.get("help", "")),
                choices=tuple(str(c) for c in field.get("choices") or ()),
            )
            for field in system.request_fields or ()
            if isinstance(field, dict) and field.get("label")
        ),
    )


def facility_list() -> list[Facility]:
    profile = profile_active()
    if profile is None:
        return []
    return [_facility(s) for s in System.objects.filter(profile=profile).order_by("display_name")]


def facility_get(name: str) -> Facility | None:
    system = System.objects.filter(name=name).first() if name else None
    return _facility(system) if system else None


def facilities_asking_more(facilities: list[Facility] | None = None) -> list[Facility]:
    """The open systems with their own request fields (secure environments), from
    `facilities` when the caller already read the active profile's list."""
    return [
        f
        for f in (facility_list() if facilities is None else facilities)
        if f.request_fields and f.status != SystemStatus.RETIRED
    ]


def facility_choices(
    *, extra: list[str] | None = None, facilities: list[Facility] | None = None
) -> list[tuple[str, str]]:
    """Systems researchers may ask for, plus any names the estimate itself mentions."""
    choices = [
        (
            f.name,
            f.display_name if f.status == SystemStatus.ACTIVE else f"{f.display_name} ({f.status})",
        )
        for f in (facility_list() if facilities is None else facilities)
        if f.status != SystemStatus.RETIRED
    ]
    known = {name for name, _label in choices}
    for name in extra or []:
        if name and name not in known:
            choices.append((name, name))
            known.add(name)
    return choices


def facility_offers_trial(facility_name: str) -> bool:
    """Whether trial access is known on this system: the catalog gives its trial hours.

    A system in the catalog without trial hours (Stanage, COSMA8, Dawn: the seed's trial
    access names only Baskerville and JADE 2) is never offered a trial; a name the catalog
    does not know falls back to the settings default, as trial_gpu_hours_limit does.
    """
    facility = facility_get(facility_name) if facility_name else None
    return facility is None or facility.trial_gpu_hours is not None


def trial_gpu_hours_limit(facility_name: str) -> float:
    facility = facility_get(facility_name) if facility_name else None
    if facility and facility.trial_gpu_hours is not None:
        return facility.trial_gpu_hours
    return settings.ALLOCATION_TRIAL_GPU_HOURS_DEFAULT
