"""The result page: the outcome, the estimate and its alternatives, and what to do next."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET

from advisor import flow_services
from advisor.engine.device_memory import device_bytes
from advisor.engine.memory import PHASES
from advisor.engine.models import EstimateResult, Option
from advisor.engine.ranking import alternatives as alternatives_of
from advisor.engine.words import hours
from advisor.flow_requests import outcome_systems
from advisor.flow_results import (
    cpu_advice_for,
    deadline_warning,
    estimate_problem,
    hosting_justification,
    hosting_plan_for,
    project_pays,
    secure_route_for,
    session_justification,
)
from advisor.flow_services import FlowState
from advisor.memory_svg import COMPONENTS, MemoryBar, memory_chart_svg
from advisor.models import AdvisorSession
from advisor.view_helpers import (
    cacheable_page,
    cached_page,
    chart_gone,
    complete_session,
    flow_url,
    journey,
    load_page_session,
    page_cache_key,
)
from catalog.templatetags.catalog_format import gigabytes

# --- The result -------------------------------------------------------------------------------


def _allocation_url(advisor_session: AdvisorSession) -> str:
    return reverse("allocations:request-create", kwargs={"session_id": advisor_session.id})


def _names(catalog) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    systems = {s.name: s.display_name for s in catalog.systems}
    accelerators = {a.name: a.display_name for a in catalog.accelerators}
    capacity = {a.name: device_bytes(a) for a in catalog.accelerators}
    return systems, accelerators, capacity


def _option_label(option: Option, systems, accelerators) -> str:
    gpu = accelerators.get(option.accelerator, option.accelerator)
    system = systems.get(option.system, option.system)
    return f"{gpu} x {option.num_gpus} on {system}"


def _memory_bars(
    result: EstimateResult, shown: list[Option], systems, accelerators, capacity
) -> list[MemoryBar]:
    bars = []
    for option in shown:
        breakdown = option.memory or result.memory
        components = {key: getattr(breakdown, key) for key, _ in COMPONENTS}
        cap = option.capacity_bytes or capacity.get(option.accelerator)
        bars.append(
            MemoryBar(
                _option_label(option, systems, accelerators), int(cap) if cap else None, components
            )
        )
    return bars


# The alternatives table sorts by these (a link per column header; works without JavaScript).
ALTERNATIVE_SORTS = {
    "rank": ("ranking", None),
    "gpu_hours": ("GPU hours", lambda o: o.requested_gpu_hours),
    "wall": ("wall time", lambda o: o.wall_hours),
    "cost": ("charged cost", lambda o: _compared_charge(o)),
}


def _compared_charge(option: Option) -> float | None:
    """The charge the ranking compares (in the profile's currency): a charge in another
    currency without a conversion sorts with the unknown ones, never by its bare number. A
    result stored before charges carried that figure compares its totals, as it was ranked."""
    charge = option.charge
    if charge is None:
        return None
    if "compared_total" in charge.model_fields_set:
        return charge.compared_total
    return charge.total


def _alternatives(result: EstimateResult, sort: str) -> list[Option]:
    """The engine's alternatives (best option per system and GPU, in ranking order); a result
    stored before the engine listed them gets the same from its ranked options. `sort` only
    re-orders the table by a column, unknown values last."""
    found = list(result.alternatives) or alternatives_of(
        list(result.options), result.recommendation
    )
    key = ALTERNATIVE_SORTS.get(sort, ALTERNATIVE_SORTS["rank"])[1]
    if key is None:
        return found
    return sorted(found, key=lambda o: (key(o) is None, key(o) or 0.0))


def _gb(n_bytes: float) -> str:
    return gigabytes(n_bytes, places=2)


def _memory_range(result) -> str:
    """The engine's stated memory range for the recommendation, in words."""
    u = result.uncertainty or {}
    low, high = u.get("memory_low_bytes"), u.get("memory_high_bytes")
    if not low or not high:
        return ""
    return f"likely {low / 1e9:,.1f} to {high / 1e9:,.1f} GB ({_basis(u, 'memory')})"


def _gpu_hours_range(result) -> str:
    """The engine's stated range of the recommendation's compute GPU hours, in words."""
    u = result.uncertainty or {}
    low, high = u.get("gpu_hours_low"), u.get("gpu_hours_high")
    if low is None or high is None:
        return ""
    return f"likely {hours(low)} to {hours(high)} ({_basis(u, 'gpu_hours')})"


def _basis(uncertainty: dict, quantity: str) -> str:
    points = int(uncertainty.get(f"{quantity}_test_points") or 0)
    if not points:
        return "the engine's calibration margin"
    return (
        f"the range that held for 80% of {points} published measurements the engine was not "
        "tuned on"
    )


EXPERIENCE_TIPS = {
    "none": "New to HPC? Batch systems run your script from a queue: start with a short test "
    "job (a few minutes, one GPU) using the starter script, check it with seff or "
    "sstat, then scale up. Trial access, where a system offers it, suits this first "
    "step (the Turing's HPC Days 2024 talk).",
    "some": "Run a short test job first and check its memory and speed before the full run.",
}


def _state_at_outcome(advisor_session: AdvisorSession) -> FlowState:
    """The session's state; at an outcome whose estimate failed it estimates again first (a
    model lookup may have ended since) rather than show an old failure."""
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    stored = advisor_session.estimate_result or {}
    if state.path.outcome and isinstance(stored, dict) and stored.get("error"):
        flow_services.advisor_session_refresh_result(advisor_session=advisor_session)
        advisor_session.refresh_from_db()
        state = flow_services.advisor_session_state(advisor_session=advisor_session)
    return state


@require_GET
@chart_gone
def flow_result(request: HttpRequest, session_id, embed: bool = False) -> HttpResponse:
    advisor_session = load_page_session(request, session_id)
    sort = request.GET.get("sort", "rank")
    # Kept: the page in each of its sorts. Any other query string is allowed but not kept, so
    # made-up addresses cannot fill the cache.
    keep = set(request.GET) <= {"sort"} and len(request.GET.getlist("sort")) <= 1
    if sort not in ALTERNATIVE_SORTS:
        sort, keep = "rank", False
    # A failed estimate is tried again on every visit (below), so its page is never kept.
    keep = keep and not advisor_session.estimate_error
    cache_key = page_cache_key(request, advisor_session, "result", sort, embed) if keep else None
    cached = cached_page(request, cache_key, advisor_session=advisor_session)
    if cached is not None:
        return cached
    complete_session(advisor_session)
    state = _state_at_outcome(advisor_session)
    if not state.path.outcome:
        return redirect(
            flow_url("step", embed=embed, session_id=advisor_session.id, step=state.path.current)
        )
    stored = advisor_session.estimate_result or {}
    error = stored.get("error", "") if isinstance(stored, dict) else ""
    result = EstimateResult.model_validate(stored) if stored and not error else None
    context = _outcome_context(request, advisor_session, state, result, embed=embed)
    context["estimate_error"] = error
    if error:
        problem = estimate_problem(state=state, error=error)
        context["estimate_problem"] = problem
        if problem.step is not None:
            context["estimate_problem_url"] = flow_url(
                "step", embed=embed, session_id=advisor_session.id, step=problem.step
            )
    if result is not None:
        context.update(_estimate_context(advisor_session, state, result, sort=sort))
    state.catalog  # noqa: B018 - the page shows catalog names: kept with the catalog's stamp
    return cacheable_page(request, "advisor/result.html", context, cache_key=cache_key, state=state)


def _outcome_context(
    request: HttpRequest,
    advisor_session: AdvisorSession,
    state: FlowState,
    result: EstimateResult | None,
    *,
    embed: bool,
) -> dict[str, Any]:
    """What every outcome shows: the path, the advice, links on, hosting and the secure route."""
    outcome = state.outcome
    assert outcome is not None
    context: dict[str, Any] = {
        "advisor_session": advisor_session,
        "chart": state.chart,
        "outcome": outcome,
        "embed": embed,
        "journey": journey(state, advisor_session, embed=embed),
        "result": result,
        "cpu": cpu_advice_for(state=state)
        if outcome.advice in ("cpu_interactive", "cpu_batch")
        else None,
        "allocation_url": _allocation_url(advisor_session),
        "chart_url": flow_url("session-chart", embed=False, session_id=advisor_session.id),
        "resume_url": request.build_absolute_uri(
            flow_url("resume", embed=False, session_id=advisor_session.id)
        ),
        "restart_url": flow_url("start", embed=embed),
        "experience_tip": EXPERIENCE_TIPS.get(state.fields.get("hpc_experience", ""), ""),
        "plan": advisor_session.project_plan,
        "systems_sentence": outcome_systems(outcome=outcome, catalog=state.catalog).sentence(
            state.catalog, outcome
        )
        if outcome.advice in ("gpu_estimate", "cloud")
        else "",
        "project_pays": project_pays(state.fields),
        "hosting": hosting_plan_for(state=state, result=result) if result is not None else None,
    }
    if outcome.advice == "secure":
        context["secure"] = secure_route_for(
            state=state, result=result, plan=advisor_session.project_plan
        )
    if context["hosting"] is not None:
        from advisor.engine.hosting import months_text

        context["hosting_months_text"] = months_text(context["hosting"].months)
        context["hosting_justification"] = hosting_justification(
            plan=context["hosting"], catalog=state.catalog, params=result.params_total
        )
        context["experience_tip"] = ""
    return context


def _estimate_context(
    advisor_session: AdvisorSession, state: FlowState, result: EstimateResult, *, sort: str
) -> dict[str, Any]:
    """The estimate: recommendation, alternatives (sorted by a column), memory, justification."""
    systems, accelerators, capacity = _names(state.catalog)
    alternatives = _alternatives(result, sort)
    shown = ([result.recommendation] if result.recommendation else []) + alternatives[:3]
    rec = result.recommendation
    return {
        "alternatives": [
            {"option": o, "label": _option_label(o, systems, accelerators)} for o in alternatives
        ],
        "alternative_sort": sort,
        "alternative_sorts": [
            {"key": key, "words": words} for key, (words, _) in ALTERNATIVE_SORTS.items()
        ],
        "recommendation_label": _option_label(rec, systems, accelerators) if rec else "",
        "memory_svg": memory_chart_svg(
            bars=_memory_bars(result, shown, systems, accelerators, capacity)
        ),
        "memory_rows": [
            {"label": label, "gb": _gb(getattr(result.memory, key))}
            for key, label in COMPONENTS
            if getattr(result.memory, key)
        ],
        "memory_total": _gb(result.memory.total_bytes),
        "memory_phase": PHASES.get(result.memory.peak_phase, ""),
        "rec_memory": _gb(rec.memory_per_gpu_bytes) if rec else "",
        "justification": session_justification(
            state=state, result=result, plan=advisor_session.project_plan
        ),
        "memory_range": _memory_range(result),
        "gpu_hours_range": _gpu_hours_range(result),
        "deadline_warning": deadline_warning(
            state=state, wall_hours=rec.wall_hours if rec else None
        ),
    }
