"""Creating and editing allocation requests: from an advisor result, with the estimate frozen.

Checking fields lives in allocations.request_validation and the review workflow (every status
change) in allocations.transitions; both are re-exported here, so callers import services only.
"""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from allocations.models import (
    EDITABLE_STATUSES,
    AllocationEvent,
    AllocationRequest,
    Status,
)
from allocations.reestimate import estimate_for_facility
from allocations.request_validation import (
    EDITABLE_FIELDS,
    FACILITY_FIELD_MAX_CHARS,
    JUSTIFICATION_MIN_CHARS,
    REQUIRED_FOR_SUBMISSION,
    CheckedFields,
    _checked,
    _values,
    allocation_request_validate,
)
from allocations.transitions import (
    TRANSITIONS,
    Said,
    Transition,
    TransitionError,
    _submit_transition,
    _transition_apply,
    _transition_check,
    _transition_set,
    allocation_request_approve,
    allocation_request_is_closed,
    allocation_request_record_rerun,
    allocation_request_reject,
    allocation_request_request_changes,
    allocation_request_submit,
    allocation_request_transition,
    allocation_request_withdraw,
)
from catalog.models import System

__all__ = [
    "EDITABLE_FIELDS",
    "FACILITY_FIELD_MAX_CHARS",
    "JUSTIFICATION_MIN_CHARS",
    "REQUIRED_FOR_SUBMISSION",
    "TRANSITIONS",
    "CheckedFields",
    "Transition",
    "TransitionError",
    "allocation_request_approve",
    "allocation_request_create_from_session",
    "allocation_request_is_closed",
    "allocation_request_record_rerun",
    "allocation_request_reject",
    "allocation_request_request_changes",
    "allocation_request_submit",
    "allocation_request_transition",
    "allocation_request_update",
    "allocation_request_validate",
    "allocation_request_withdraw",
    "estimate_snapshot_from_session",
    "requested_gpu_hours_from_result",
]


def _system_for(facility_name: str) -> System | None:
    return System.objects.filter(name=facility_name).first() if facility_name else None


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
        _transition_apply(
            locked, transition=transition, actor=researcher, said=Said(message=message)
        )
    else:
        locked.save()
    return locked
