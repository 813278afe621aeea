"""The advisor flow: the active chart, sessions, answers and the result stored at an outcome.

Writes go through the `advisor_session_*` services; views stay thin. The decisions on a path
are in `flow_decisions`, the engine's request in `flow_requests`, and what the result page
says beyond the estimate in `flow_results`. The catalog comes from
`advisor.engine_catalog` at most once per request, when first needed (a state passes its
reader on), so decisions and results use the same numbers.
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from advisor.chart_walk import (
    AnswerError,
    Walk,
    answer_fields,
    clean_answer,
    effective_answers,
    walk,
)
from advisor.engine import estimate
from advisor.engine.models import (
    CatalogSpec,
    EstimateResult,
)
from advisor.flow_decisions import CatalogReader, decider, model_lookup_start
from advisor.flow_requests import estimate_request_for, plan_for, sizing_request, wants_gpu_estimate
from advisor.flow_results import session_justification
from advisor.flowchart import Flowchart, FlowchartError, Node, available_charts, load_chart
from advisor.models import ActiveFlowchart, AdvisorSession
from catalog_schema import TASK_LABELS

logger = logging.getLogger(__name__)

GPU_TASKS = set(TASK_LABELS)
SENSITIVE = {"confidential", "restricted"}


class StepNotOnPath(Exception):
    """A step that exists in the chart but is not one the researcher's answers lead to."""


# --- Charts and catalog -----------------------------------------------------------------------


# The active charts that loaded in this process, most recent last: what researchers get if the
# active chart's file is later broken on disk (edited in place, half deployed).
_good_chart_keys: list[str] = []


def active_chart() -> tuple[str, str]:
    """The chart new sessions use, and a warning for staff when it is not the one they chose.

    A chart that no longer loads never becomes an error page: researchers get the chart that
    was active before it (the last other chart that loaded in this process), else the bundled
    default, and staff are told why.
    """
    row = ActiveFlowchart.objects.order_by("pk").first()
    chosen = row.chart if row else "default"
    key = chosen if chosen in available_charts() else "default"
    try:
        load_chart(key)
    except FlowchartError as exc:
        problem = str(exc)
    else:
        if key in _good_chart_keys:
            _good_chart_keys.remove(key)
        _good_chart_keys.append(key)
        return key, ""
    for fallback in dict.fromkeys([*reversed(_good_chart_keys), "default"]):
        if fallback == key:
            continue
        try:
            load_chart(fallback)
        except FlowchartError:
            continue
        logger.error("Active flowchart %r does not load (%s); using %r", key, problem, fallback)
        return fallback, (
            f"The active flowchart “{key}” does not load ({problem}). Researchers get "
            f"“{fallback}” until it is fixed or another chart is chosen."
        )
    raise FlowchartError(problem)


def active_chart_key() -> str:
    return active_chart()[0]


def active_flowchart_set(*, chart: str, user=None) -> ActiveFlowchart:
    # Refuses a chart that does not load, or whose outcomes route to retired systems, with
    # the node and field named.
    chart_validate_systems(chart=load_chart(chart))
    row = ActiveFlowchart.objects.order_by("pk").first() or ActiveFlowchart()
    row.chart = chart
    row.changed_by = user
    row.full_clean()
    row.save()
    return row


def chart_validate_systems(*, chart: Flowchart) -> None:
    """Refuse a chart whose outcomes name retired systems (FlowchartError names node and field).

    Limited availability and systems outside the active profile stay warnings
    (`chart_system_problems`): the chart still routes somewhere a researcher can go.
    """
    from catalog.models import System, SystemStatus

    wanted = chart.outcome_systems()
    retired = {
        s.name: s.status_note
        for s in System.objects.filter(name__in=wanted, status=SystemStatus.RETIRED)
    }
    errors = [
        f"node {node.id!r}: systems: {name!r} is retired"
        + (f" ({retired[name]})" if retired[name] else "")
        for node in chart.nodes
        for name in node.systems
        if name in retired
    ]
    if errors:
        raise FlowchartError(f"chart {chart.key!r}: " + "; ".join(errors))


def chart_system_problems(*, chart: Flowchart) -> dict[str, str]:
    """Systems the chart's outcomes point at that are retired, limited, or not in the catalog.

    Staff see these as warnings in the admin: a chart that routes to a retired system is the
    stale-flowchart problem design.md describes. Reads the catalog's own tables so retired
    systems (which the engine never sees) are found too.
    """
    from catalog.models import Profile, System

    wanted = sorted(chart.outcome_systems())
    systems = {s.name: s for s in System.objects.filter(name__in=wanted).select_related("profile")}
    active = Profile.objects.filter(is_active=True).first()
    any_catalog = System.objects.exists()
    problems: dict[str, str] = {}
    for name in wanted:
        system = systems.get(name)
        if system is None:
            if any_catalog:
                problems[name] = "is not in the catalog"
        elif system.status == "retired":
            note = f" ({system.status_note})" if system.status_note else ""
            problems[name] = f"is retired{note}"
        elif active is not None and system.profile_id != active.pk:
            problems[name] = f"is not in the active catalog profile ({active.name})"
        elif system.status == "limited":
            note = f": {system.status_note}" if system.status_note else ""
            problems[name] = f"has limited availability{note}"
    return problems


# --- Sessions ---------------------------------------------------------------------------------


@transaction.atomic
def advisor_session_start(*, user=None, chart: str | None = None) -> AdvisorSession:
    key = chart or active_chart_key()
    flowchart = load_chart(key)
    advisor_session = AdvisorSession(
        chart=key,
        user=user if user is not None and user.is_authenticated else None,
        current_step=flowchart.start,
    )
    advisor_session.full_clean()
    advisor_session.save()
    return advisor_session


def advisor_session_attach_user(*, advisor_session: AdvisorSession, user) -> None:
    """Answers given anonymously become the account's once the researcher logs in."""
    if advisor_session.user_id is None and user.is_authenticated:
        advisor_session.user = user
        advisor_session.save(update_fields=["user", "updated_at"])


@dataclass
class FlowState:
    chart: Flowchart
    path: Walk
    answers: dict[str, Any]  # effective answers on the path, cleaned
    catalog_reader: CatalogReader
    estimates: dict[str, Any] = field(default_factory=dict)
    # What the answers say, by field (the chart's `estimate` mappings): never by step id.
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def catalog(self) -> CatalogSpec:
        """The engine catalog, read when first needed (once per state and the states after)."""
        return self.catalog_reader()

    @property
    def outcome(self) -> Node | None:
        return self.chart.node(self.path.outcome) if self.path.outcome else None


def advisor_session_state(
    *,
    advisor_session: AdvisorSession,
    catalog_reader: CatalogReader | None = None,
    estimates: dict[str, Any] | None = None,
) -> FlowState:
    """Where the session's answers lead. Pass the catalog reader (and the decisions' estimates)
    of a state built earlier in the same request, so one request reads the catalog at most once;
    a path with no sizing check on it reads no catalog at all."""
    chart = load_chart(advisor_session.chart)
    # A session read for a page (view_helpers.load_page_session) brought the catalog's stamp.
    catalog = catalog_reader or CatalogReader(
        stamp_now=getattr(advisor_session, "catalog_stamp_now", None)
    )
    cache: dict[str, Any] = {} if estimates is None else estimates
    path = walk(chart, advisor_session.answers, decider(chart, catalog, cache))
    answers = effective_answers(chart, advisor_session.answers, path)
    return FlowState(
        chart=chart,
        path=path,
        answers=answers,
        catalog_reader=catalog,
        estimates=cache,
        fields=answer_fields(chart, answers),
    )


def advisor_session_fields(*, advisor_session: AdvisorSession) -> dict[str, Any]:
    """The session's answers by field (deadline, project title, sensitivity...), for other apps."""
    try:
        state = advisor_session_state(advisor_session=advisor_session)
    except FlowchartError:
        return {}
    if state.path.outcome:
        return state.fields
    # A session that never reached an outcome has no path to trust: read each stored answer
    # its question still accepts, in chart order.
    readable: dict[str, Any] = {}
    for node in state.chart.questions():
        if node.id in advisor_session.answers:
            try:
                readable[node.id] = clean_answer(
                    node, _raw_answer(advisor_session.answers[node.id])
                )
            except AnswerError:
                continue
    return answer_fields(state.chart, readable)


def _raw_answer(value: Any) -> Any:
    if value is None:
        return ""
    return value if isinstance(value, list) else str(value)


def step_is_answerable(*, state: FlowState, step: str) -> bool:
    return step == state.path.current or step in state.path.questions


class SessionChanged(AnswerError):
    """Another request (a second tab) saved the session after this one read it."""

    def __init__(self) -> None:
        super().__init__(
            "Your answers were changed in another window after this page was shown, so this "
            "answer was not saved. Check the question and answer it again."
        )


def advisor_session_answer(
    *,
    advisor_session: AdvisorSession,
    step: str,
    raw: Any,
    state: FlowState | None = None,
) -> FlowState:
    """Store one answer and move the session on; raises AnswerError with a message for the field.

    The step must be the current question or an earlier one on the path (changing an earlier
    answer); anything else raises StepNotOnPath and nothing changes. `state` is the session's
    state as the caller already computed it (its catalog and estimates are reused). The write
    is one conditional UPDATE: if another request saved the session since it was read, it
    raises SessionChanged and nothing is saved (no lock is held while the engine runs).
    """
    if state is None:
        state = advisor_session_state(advisor_session=advisor_session)
    node = state.chart.node(step)
    if node is None or node.kind != "question" or not step_is_answerable(state=state, step=step):
        raise StepNotOnPath(step)
    earlier = {
        s: state.answers[s] for s in state.path.questions if s in state.answers and s != step
    }
    earlier.update({s: d.value for s, d in state.path.decisions.items()})
    value = clean_answer(node, raw, earlier)
    if node.type == "model_id" and value:
        model_lookup_start(value)
    answers = dict(advisor_session.answers)
    answers[step] = value
    advisor_session.answers = answers
    new_state = advisor_session_state(
        advisor_session=advisor_session,
        catalog_reader=state.catalog_reader,
        estimates=state.estimates,
    )
    advisor_session.current_step = new_state.path.current or new_state.path.outcome or ""
    if new_state.path.outcome:
        _store_result(advisor_session, new_state)
    else:
        advisor_session.completed_at = None
        advisor_session.estimate_request = None
        advisor_session.estimate_result = None
        advisor_session.project_plan = None
    advisor_session.full_clean()
    _save_unless_changed(advisor_session)
    return new_state


_ANSWER_FIELDS = (
    "answers",
    "current_step",
    "completed_at",
    "estimate_request",
    "estimate_result",
    "project_plan",
    "engine_version",
)


def _save_unless_changed(advisor_session: AdvisorSession) -> None:
    read_at = advisor_session.updated_at
    saved_at = timezone.now()
    values = {name: getattr(advisor_session, name) for name in _ANSWER_FIELDS}
    saved = AdvisorSession.objects.filter(pk=advisor_session.pk, updated_at=read_at).update(
        **values, updated_at=saved_at
    )
    if not saved:
        raise SessionChanged()
    advisor_session.updated_at = saved_at


def _store_result(advisor_session: AdvisorSession, state: FlowState) -> None:
    outcome = state.outcome
    assert outcome is not None
    advisor_session.completed_at = timezone.now()
    advisor_session.estimate_request = None
    advisor_session.estimate_result = None
    advisor_session.project_plan = None
    advisor_session.engine_version = ""
    if not wants_gpu_estimate(state):
        return
    request = estimate_request_for(fields=state.fields, outcome=outcome, catalog=state.catalog)
    if request is None:
        return
    advisor_session.estimate_request = request.model_dump(mode="json")
    try:
        result = estimate(sizing_request(request, outcome, state.catalog), state.catalog)
    except ValueError as exc:  # the engine's errors carry a message
        logger.warning("advisor session %s: no estimate: %s", advisor_session.pk, exc)
        advisor_session.estimate_result = {"error": str(exc)}
        return
    advisor_session.estimate_result = result.model_dump(mode="json")
    advisor_session.engine_version = result.engine_version[:40]
    plan = plan_for(fields=state.fields, result=result, outcome=outcome, catalog=state.catalog)
    advisor_session.project_plan = plan.as_dict() if plan is not None else None


def session_request_summary(*, advisor_session: AdvisorSession) -> dict[str, Any]:
    """What an allocation request starts from: the facility, the GPU hours, the justification.

    The facility is the secure route's own system where the route has one, else the
    recommendation's; the GPU hours are the project plan's total (runs, sweep, evaluation,
    development), else the one run's.
    """
    result = advisor_session.estimate_result or {}
    plan = advisor_session.project_plan or None
    recommendation = result.get("recommendation") or {} if isinstance(result, dict) else {}
    facility = recommendation.get("system") or ""
    justification = result.get("justification", "") if isinstance(result, dict) else ""
    try:
        state = advisor_session_state(advisor_session=advisor_session)
    except FlowchartError:
        state = None
    outcome = state.outcome if state is not None else None
    if outcome is not None and outcome.advice == "secure" and outcome.systems:
        facility = outcome.systems[0]
    if state is not None and outcome is not None and result and "error" not in result:
        justification = session_justification(
            state=state, result=EstimateResult.model_validate(result), plan=plan
        )
    hours = recommendation.get("requested_gpu_hours")
    if plan:
        gpu_hours: int | None = int(plan["total_gpu_hours"])
    elif hours is not None:
        gpu_hours = max(1, math.ceil(hours))
    else:
        gpu_hours = None
    return {"facility": facility, "gpu_hours": gpu_hours, "justification": justification}


def advisor_session_refresh_result(*, advisor_session: AdvisorSession) -> None:
    """Estimate again at an outcome whose estimate failed (a model lookup finished since)."""
    state = advisor_session_state(advisor_session=advisor_session)
    if not state.path.outcome:
        return
    _store_result(advisor_session, state)
    # Another request may have changed the answers: the page then shows what they lead to.
    with contextlib.suppress(SessionChanged):
        _save_unless_changed(advisor_session)
