"""Every write to an allocation request: creation from an advisor result, edits, transitions.

All status changes go through `allocation_request_transition`, which locks the row, checks the
transition table, records an AllocationEvent and enqueues its e-mails after commit. The named
functions below (`allocation_request_approve`, ...) are what views, the admin and tests call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from allocations.facilities import Facility, facility_get, trial_gpu_hours_limit
from allocations.models import (
    CLOSED_STATUSES,
    EDITABLE_STATUSES,
    PENDING_STATUSES,
    RESEARCH_PURPOSE_MAX_CHARS,
    AllocationEvent,
    AllocationKind,
    AllocationRequest,
    ServiceLimit,
    Status,
)
from allocations.reestimate import estimate_for_facility
from catalog.models import System

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


class TransitionError(ValidationError):
    """A transition the workflow does not allow from the request's current status."""


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    target: str
    by_staff: bool
    message_required: str = ""  # the error shown when the message is missing


TRANSITIONS = {
    t.name: t
    for t in (
        Transition("submit", (Status.DRAFT,), Status.SUBMITTED, by_staff=False),
        Transition("resubmit", (Status.CHANGES_REQUESTED,), Status.RESUBMITTED, by_staff=False),
        Transition(
            "withdraw",
            (*EDITABLE_STATUSES, *PENDING_STATUSES),
            Status.WITHDRAWN,
            by_staff=False,
        ),
        Transition("approve", PENDING_STATUSES, Status.APPROVED, by_staff=True),
        Transition(
            "request_changes",
            PENDING_STATUSES,
            Status.CHANGES_REQUESTED,
            by_staff=True,
            message_required="Say what the researcher should change.",
        ),
        Transition(
            "reject",
            PENDING_STATUSES,
            Status.REJECTED,
            by_staff=True,
            message_required="Give the researcher the reason for the rejection.",
        ),
    )
}


# --- Validation -----------------------------------------------------------------------------


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

    cpu_hours = values.get("cpu_hours") or 0
    gpu_hours = values.get("gpu_hours") or 0
    service = values.get("service") or ""
    limit = _service_limit(service)
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

    facility_name = values.get("facility") or ""
    facility = facility_get(facility_name) if facility_name else None
    if facility and service and facility.service != service:
        add("facility", f"{facility.display_name} is not an {service.upper()} facility.")
    if facility and facility.status == "retired":
        add("facility", f"{facility.display_name} is retired: choose another facility.")
    today = timezone.localdate()
    if (
        facility
        and facility.closed_to_new_users_on
        and facility.closed_to_new_users_on <= today
        and values.get("allocation_kind") == "new"
    ):
        add(
            "allocation_kind",
            f"{facility.display_name} has taken no new allocations since "
            f"{_day(facility.closed_to_new_users_on)}.",
        )
    if facility and facility.access_ends_on and end and end > facility.access_ends_on:
        add(
            "end_date",
            f"Access to {facility.display_name} ends on {_day(facility.access_ends_on)}: "
            "end the allocation by then.",
        )
    sensitivity = values.get("data_sensitivity") or ""
    if (
        facility
        and sensitivity
        and facility.data_sensitivity
        and (sensitivity not in facility.data_sensitivity)
    ):
        allowed = ", ".join(facility.data_sensitivity)
        add(
            "data_sensitivity",
            f"{facility.display_name} is listed for {allowed} data only, not {sensitivity}.",
        )

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
    if errors:
        raise ValidationError(errors)
    return CheckedFields(values=dict(values), for_submission=for_submission, facility=facility)


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


def _system_display(name: str) -> str:
    system = System.objects.filter(name=name).only("display_name").first()
    return system.display_name if system else name


def _system_for(facility_name: str) -> System | None:
    return System.objects.filter(name=facility_name).first() if facility_name else None


def _values(allocation_request: AllocationRequest) -> dict[str, Any]:
    return {field: getattr(allocation_request, field) for field in EDITABLE_FIELDS}


# --- Creation and edits -----------------------------------------------------------------------


def estimate_snapshot_from_session(session) -> dict[str, Any]:
    """What the researcher saw, copied so later engine changes never alter the record."""
    result = session.estimate_result or {}
    return {
        "request": session.estimate_request or {},
        "result": result,
        "engine_version": session.engine_version or result.get("engine_version", ""),
        "answers": session.answers or {},
        # The project's lines (runs, sweep, evaluation, development) and their total.
        "project_plan": getattr(session, "project_plan", None),
        "session_completed_at": (
            session.completed_at.isoformat() if session.completed_at else None
        ),
    }


def _queue_fields_from_result(result: dict[str, Any]) -> dict[str, Any]:
    recommendation = result.get("recommendation") or {}
    return {
        "accelerator": recommendation.get("accelerator") or "",
        "num_gpus": recommendation.get("num_gpus"),
    }


def _queue_fields_follow_facility(allocation_request: AllocationRequest) -> None:
    """The accelerator and GPU count are the estimate's for its system only.

    A request moved to another facility no longer claims the estimated system's GPU (a CSV row
    "facility=stanage, accelerator=max1550-128" was the old behaviour): it takes the estimate's
    best fitting option on the new facility, or none; the page says the estimate was made for
    another system (selectors.other_facility).
    """
    result = (allocation_request.estimate_snapshot or {}).get("result") or {}
    recommendation = result.get("recommendation") or {}
    if not allocation_request.facility or allocation_request.facility == recommendation.get(
        "system"
    ):
        allocation_request.accelerator = recommendation.get("accelerator") or ""
        allocation_request.num_gpus = recommendation.get("num_gpus")
        return
    there = [
        o
        for o in result.get("options") or []
        if o.get("system") == allocation_request.facility and o.get("fits")
    ]
    best = min(there, key=lambda o: (o.get("rank") or 10**6, o.get("num_gpus") or 0), default=None)
    allocation_request.accelerator = (best or {}).get("accelerator") or ""
    allocation_request.num_gpus = (best or {}).get("num_gpus")


def requested_gpu_hours_from_result(result: dict[str, Any]) -> int | None:
    recommendation = result.get("recommendation") or {}
    hours = recommendation.get("requested_gpu_hours")
    if hours is None:
        return None
    return max(1, math.ceil(hours))  # requests are in whole hours; never round an estimate down


@transaction.atomic
def allocation_request_create_from_session(
    *, session, researcher, fields: dict[str, Any] | CheckedFields, submit: bool = False
) -> AllocationRequest:
    """A draft request holding the researcher's fields and a frozen copy of the estimate;
    with `submit`, submitted in the same transaction (one check of the fields, for submission).
    """
    if session.estimate_result is None:
        raise ValidationError("This advisor session has no estimate yet: finish the advisor first.")
    if session.user_id is not None and session.user_id != researcher.pk:
        raise ValidationError("This advisor session belongs to someone else.")
    checked = _checked(fields, for_submission=submit)
    snapshot = estimate_snapshot_from_session(session)
    allocation_request = AllocationRequest(
        researcher=researcher,
        advisor_session=session,
        estimate_snapshot=snapshot,
        engine_version=snapshot["engine_version"][:40],
        **_queue_fields_from_result(snapshot["result"]),
        **{k: v for k, v in checked.values.items() if k in EDITABLE_FIELDS},
    )
    _link_system(allocation_request, checked)
    reestimated = estimate_for_facility(allocation_request=allocation_request, actor=researcher)
    _queue_fields_follow_facility(allocation_request)
    _full_clean(allocation_request)
    events = [
        AllocationEvent(
            allocation_request=allocation_request,
            actor=researcher,
            from_status="",
            to_status=Status.DRAFT,
        )
    ]
    if reestimated is not None:
        events.append(reestimated)
    if submit:  # saved as submitted at once, with both events: the history shows the draft
        events.append(
            _transition_set(allocation_request, transition=TRANSITIONS["submit"], actor=researcher)
        )
    try:
        allocation_request.save(force_insert=True)
    except IntegrityError as exc:  # two tabs saving at once: the constraint decides
        raise ValidationError(
            "This advisor result already has an active allocation request."
        ) from exc
    events = AllocationEvent.objects.bulk_create(events)
    if session.user_id is None:
        session.user = researcher
        session.save(update_fields=["user", "updated_at"])
    if submit:
        from allocations.notifications import notifications_enqueue_for_event

        notifications_enqueue_for_event(event=events[-1])
    return allocation_request


def _link_system(allocation_request: AllocationRequest, checked: CheckedFields) -> None:
    """The catalog row behind the facility, from the check's own look-up when it made one."""
    facility = checked.facility
    if facility is not None and facility.name == allocation_request.facility:
        allocation_request.system_id = facility.pk
    else:
        allocation_request.system = _system_for(allocation_request.facility)


def _full_clean(allocation_request: AllocationRequest) -> None:
    """The model's field checks. Foreign keys were just read, and the table's constraints
    (checked by the database on save) were checked by allocation_request_validate: asking the
    database again would cost a query per foreign key and per constraint."""
    allocation_request.full_clean(
        exclude=["researcher", "advisor_session", "system"],
        validate_unique=False,
        validate_constraints=False,
    )


@transaction.atomic
def allocation_request_update(
    *,
    allocation_request: AllocationRequest,
    researcher,
    fields: dict[str, Any] | CheckedFields,
    submit: bool = False,
    message: str = "",
) -> AllocationRequest:
    """Save the researcher's edits; with `submit`, submit (or resubmit) them in the same
    transaction, checking the fields once, for submission."""
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    if locked.researcher_id != researcher.pk:
        raise ValidationError("Only the researcher who made this request can change it.")
    if locked.status not in EDITABLE_STATUSES:
        raise TransitionError(
            f"A request that is {locked.get_status_display().lower()} cannot be edited."
        )
    values = fields.values if isinstance(fields, CheckedFields) else fields
    for key, value in values.items():
        if key in EDITABLE_FIELDS:
            setattr(locked, key, value)
    if isinstance(fields, CheckedFields) and fields.covers(for_submission=submit):
        checked = fields
    else:
        checked = allocation_request_validate(values=_values(locked), for_submission=submit)
    _link_system(locked, checked)
    reestimated = estimate_for_facility(allocation_request=locked, actor=researcher)
    _queue_fields_follow_facility(locked)
    _full_clean(locked)
    if reestimated is not None:  # before a submission, so the history reads in order
        reestimated.save()
    if submit:
        transition = _submit_transition(locked)
        _transition_check(locked, transition=transition, actor=researcher, message=message)
        _transition_apply(locked, transition=transition, actor=researcher, message=message)
    else:
        locked.save()
    return locked


# --- Transitions ------------------------------------------------------------------------------


@transaction.atomic
def allocation_request_transition(
    *,
    allocation_request: AllocationRequest,
    action: str,
    actor,
    message: str = "",
    note: str = "",
    granted_gpu_hours: int | None = None,
) -> AllocationRequest:
    """Move a request along the workflow, once, under a row lock; record and notify."""
    transition = TRANSITIONS[action]
    # Two staff pressing approve at once: the second waits here, then sees APPROVED and fails.
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    _transition_check(locked, transition=transition, actor=actor, message=message)
    if transition.target in (Status.SUBMITTED, Status.RESUBMITTED):
        allocation_request_validate(values=_values(locked), for_submission=True)
    _transition_apply(
        locked,
        transition=transition,
        actor=actor,
        message=message,
        note=note,
        granted_gpu_hours=granted_gpu_hours,
    )
    return locked


def _transition_check(locked: AllocationRequest, *, transition: Transition, actor, message: str):
    """Who may take the transition, from which status, and whether it needs a message."""
    if transition.by_staff and not actor.is_staff:
        raise TransitionError("Only research-computing staff can review requests.")
    if not transition.by_staff and locked.researcher_id != actor.pk:
        raise TransitionError("Only the researcher who made this request can do that.")
    if locked.status not in transition.sources:
        raise TransitionError(
            f"Cannot {transition.name.replace('_', ' ')} a request that is "
            f"{locked.get_status_display().lower()}."
        )
    if transition.message_required and not (message or "").strip():
        raise ValidationError({"message": transition.message_required})


def _transition_apply(
    locked: AllocationRequest,
    *,
    transition: Transition,
    actor,
    message: str = "",
    note: str = "",
    granted_gpu_hours: int | None = None,
) -> AllocationEvent:
    """Take the transition, save, record the event and enqueue its e-mails. The caller holds
    the row and has checked the transition."""
    from allocations.notifications import notifications_enqueue_for_event

    event = _transition_set(
        locked,
        transition=transition,
        actor=actor,
        message=message,
        note=note,
        granted_gpu_hours=granted_gpu_hours,
    )
    locked.save()
    event.save()
    notifications_enqueue_for_event(event=event)
    return event


@transaction.atomic
def allocation_request_record_rerun(
    *, allocation_request: AllocationRequest, actor, changes: dict[str, Any], new_result: dict
) -> AllocationEvent:
    """A staff re-run of the estimate goes into the request's history (the status stays).

    The note (staff only) says what was changed and what the re-run gave, so a later reviewer
    sees why the hours were questioned; the frozen estimate itself is never altered.
    """
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    old = ((locked.estimate_snapshot or {}).get("result") or {}).get("recommendation") or {}
    new = (new_result or {}).get("recommendation") or {}
    changed = ", ".join(f"{key} = {value}" for key, value in sorted(changes.items())) or "none"

    def hours(rec: dict) -> str:
        value = rec.get("requested_gpu_hours")
        return "no estimate" if value is None else f"{math.ceil(value):,} GPU hours"

    note = (
        f"Estimate re-run with {changed}: {hours(old)} before, {hours(new)} now"
        + (f" on {_system_display(new['system'])}" if new.get("system") else "")
        + "."
    )
    return AllocationEvent.objects.create(
        allocation_request=locked,
        actor=actor,
        from_status=locked.status,
        to_status=locked.status,
        note=note,
    )


def _transition_set(
    allocation_request: AllocationRequest,
    *,
    transition: Transition,
    actor,
    message: str = "",
    note: str = "",
    granted_gpu_hours: int | None = None,
) -> AllocationEvent:
    """The new status and its dates on the request, and the unsaved event that records it."""
    now = timezone.now()
    if transition.target in (Status.SUBMITTED, Status.RESUBMITTED):
        allocation_request.submitted_at = now
        # Waiting for a decision again: the earlier "changes requested" stays in the history
        # with its own time, and "Decided at" no longer shows it as if it were the decision.
        allocation_request.decided_at = None
    if transition.target == Status.APPROVED:
        granted_gpu_hours = _granted_hours(allocation_request, granted_gpu_hours)
        allocation_request.granted_gpu_hours = granted_gpu_hours
    else:
        granted_gpu_hours = None
    if transition.by_staff:
        allocation_request.decided_at = now
    from_status = allocation_request.status
    allocation_request.status = transition.target
    return AllocationEvent(
        allocation_request=allocation_request,
        actor=actor,
        from_status=from_status,
        to_status=transition.target,
        message=(message or "").strip(),
        note=(note or "").strip(),
        granted_gpu_hours=granted_gpu_hours,
    )


def _granted_hours(locked: AllocationRequest, granted_gpu_hours: int | None) -> int:
    if granted_gpu_hours is None:
        granted_gpu_hours = locked.gpu_hours
    if granted_gpu_hours <= 0:
        raise ValidationError({"granted_gpu_hours": "Grant more than 0 GPU hours."})
    if granted_gpu_hours > settings.ALLOCATION_MAX_GPU_HOURS:
        raise ValidationError(
            {
                "granted_gpu_hours": (
                    f"At most {settings.ALLOCATION_MAX_GPU_HOURS:,} GPU hours can be granted."
                )
            }
        )
    return granted_gpu_hours


def _submit_transition(allocation_request: AllocationRequest) -> Transition:
    """A draft is submitted; a request sent back for changes is resubmitted."""
    if allocation_request.status == Status.CHANGES_REQUESTED:
        return TRANSITIONS["resubmit"]
    return TRANSITIONS["submit"]


@transaction.atomic
def allocation_request_submit(
    *, allocation_request, researcher, message: str = ""
) -> AllocationRequest:
    """Submit a draft, or resubmit a request staff sent back for changes (with a note): which
    one is read from the row under its lock, so a stale copy in the caller's hands is fine."""
    locked = AllocationRequest.objects.select_for_update().get(pk=allocation_request.pk)
    return allocation_request_transition(
        allocation_request=locked,
        action=_submit_transition(locked).name,
        actor=researcher,
        message=message,
    )


def allocation_request_withdraw(*, allocation_request, researcher, message: str = ""):
    return allocation_request_transition(
        allocation_request=allocation_request,
        action="withdraw",
        actor=researcher,
        message=message,
    )


def allocation_request_approve(
    *,
    allocation_request,
    reviewer,
    granted_gpu_hours: int | None = None,
    message: str = "",
    note: str = "",
) -> AllocationRequest:
    return allocation_request_transition(
        allocation_request=allocation_request,
        action="approve",
        actor=reviewer,
        granted_gpu_hours=granted_gpu_hours,
        message=message,
        note=note,
    )


def allocation_request_request_changes(
    *, allocation_request, reviewer, message: str, note: str = ""
) -> AllocationRequest:
    return allocation_request_transition(
        allocation_request=allocation_request,
        action="request_changes",
        actor=reviewer,
        message=message,
        note=note,
    )


def allocation_request_reject(
    *, allocation_request, reviewer, message: str, note: str = ""
) -> AllocationRequest:
    return allocation_request_transition(
        allocation_request=allocation_request,
        action="reject",
        actor=reviewer,
        message=message,
        note=note,
    )


def allocation_request_is_closed(allocation_request: AllocationRequest) -> bool:
    return allocation_request.status in CLOSED_STATUSES
