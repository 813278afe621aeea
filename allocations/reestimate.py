"""A request moved to another facility is estimated again for it (issue 16).

The engine runs again with the frozen inputs and the new system, through the same path as a
staff re-run (allocations.estimates.estimate_rerun); the new result is frozen into the request
and the old one kept in the snapshot's history, so staff see both. Where the engine cannot
size the work there (a secure environment without listed hardware, nothing fits), the old
estimate stays and the request page says plainly it was made for another system
(selectors.other_facility).

Such a refusal is recorded once in the snapshot (`facility_rerun_declined`: the facility, the
catalog version and the reason), and the engine is not run again on every later save until
the facility or the catalog changes.
"""

from __future__ import annotations

import math
from typing import Any

from django.utils import timezone

from allocations.estimates import EstimateUnavailable, estimate_rerun
from allocations.models import AllocationEvent, AllocationRequest
from catalog.models import CatalogVersion
from catalog.selectors import system_display_name

# The parts of a snapshot an earlier estimate keeps in the history.
_KEPT = ("request", "result", "engine_version", "project_plan")
# Where a re-run that could not size the work for the new facility is recorded, with why.
DECLINED = "facility_rerun_declined"


def _recommended_system(snapshot: dict[str, Any]) -> str:
    result = snapshot.get("result") or {}
    return (result.get("recommendation") or {}).get("system") or ""


def _plan_for(allocation_request: AllocationRequest, result: dict[str, Any]) -> dict | None:
    """The project's lines (runs, sweep, evaluation, development) around the new run, from the
    advisor session's answers; None where the session is gone or the work is not sized."""
    session = allocation_request.advisor_session
    if session is None:
        return None
    from advisor.engine.models import EstimateResult
    from advisor.flow_services import advisor_session_state, plan_for
    from advisor.flowchart import FlowchartError

    try:
        state = advisor_session_state(advisor_session=session)
        if state.outcome is None:
            return None
        plan = plan_for(
            fields=state.fields,
            result=EstimateResult.model_validate(result),
            outcome=state.outcome,
            catalog=state.catalog,
        )
    except (FlowchartError, ValueError):  # a retired chart, answers the plan cannot use
        return None
    return plan.as_dict() if plan is not None else None


def _hours(snapshot: dict[str, Any]) -> int | None:
    plan = snapshot.get("project_plan")
    if plan:
        return int(plan["total_gpu_hours"])
    result = snapshot.get("result") or {}
    hours = (result.get("recommendation") or {}).get("requested_gpu_hours")
    return None if hours is None else max(1, math.ceil(hours))


def _hours_words(hours: int | None) -> str:
    if hours is None:
        return "no estimate"
    return f"{hours:,} GPU hour{'' if hours == 1 else 's'}"


def estimate_for_facility(
    *, allocation_request: AllocationRequest, actor
) -> AllocationEvent | None:
    """Re-estimate a request (locked by the caller) whose facility is not the estimate's.

    Returns the unsaved history event when the estimate was replaced, else None (nothing to
    do, or the engine found no way to run the work there: the old estimate then stays).
    """
    snapshot = allocation_request.estimate_snapshot or {}
    estimated_for = _recommended_system(snapshot)
    facility = allocation_request.facility
    if not facility or not estimated_for or facility == estimated_for:
        return None
    if allocation_request.system_id is None or not snapshot.get("request"):
        return None  # not a catalog system, or nothing to re-run
    attempt = {"facility": facility, "catalog_version": CatalogVersion.objects.current()}
    declined = snapshot.get(DECLINED) or {}
    if all(declined.get(key) == value for key, value in attempt.items()):
        return None  # already tried against this catalog: the reason is recorded
    inputs = {**snapshot["request"], "accelerator": None, "num_gpus": None}
    try:
        result = estimate_rerun(
            snapshot={**snapshot, "request": inputs}, changes={"system": facility}
        )
    except EstimateUnavailable as exc:
        _record_declined(allocation_request, attempt, reason=str(exc))
        return None
    if _recommended_system({"result": result}) != facility:
        # No fitting option there: keep the estimate the researcher saw.
        reason = f"No option on {system_display_name(facility)} fits the work."
        _record_declined(allocation_request, attempt, reason=reason)
        return None
    earlier = {key: snapshot.get(key) for key in _KEPT}
    earlier["system"] = estimated_for
    earlier["replaced_at"] = timezone.now().isoformat()
    new_snapshot = {
        **snapshot,
        "request": {**inputs, "system": facility},
        "result": result,
        "engine_version": result.get("engine_version", ""),
        "project_plan": _plan_for(allocation_request, result),
        "history": [*(snapshot.get("history") or []), earlier],
    }
    new_snapshot.pop(DECLINED, None)
    allocation_request.estimate_snapshot = new_snapshot
    allocation_request.engine_version = new_snapshot["engine_version"][:40]
    system_name = allocation_request.system.display_name
    old_name = system_display_name(estimated_for)
    note = (
        f"Estimate re-run for {system_name} after the facility changed from {old_name}: "
        f"{_hours_words(_hours(snapshot))} on {old_name} before, "
        f"{_hours_words(_hours(new_snapshot))} on {system_name} now."
    )
    return AllocationEvent(
        allocation_request=allocation_request,
        actor=actor,
        from_status=allocation_request.status,
        to_status=allocation_request.status,
        message=note,
    )


def _record_declined(
    allocation_request: AllocationRequest, attempt: dict[str, Any], *, reason: str
) -> None:
    """Note in the snapshot (saved by the caller) why the facility's re-run was not used."""
    snapshot = allocation_request.estimate_snapshot or {}
    allocation_request.estimate_snapshot = {**snapshot, DECLINED: {**attempt, "reason": reason}}
