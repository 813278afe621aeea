"""Checking a request's fields: one clear message per field, drafts without completeness.

The form checks once and hands the result (CheckedFields) to the services, which take it
instead of checking the same fields again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from allocations.facilities import Facility, facility_get, trial_gpu_hours_limit
from allocations.models import (
    RESEARCH_PURPOSE_MAX_CHARS,
    AllocationKind,
    AllocationRequest,
    ServiceLimit,
)

# Fields a researcher fills in (the institute's form). Everything else is set by services.
EDITABLE_FIELDS = (
    "caller_name",
    "caller_branch",
    "project_title",
    "project_code",
    "research_area",
    "pi_name",
    "pi_email",
    "research_purpose",
    "service",
    "facility",
    "allocation_kind",
    "cpu_hours",
    "gpu_hours",
    "start_date",
    "end_date",
    "data_sensitivity",
    "justification",
    "trial",
    "facility_fields",
)
REQUIRED_FOR_SUBMISSION = (
    "project_title",
    "project_code",
    "research_area",
    "pi_name",
    "pi_email",
    "service",
    "facility",
    "allocation_kind",
    "start_date",
    "end_date",
    "data_sensitivity",
)
# A full (non-trial) request explains itself in at least a sentence.
JUSTIFICATION_MIN_CHARS = 40
# One answer to a secure environment's own question (a reference, a tier, an agreement).
FACILITY_FIELD_MAX_CHARS = 500


def _service_limit(service: str) -> ServiceLimit | None:
    if not service:
        return None
    return ServiceLimit.objects.filter(service=service).first()


@dataclass(frozen=True)
class CheckedFields:
    """A request's fields that passed `allocation_request_validate`, and for what.

    The form checks the fields once and hands this on; services take it instead of checking
    again, so one request is validated once however many services it passes through.
    """

    values: dict[str, Any]
    for_submission: bool
    facility: Facility | None = None

    def covers(self, *, for_submission: bool) -> bool:
        complete = all(name in self.values for name in EDITABLE_FIELDS)
        return complete and (self.for_submission or not for_submission)


def allocation_request_validate(*, values: dict[str, Any], for_submission: bool) -> CheckedFields:
    """Raise ValidationError with one clear message per field; drafts skip completeness."""
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if for_submission:
        for field in REQUIRED_FOR_SUBMISSION:
            if values.get(field) in (None, ""):
                label = AllocationRequest._meta.get_field(field).verbose_name
                add(field, f"Fill in the {label} before submitting.")
    limit = _service_limit(values.get("service") or "")
    _check_hours(values, limit, for_submission, add)
    _check_dates(values, limit, for_submission, add)
    facility_name = values.get("facility") or ""
    facility = facility_get(facility_name) if facility_name else None
    if facility:
        _check_facility(values, facility, add)
    purpose = values.get("research_purpose") or ""
    if len(purpose) > RESEARCH_PURPOSE_MAX_CHARS:
        add(
            "research_purpose",
            f"Say what the research is for in at most {RESEARCH_PURPOSE_MAX_CHARS:,} characters "
            f"(it has {len(purpose):,}); the details belong in the justification.",
        )
    values = {**values, "facility_fields": _facility_fields_check(values, facility, add)}
    if for_submission and facility:
        _facility_fields_complete(values["facility_fields"], facility, add)
    _check_justification(values, facility_name, for_submission, add)
    if errors:
        raise ValidationError(errors)
    return CheckedFields(values=dict(values), for_submission=for_submission, facility=facility)


def _check_hours(values: dict[str, Any], limit, for_submission: bool, add) -> None:
    cpu_hours = values.get("cpu_hours") or 0
    gpu_hours = values.get("gpu_hours") or 0
    max_gpu = (
        limit.max_gpu_hours
        if limit and limit.max_gpu_hours is not None
        else settings.ALLOCATION_MAX_GPU_HOURS
    )
    max_cpu = (
        limit.max_cpu_hours
        if limit and limit.max_cpu_hours is not None
        else settings.ALLOCATION_MAX_CPU_HOURS
    )
    if cpu_hours < 0:
        add("cpu_hours", "CPU hours cannot be negative.")
    elif cpu_hours > max_cpu:
        add("cpu_hours", f"At most {max_cpu:,} CPU hours can be requested at once.")
    if gpu_hours < 0:
        add("gpu_hours", "GPU hours cannot be negative.")
    elif gpu_hours > max_gpu:
        add("gpu_hours", f"At most {max_gpu:,} GPU hours can be requested at once.")
    elif for_submission and gpu_hours == 0:
        add("gpu_hours", "Request more than 0 GPU hours: every facility here is a GPU service.")


def _check_dates(values: dict[str, Any], limit, for_submission: bool, add) -> None:
    start: date | None = values.get("start_date")
    end: date | None = values.get("end_date")
    if start and end and end <= start:
        add("end_date", "The end date must be after the start date.")
    if for_submission and end and end < timezone.localdate():
        add("end_date", "The end date is in the past.")
    if (
        for_submission
        and start
        and start < timezone.localdate()
        and values.get("allocation_kind") == AllocationKind.NEW
    ):
        add("start_date", "A new allocation cannot start in the past: choose today or later.")
    if end and limit and limit.latest_end_date and end > limit.latest_end_date:
        add(
            "end_date",
            f"{limit.get_service_display()} requests can end no later than "
            f"{_day(limit.latest_end_date)}.",
        )


def _check_facility(values: dict[str, Any], facility: Facility, add) -> None:
    """The facility's own limits: its service, status, dates and the data it may hold."""
    service = values.get("service") or ""
    end: date | None = values.get("end_date")
    if service and facility.service != service:
        add("facility", f"{facility.display_name} is not an {service.upper()} facility.")
    if facility.status == "retired":
        add("facility", f"{facility.display_name} is retired: choose another facility.")
    today = timezone.localdate()
    if (
        facility.closed_to_new_users_on
        and facility.closed_to_new_users_on <= today
        and values.get("allocation_kind") == "new"
    ):
        add(
            "allocation_kind",
            f"{facility.display_name} has taken no new allocations since "
            f"{_day(facility.closed_to_new_users_on)}.",
        )
    if facility.access_ends_on and end and end > facility.access_ends_on:
        add(
            "end_date",
            f"Access to {facility.display_name} ends on {_day(facility.access_ends_on)}: "
            "end the allocation by then.",
        )
    sensitivity = values.get("data_sensitivity") or ""
    if sensitivity and facility.data_sensitivity and sensitivity not in facility.data_sensitivity:
        allowed = ", ".join(facility.data_sensitivity)
        add(
            "data_sensitivity",
            f"{facility.display_name} is listed for {allowed} data only, not {sensitivity}.",
        )


def _check_justification(
    values: dict[str, Any], facility_name: str, for_submission: bool, add
) -> None:
    gpu_hours = values.get("gpu_hours") or 0
    justification = (values.get("justification") or "").strip()
    if values.get("trial"):
        trial_limit = trial_gpu_hours_limit(facility_name)
        if gpu_hours > trial_limit:
            add(
                "trial",
                f"Trial access is limited to {trial_limit:g} GPU hours; untick trial to request "
                f"{gpu_hours:,} GPU hours as a full allocation.",
            )
    elif for_submission and len(justification) < JUSTIFICATION_MIN_CHARS:
        add(
            "justification",
            f"Explain why this platform suits the work (at least {JUSTIFICATION_MIN_CHARS} "
            "characters), or ask for trial access.",
        )


def _facility_fields_check(values: dict[str, Any], facility: Facility | None, add) -> list:
    """The answers to the facility's own questions, tidied: [{"label", "value"}] in its order.

    Answers to questions the facility does not ask, overlong ones and ones outside the
    operator's choices are refused with the question named.
    """
    raw = values.get("facility_fields") or []
    if not isinstance(raw, list) or not all(
        isinstance(item, dict)
        and isinstance(item.get("label"), str)
        and isinstance(item.get("value", ""), str)
        for item in raw
    ):
        add("facility_fields", "Give the secure environment's details as question and answer.")
        return []
    asked = {field.label: field for field in facility.request_fields} if facility else {}
    given: dict[str, str] = {}
    for item in raw:
        label, value = item["label"], item.get("value", "").strip()
        field = asked.get(label)
        if field is None:
            if value:
                where = facility.display_name if facility else "The chosen facility"
                add("facility_fields", f"{where} does not ask for “{label[:200]}”.")
            continue
        if len(value) > FACILITY_FIELD_MAX_CHARS:
            add(
                "facility_fields",
                f"{label}: at most {FACILITY_FIELD_MAX_CHARS} characters (it has {len(value):,}).",
            )
        elif "\x00" in value:
            add("facility_fields", f"{label}: remove the null character.")
        elif value and field.choices and value not in field.choices:
            add("facility_fields", f"{label}: choose one of {', '.join(field.choices)}.")
        given[label] = value
    return [
        {"label": field.label, "value": given[field.label]}
        for field in asked.values()
        if given.get(field.label)
    ]


def _facility_fields_complete(answers: list, facility: Facility, add) -> None:
    answered = {item["label"] for item in answers}
    for field in facility.request_fields:
        if field.label not in answered:
            add(
                "facility_fields",
                f"{facility.display_name} also needs “{field.label}” before submitting.",
            )


def _checked(fields: dict[str, Any] | CheckedFields, *, for_submission: bool) -> CheckedFields:
    """The fields as checked by the caller's form, or checked here when they were not."""
    if isinstance(fields, CheckedFields) and fields.covers(for_submission=for_submission):
        return fields
    values = fields.values if isinstance(fields, CheckedFields) else fields
    return allocation_request_validate(values=values, for_submission=for_submission)


def _day(value: date) -> str:
    return f"{value.day} {value:%B %Y}"


def _values(allocation_request: AllocationRequest) -> dict[str, Any]:
    return {field: getattr(allocation_request, field) for field in EDITABLE_FIELDS}
