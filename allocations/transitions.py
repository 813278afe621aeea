"""The review workflow: every status change, once, under a row lock, recorded and announced.

All status changes go through `allocation_request_transition`, which locks the row, checks the
transition table, records an AllocationEvent and enqueues its e-mails after commit. The named
functions below (`allocation_request_approve`, ...) are what views, the admin and tests call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from advisor.engine.words import plural
from allocations.models import (
    CLOSED_STATUSES,
    EDITABLE_STATUSES,
    PENDING_STATUSES,
    AllocationEvent,
    AllocationRequest,
    Status,
)
from allocations.request_validation import _values, allocation_request_validate
from catalog.selectors import accelerator_display_name, system_display_name


class TransitionError(ValidationError):
    """A transition the workflow does not allow from the request's current status."""


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    target: str
    by_staff: bool
    message_required: str = ""  # the error shown when the message is missing


@dataclass(frozen=True)
class Said:
    """What comes with a transition: the researcher's or staff's words and granted hours."""

    message: str = ""
    note: str = ""
    granted_gpu_hours: int | None = None


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


def _change_words(key: str, value: Any) -> str:
    """One changed assumption as staff read it: "6 epochs", "the NVIDIA A100 80GB", "bf16"."""
    if key == "epochs":
        return plural(value, "epoch")
    if key == "accelerator":
        return f"the {accelerator_display_name(value)}"
    if key == "precision":
        return f"{value} precision"
    return f"{key.replace('_', ' ')} {value}"


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
    said = Said(message=message, note=note, granted_gpu_hours=granted_gpu_hours)
    _transition_apply(locked, transition=transition, actor=actor, said=said)
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
    locked: AllocationRequest, *, transition: Transition, actor, said: Said | None = None
) -> AllocationEvent:
    """Take the transition, save, record the event and enqueue its e-mails. The caller holds
    the row and has checked the transition."""
    from allocations.notifications import notifications_enqueue_for_event

    event = _transition_set(locked, transition=transition, actor=actor, said=said)
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
    changed = ", ".join(_change_words(key, value) for key, value in sorted(changes.items()))
    changed = changed or "nothing changed"

    def hours(rec: dict) -> str:
        value = rec.get("requested_gpu_hours")
        return "no estimate" if value is None else f"{math.ceil(value):,} GPU hours"

    note = (
        f"Estimate re-run with {changed}: {hours(old)} before, {hours(new)} now"
        + (f" on {system_display_name(new['system'])}" if new.get("system") else "")
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
    said: Said | None = None,
) -> AllocationEvent:
    """The new status and its dates on the request, and the unsaved event that records it."""
    said = said or Said()
    granted_gpu_hours = said.granted_gpu_hours
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
        message=(said.message or "").strip(),
        note=(said.note or "").strip(),
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


def _staff_decision(action: str):
    """The service for one of the table's staff decisions: the reviewer is the actor, and the
    transition (who, from where, whether a message is required) is TRANSITIONS[action]."""
    transition = TRANSITIONS[action]
    assert transition.by_staff, action

    def decide(
        *,
        allocation_request,
        reviewer,
        message: str = "",
        note: str = "",
        granted_gpu_hours: int | None = None,
    ) -> AllocationRequest:
        return allocation_request_transition(
            allocation_request=allocation_request,
            action=action,
            actor=reviewer,
            message=message,
            note=note,
            granted_gpu_hours=granted_gpu_hours,  # only an approval keeps it (_transition_set)
        )

    decide.__name__ = decide.__qualname__ = f"allocation_request_{action}"
    decide.__doc__ = f"Staff {action.replace('_', ' ')} a pending request: TRANSITIONS[{action!r}]."
    return decide


allocation_request_approve = _staff_decision("approve")
allocation_request_request_changes = _staff_decision("request_changes")
allocation_request_reject = _staff_decision("reject")


def allocation_request_is_closed(allocation_request: AllocationRequest) -> bool:
    return allocation_request.status in CLOSED_STATUSES
