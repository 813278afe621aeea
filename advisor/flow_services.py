"""The advisor flow: sessions, answers, decisions and the result at the end of a path.

Writes go through the `advisor_session_*` services; views stay thin. The catalog comes from
`advisor.engine_catalog` once per request (a view passes the state's catalog on), so decisions
and results use the same numbers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from advisor.engine import estimate
from advisor.engine.constants import TARGET_WALL_HOURS
from advisor.engine.models import (
    CatalogSpec,
    Constraints,
    EstimateRequest,
    EstimateResult,
)
from advisor.engine.words import plural
from advisor.engine_catalog import engine_catalog
from advisor.flowchart import (
    AnswerError,
    Decision,
    Flowchart,
    FlowchartError,
    Node,
    Walk,
    answer_fields,
    available_charts,
    clean_answer,
    effective_answers,
    load_chart,
    walk,
)
from advisor.models import ActiveFlowchart, AdvisorSession
from advisor.selectors import hf_model_lookup_metadata, local_model_config

logger = logging.getLogger(__name__)

GPU_TASKS = {"inference", "full_finetune", "lora", "qlora", "pretrain"}
SENSITIVE = {"confidential", "restricted"}
V100_MEMORY_BYTES = 32 * 10**9  # V100 SXM2/PCIe 32 GB (catalog-facts.md)
V100_MAX_GPUS_PER_NODE = 8  # DGX-1 class nodes; larger jobs span nodes


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
    catalog: CatalogSpec
    estimates: dict[str, Any] = field(default_factory=dict)
    # What the answers say, by field (the chart's `estimate` mappings): never by step id.
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> Node | None:
        return self.chart.node(self.path.outcome) if self.path.outcome else None


def advisor_session_state(
    *,
    advisor_session: AdvisorSession,
    catalog: CatalogSpec | None = None,
    estimates: dict[str, Any] | None = None,
) -> FlowState:
    """Where the session's answers lead. Pass the catalog (and the decisions' estimates) of a
    state built earlier in the same request, so one request reads the catalog once."""
    chart = load_chart(advisor_session.chart)
    if catalog is None:
        catalog = engine_catalog()
    cache: dict[str, Any] = {} if estimates is None else estimates
    path = walk(chart, advisor_session.answers, _decider(chart, catalog, cache))
    answers = effective_answers(chart, advisor_session.answers, path)
    return FlowState(
        chart=chart,
        path=path,
        answers=answers,
        catalog=catalog,
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
        _model_lookup_start(value)
    answers = dict(advisor_session.answers)
    answers[step] = value
    advisor_session.answers = answers
    new_state = advisor_session_state(
        advisor_session=advisor_session, catalog=state.catalog, estimates=state.estimates
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
    if not _wants_gpu_estimate(state):
        return
    request = estimate_request_for(fields=state.fields, outcome=outcome, catalog=state.catalog)
    if request is None:
        return
    advisor_session.estimate_request = request.model_dump(mode="json")
    try:
        result = estimate(_sizing_request(request, outcome, state.catalog), state.catalog)
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


def _sized_on_secure_hardware(outcome: Node, catalog: CatalogSpec) -> bool:
    """The secure route's own systems list hardware (UVA's Rio), so the run is sized there."""
    return any(s.name in outcome.systems and s.node_types for s in catalog.systems)


def _sizing_request(
    request: EstimateRequest, outcome: Node, catalog: CatalogSpec
) -> EstimateRequest:
    """The request the engine sizes. On the secure route the data's sensitivity is settled by
    the route itself, and the estimate says what hardware the work needs: it is sized against
    the secure systems the outcome names where they list hardware, else against every system
    (so the researcher can tell the secure environment's team what to provision)."""
    if outcome.advice != "secure" or _sized_on_secure_hardware(outcome, catalog):
        return request
    constraints = request.constraints.model_copy(
        update={"data_sensitivity": "public", "systems": None, "needs_cloud": None}
    )
    return request.model_copy(update={"constraints": constraints})


def _wants_gpu_estimate(state: FlowState) -> bool:
    outcome = state.outcome
    if outcome is None or outcome.advice in ("cpu_interactive", "cpu_batch"):
        return False
    return state.fields.get("task") in GPU_TASKS


def plan_for(*, fields: Mapping[str, Any], result: EstimateResult, outcome: Node, catalog):
    """The project's GPU hours around the recommended run (None without a sized run)."""
    from advisor.engine.constants import CONTINGENCY
    from advisor.project_plan import project_plan

    rec = result.recommendation
    if rec is None or rec.gpu_hours is None or fields.get("hosting"):
        return None  # a hosted service is priced by the month (hosting_plan_for), not by runs
    system = next((s for s in catalog.systems if s.name == _request_facility(rec, outcome)), None)
    return project_plan(
        task=str(fields.get("task")),
        per_run_compute=rec.gpu_hours,
        # The engine's own rate: its stored contingency is rounded, too coarse for tiny runs.
        contingency_rate=CONTINGENCY.value,
        epochs=float(fields.get("epochs") or 1),
        full_runs=fields.get("plan.full_runs"),
        sweep_trials=fields.get("plan.sweep_trials"),
        sweep_fraction=fields.get("plan.sweep_fraction"),
        eval_passes=fields.get("plan.eval_passes"),
        dev_gpu_hours=fields.get("plan.dev_gpu_hours"),
        trial_gpu_hours=system.trial_gpu_hours if system else None,
        minimum_gpu_hours=getattr(system, "minimum_gpu_hours", None) if system else None,
    )


def _request_facility(rec, outcome: Node) -> str:
    """The facility a request goes to: the secure route's own system, else the recommendation."""
    if outcome.advice == "secure" and outcome.systems:
        return outcome.systems[0]
    return rec.system


# --- From answers to an estimate request -----------------------------------------------------


def estimate_request_for(
    *,
    fields: Mapping[str, Any],
    outcome: Node | None = None,
    catalog: CatalogSpec | None = None,
) -> EstimateRequest | None:
    """The engine's request from the answers' fields, limited by the outcome's systems.

    `fields` come from `answer_fields` (the chart's own mappings); None when the work needs no
    GPU estimate (no task: CPU work). With the catalog, systems it marks unavailable to the
    institute are dropped from the outcome's list, so no outcome recommends them (see
    `outcome_systems`).
    """
    given = dict(fields)
    task = given.get("task")
    if task not in GPU_TASKS:
        return None
    constraints: dict[str, Any] = {
        name.removeprefix("constraints."): value
        for name, value in given.items()
        if name.startswith("constraints.")
    }
    constraints.setdefault("data_sensitivity", "public")
    hours_left = _hours_until_deadline(given.get("deadline"))
    if hours_left is not None and 0 < hours_left < TARGET_WALL_HOURS.value:
        # A deadline nearer than the engine's one-week default becomes the wall-time target,
        # so the recommendation adds GPUs to finish in time (the queue wait is not included).
        constraints["max_wall_hours"] = hours_left
    if outcome is not None:
        constraints["needs_notebooks"] = outcome.needs_notebooks or bool(
            constraints.get("needs_notebooks")
        )
        if outcome.needs_cloud is not None:
            constraints["needs_cloud"] = outcome.needs_cloud
        if outcome.systems:
            constraints["systems"] = (
                outcome_systems(outcome=outcome, catalog=catalog).usable
                if catalog is not None
                else list(outcome.systems)
            )
    request_fields: dict[str, Any] = {
        name: value
        for name, value in given.items()
        if name in EstimateRequest.model_fields and name not in ("constraints", "hub", "config")
    }
    for name in INTEGER_FIELDS:
        if request_fields.get(name) is not None:
            request_fields[name] = round(float(request_fields[name]))
    if "framework" in request_fields:
        request_fields["framework"] = _framework_answer(request_fields["framework"], task)
    model_id = request_fields.get("model_id") or None
    request_fields["model_id"] = model_id
    if model_id:
        request_fields["hub"] = hf_model_lookup_metadata(repo_id=model_id)
        if request_fields["hub"] is None and request_fields.get("params") is None:
            # The lookup has not finished: count from the configuration we keep, if any.
            local = local_model_config(repo_id=model_id)
            if local is not None:
                request_fields["config"] = local["config"]
    request_fields["constraints"] = Constraints(**constraints)
    return EstimateRequest(**request_fields)


INTEGER_FIELDS = (
    "params",
    "tokens",
    "new_tokens",
    "batch_size",
    "seq_len",
    "num_gpus",
    "lora_rank",
)


def _framework_answer(value: str | None, task: str) -> str | None:
    """The library answer when it suits the task (a chart that asks one question for both
    kinds of work may hold a training library for inference); otherwise the engine's default."""
    from advisor.engine.frameworks import FRAMEWORKS

    profile = FRAMEWORKS.get(value or "")
    if profile is None:
        return None
    return value if profile.kind == ("inference" if task == "inference" else "training") else None


def _hours_until_deadline(deadline: str | None) -> float | None:
    if not deadline:
        return None
    try:
        days = (dt.date.fromisoformat(deadline) - timezone.localdate()).days
    except ValueError:
        return None
    return float(days * 24)


def model_lookup_for(model_id: str | None):
    """The lookup behind a model answer, for the status card on the next step."""
    if not model_id:
        return None
    from django.db.models import Q

    from advisor.models import HfModelLookup

    return (
        HfModelLookup.objects.filter(Q(requested_id=model_id) | Q(repo_id=model_id))
        .order_by("-updated_at")
        .first()
    )


def _model_lookup_start(model_id: str) -> None:
    """Ask the Hub about the model in the background; the id's format is checked here."""
    from advisor import hub
    from advisor.services import hf_model_lookup_request

    try:
        hf_model_lookup_request(repo_id=model_id)
    except hub.InvalidRepoIdError as exc:
        raise AnswerError(exc.message) from exc


# --- Hosting: an always-on VM ----------------------------------------------------------------


def project_pays(fields: Mapping[str, Any]) -> bool:
    """The project or programme pays (a brief request), from the chart's `project_pays` field."""
    return bool(fields.get("project_pays"))


def hosting_plan_for(*, state: FlowState, result: EstimateResult):
    """The always-on VM for a web service, from the inference memory the engine estimated.

    None unless the researcher is hosting a service and the outcome names a cloud system.
    """
    from advisor.engine.hosting import hosting_plan

    outcome = state.outcome
    if not state.fields.get("hosting") or outcome is None:
        return None
    clouds = [s for s in state.catalog.systems if s.kind == "cloud" and s.name in outcome.systems]
    if not clouds:
        return None
    memory = result.memory
    overhead = memory.cuda_context + memory.allocator_reserve
    return hosting_plan(
        system=clouds[0],
        accelerators=list(state.catalog.accelerators),
        weights_and_working_bytes=max(memory.total_bytes - overhead, 0),
        per_gpu_overhead_bytes=overhead,
        months=float(state.fields.get("hosting_months") or 1),
    )


def hosting_justification(*, plan, catalog: CatalogSpec, params: int | None) -> str:
    """The request's paragraph for a hosted service: what runs, on which VM, for how long, cost."""
    from advisor.engine.hosting import months_text

    if plan is None or plan.vm is None:
        return ""
    names = {a.name: a.display_name for a in catalog.accelerators}
    gpu = names.get(plan.vm.accelerator, plan.vm.accelerator)
    gpus = "one" if plan.vm.gpus == 1 else str(plan.vm.gpus)
    size = f"a {params / 1e9:,.3g} billion-parameter model" if params else "a model"
    text = (
        f"We will host a web service that serves {size} for {months_text(plan.months)}. "
        f"It needs {plan.need_bytes / 1e9:,.1f} GB of GPU memory for the model and its working "
        f"memory, so it runs on one always-on {plan.vm.name} virtual machine with {gpus} "
        f"{gpu} GPU{'s' if plan.vm.gpus != 1 else ''}, the cheapest size that holds it."
    )
    if plan.vm.price_per_month is not None and plan.total_price is not None:
        currency = plan.vm.currency
        text += (
            f" At about {plan.vm.price_per_month:,.0f} {currency} a month (pay-as-you-go, 730 "
            f"hours a month) that is about {plan.total_price:,.0f} {currency} in all."
        )
    return text


# --- Which systems an outcome may recommend --------------------------------------------------


@dataclass(frozen=True)
class OutcomeSystems:
    usable: list[str]  # catalog keys, in the outcome's order
    left_out: dict[str, str]  # catalog key -> why, in words

    def sentence(self, catalog: CatalogSpec, outcome: Node) -> str:
        """One sentence: which systems this answer is weighed on, and which are left out, why."""
        names = {s.name: s.display_name for s in catalog.systems}
        if not outcome.systems:
            return ""
        usable = [names.get(n, n) for n in self.usable]
        scope = "that offer notebooks" if outcome.needs_notebooks else ""
        if outcome.needs_cloud:
            scope = "in the cloud"
        head = (
            f"Systems considered for this answer{' (' + scope + ')' if scope else ''}: "
            f"{join_words(usable)}"
            if usable
            else "No system in the catalog is open to you for this answer"
        )
        if not self.left_out:
            return head + "."
        gone = "; ".join(
            f"{names.get(name, name)} is left out: {why}" for name, why in self.left_out.items()
        )
        return f"{head}. {gone[0].upper()}{gone[1:]}."


def join_words(items: list[str]) -> str:
    """["a"] -> "a"; ["a", "b"] -> "a and b"; ["a", "b", "c"] -> "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _first_sentence(note: str) -> str:
    first = note.split(". ")[0].strip().rstrip(".")
    return first[0].lower() + first[1:] if first else ""


def outcome_systems(*, outcome: Node, catalog: CatalogSpec) -> OutcomeSystems:
    """The outcome's systems that the catalog says the institute can use.

    A retired system is not in the engine's catalog at all; a "limited" one is closing or not
    open to the institute (Baskerville: no longer available to the Turing as of April 2026,
    catalog-facts.md TUR-LAND), so no outcome recommends it. Each one dropped comes with the
    catalog's reason.
    """
    by_name = {s.name: s for s in catalog.systems}
    usable: list[str] = []
    left_out: dict[str, str] = {}
    for name in outcome.systems:
        system = by_name.get(name)
        if system is None:
            if catalog.systems:
                left_out[name] = "it is retired or not in the catalog"
            continue
        if system.status == "limited":
            left_out[name] = _first_sentence(system.status_note) or "it has limited availability"
            continue
        usable.append(name)
    if not catalog.systems:  # no catalog loaded: nothing to judge by
        usable = list(outcome.systems)
    return OutcomeSystems(usable=usable, left_out=left_out)


# --- Decisions --------------------------------------------------------------------------------


def _decider(chart: Flowchart, catalog: CatalogSpec, cache: dict[str, Any]):
    def decide(node: Node, answers: Mapping[str, Any]) -> Decision:
        check = CHECKS.get(node.check)
        if check is None:
            return Decision("unknown", f"No check called {node.check!r} is known.")
        return check(node=node, fields=answer_fields(chart, answers), catalog=catalog, cache=cache)

    return decide


def _estimate_for_check(answers, catalog, cache) -> EstimateResult | str:
    """One unconstrained estimate per set of answers, shared by the decisions on a path.

    `answers` are fields (answer_fields); the data's sensitivity plays no part in what fits.
    """
    key = repr(sorted((k, str(v)) for k, v in answers.items()))
    if key in cache:
        return cache[key]
    request = None
    try:
        sizing = {k: v for k, v in answers.items() if k != "constraints.data_sensitivity"}
        request = estimate_request_for(fields=sizing)
        if request is None:
            outcome: EstimateResult | str = "This is not GPU work."
        else:
            outcome = estimate(request, catalog)
    except ValueError as exc:
        outcome = str(exc)
    cache[key] = outcome
    return outcome


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:,.1f} GB"


def check_v100_sufficient(*, node, fields, catalog, cache) -> Decision:
    """V100s are enough when the work runs in fp16/fp32 and fits 32 GB per GPU on one node."""
    precision = fields.get("precision")
    if precision == "bf16":
        return Decision(
            "no",
            "You chose bf16, which V100s do not support (they have fp16 and fp32 only); "
            "A100 and newer GPUs run bf16 natively.",
        )
    result = _estimate_for_check(fields, catalog, cache)
    if isinstance(result, str):
        return Decision("unknown", f"We could not estimate the memory: {result}")
    v100_names = {
        a.name
        for a in catalog.accelerators
        if "v100" in a.name.lower() or "v100" in a.display_name.lower()
    }
    candidates = [o for o in result.options if o.accelerator in v100_names] if v100_names else []
    fitting = [o for o in candidates if o.fits and o.nodes == 1]
    if fitting:
        best = min(fitting, key=lambda o: (o.num_gpus, o.memory_per_gpu_bytes))
        return Decision(
            "yes",
            f"It needs {_gb(best.memory_per_gpu_bytes)} per GPU on "
            f"{plural(best.num_gpus, 'V100 GPU')} ({best.strategy}), within a V100's 32 GB.",
        )
    single = [o.memory_per_gpu_bytes for o in result.options if o.num_gpus == 1]
    need = min(single) if single else result.memory.total_bytes
    if not candidates and need <= V100_MEMORY_BYTES:
        return Decision("yes", f"It needs {_gb(need)} on one GPU, within a V100's 32 GB.")
    return Decision(
        "no",
        f"It needs {_gb(need)} on one GPU, and does not fit in a V100's 32 GB on up to "
        f"{V100_MAX_GPUS_PER_NODE} GPUs of one node.",
    )


def check_fits_gpu_memory(*, node, fields, catalog, cache) -> Decision:
    """Fits when some option needs at most `memory_gb` per GPU on at most `max_gpus` GPUs."""
    limit_gb = float(node.params.get("memory_gb", 80))
    max_gpus = int(node.params.get("max_gpus", 1))
    result = _estimate_for_check(fields, catalog, cache)
    if isinstance(result, str):
        return Decision("unknown", f"We could not estimate the memory: {result}")
    limit = limit_gb * 1e9
    fitting = [
        o for o in result.options if o.num_gpus <= max_gpus and o.memory_per_gpu_bytes <= limit
    ]
    if fitting:
        best = min(fitting, key=lambda o: (o.num_gpus, o.memory_per_gpu_bytes))
        return Decision(
            "yes",
            f"It needs {_gb(best.memory_per_gpu_bytes)} per GPU on {plural(best.num_gpus, 'GPU')}, "
            f"within {limit_gb:g} GB.",
        )
    single = [o.memory_per_gpu_bytes for o in result.options if o.num_gpus == 1]
    need = min(single) if single else result.memory.total_bytes
    gpus = "one GPU" if max_gpus == 1 else f"up to {max_gpus} GPUs"
    return Decision(
        "no", f"It needs {_gb(need)} on one GPU and does not fit {limit_gb:g} GB on {gpus}."
    )


def check_model_size_known(*, node, fields, catalog, cache) -> Decision:
    """Whether the named model's size is known (from the Hub, a bundled or staff config).

    "pending" while the lookup runs (the size question is then optional and the walk asks
    again once it ends); "no" when no model was named or the lookup found no size: the flow
    asks for the parameter count, keeping the model's name for the request.
    """
    model_id = fields.get("model_id")
    if not model_id:
        return Decision("no", "No Hugging Face id was given, so we ask for the size.")
    lookup = model_lookup_for(model_id)
    if lookup is not None and lookup.in_flight:
        local = local_model_config(repo_id=model_id)
        if local is not None:
            # The lookup asks the Hub first; the configuration we keep already gives the size.
            return Decision("yes", f"{model_id}'s size is counted from {_local_label(local)}.")
        return Decision("pending", f"We are still looking up {model_id}.")
    metadata = hf_model_lookup_metadata(repo_id=model_id)
    if metadata is not None and metadata.params_total:
        source = f", from {metadata.params_source}" if metadata.params_source else ""
        return Decision(
            "yes", f"{model_id} has {metadata.params_total / 1e9:,.3g} billion parameters{source}."
        )
    why = (lookup.message if lookup is not None else "") or "its size is not known here"
    return Decision("no", f"We could not read the size of {model_id} ({why.rstrip('.')}).")


def _local_label(local: Mapping[str, Any]) -> str:
    if local.get("kind") == "staff":
        return "a configuration staff added"
    return "the configuration this service keeps for it"


CHECKS = {
    "v100_sufficient": check_v100_sufficient,
    "fits_gpu_memory": check_fits_gpu_memory,
    "model_size_known": check_model_size_known,
}


# --- The secure route and the project's justification ----------------------------------------

SENSITIVITY_WORDS = {
    "internal": "internal data",
    "confidential": "confidential or personal data",
    "restricted": "restricted data",
}


@dataclass(frozen=True)
class SecureRoute:
    """What a researcher with sensitive data should do, and what the estimate says."""

    level: str
    system_name: str
    system_display: str
    what_to_do: list[str]
    hardware: list[str]
    request_fields: list[dict]
    sensitivity_note: str


def secure_route_for(
    *, state: FlowState, result: EstimateResult | None, plan: Mapping[str, Any] | None
) -> SecureRoute:
    from catalog.models import System

    outcome = state.outcome
    assert outcome is not None
    level = str(state.fields.get("constraints.data_sensitivity") or "confidential")
    words = SENSITIVITY_WORDS.get(level, f"{level} data")
    system = System.objects.filter(name=outcome.systems[0]).first() if outcome.systems else None
    steps = [
        f"Your data is {words}. The systems for ordinary allocations document approval for "
        "public data only, so do not copy it there.",
    ]
    if system is not None and system.access_route:
        steps.append(system.access_route)
    elif system is None:
        steps.append(
            "Talk to your data protection officer and the research computing team before the "
            "data moves: they agree where it may be processed."
        )
    steps.append(
        "Bring the hardware figures below to that conversation: they say what the work needs, "
        "whichever secure system runs it."
    )
    hardware: list[str] = []
    rec = result.recommendation if result is not None else None
    if result is not None and rec is not None:
        accelerators = {a.name: a for a in state.catalog.accelerators}
        gpu = accelerators.get(rec.accelerator)
        gpu_name = gpu.display_name if gpu else rec.accelerator
        hardware.append(
            f"Memory: about {_gb(rec.memory_per_gpu_bytes)} per GPU on "
            f"{plural(rec.num_gpus, 'GPU')}"
            + (
                f", so a GPU with at least {gpu.memory_gb:g} GB such as the {gpu_name}"
                if gpu
                else ""
            )
            + "."
        )
        if rec.gpu_hours is not None:
            hardware.append(
                f"One run: about {rec.gpu_hours:,.3g} GPU hours of compute on {gpu_name} "
                f"({rec.wall_hours or 0:,.3g} hours of wall time on {plural(rec.num_gpus, 'GPU')})."
            )
        if plan:
            hardware.append(
                f"The whole project: about {plan['total_gpu_hours']:,} GPU hours "
                "(the lines are listed below)."
            )
    elif not state.fields.get("task"):
        hardware.append("The work needs no GPU: ask for a CPU-only secure environment.")
    return SecureRoute(
        level=level,
        system_name=system.name if system else "",
        system_display=system.display_name if system else "",
        what_to_do=steps,
        hardware=hardware,
        request_fields=list(system.request_fields or []) if system else [],
        sensitivity_note=system.data_sensitivity_note if system else "",
    )


def session_justification(
    *, state: FlowState, result: EstimateResult, plan: Mapping[str, Any] | None
) -> str:
    """The engine's paragraph about one run, then the project's lines and the total.

    On the secure route the engine sized the hardware without the data's sensitivity, so its
    closing sentence about which system is approved for which data is replaced by the route.
    """
    text = result.justification
    outcome = state.outcome
    if (
        outcome is not None
        and outcome.advice == "secure"
        and not _sized_on_secure_hardware(outcome, state.catalog)
    ):
        # Sized without the data's sensitivity: drop the engine's sentence on approval.
        text = text.rsplit(". ", 1)[0] + "." if ". " in text else text
        level = state.fields.get("constraints.data_sensitivity") or "confidential"
        text += (
            f" The data is {SENSITIVITY_WORDS.get(level, level)}, so the work runs in a secure "
            "environment; these figures say what hardware it needs there."
        )
    if plan:
        text += "\n\n" + plan_text(plan)
    return text


def plan_text(plan: Mapping[str, Any]) -> str:
    """A stored plan (ProjectPlan.as_dict) as the lines a justification lists."""
    rows = [
        f"One run: {_hours(plan['per_run_compute'])} GPU hours of compute + "
        f"{_hours(plan['per_run_contingency'])} contingency = "
        f"{_hours(plan['per_run_requested'])} GPU hours."
    ]
    rows += [
        f"{line['label']}: {line['arithmetic']} = {_hours(line['gpu_hours'])} GPU hours "
        f"({line['why']})."
        for line in plan["lines"]
    ]
    rows.append(f"Total requested: {plan['total_gpu_hours']:,} GPU hours.")
    return "\n".join(rows)


def _hours(hours: float) -> str:
    if hours >= 100:
        return f"{hours:,.0f}"
    if hours >= 1:
        return f"{hours:,.1f}"
    return f"{hours:.2g}"


# --- Advice without the GPU engine ------------------------------------------------------------


@dataclass(frozen=True)
class CpuAdvice:
    title: str
    summary: str
    reasons: list[str]
    systems: list[str]
    script: str


def cpu_advice_for(*, state: FlowState) -> CpuAdvice:
    outcome = state.outcome
    assert outcome is not None
    fields = state.fields
    data_gb = fields.get("cpu_data_gb")
    reasons = [
        "You said the work does not need a GPU: web scraping and data processing spend their "
        "time waiting on the network or disk, which a GPU does not speed up (Lancaster's "
        "'Deciding Project Requirements' guide).",
    ]
    if fields.get("cpu_interactive"):
        reasons.append(
            "You want to watch and fix it as it runs, so an interactive service (a notebook or "
            "console) suits it better than a batch queue."
        )
    else:
        reasons.append("It can run unattended, so a batch job can run it from the queue.")
    if data_gb not in (None, ""):
        reasons.append(
            f"You will handle about {data_gb:g} GB of data: ask for at least that "
            "much storage, with room for intermediate files."
        )
    sensitivity = fields.get("constraints.data_sensitivity")
    if sensitivity in SENSITIVE:
        reasons.append("Your data is sensitive: use a system approved for it.")
    script = ""
    if outcome.advice == "cpu_batch":
        script = "\n".join(
            [
                "#!/bin/bash",
                "#SBATCH --job-name=cpu-processing",
                "#SBATCH --nodes=1",
                "#SBATCH --ntasks=1",
                "#SBATCH --cpus-per-task=8      # no --gres: this job needs no GPU",
                "#SBATCH --mem=32G",
                "#SBATCH --time=12:00:00",
                "",
                "python process.py",
            ]
        )
    return CpuAdvice(outcome.title, outcome.help, reasons, list(outcome.systems), script)


def deadline_warning(*, state: FlowState, wall_hours: float | None) -> str:
    deadline = state.fields.get("deadline")
    if not deadline or wall_hours is None:
        return ""
    days_left = (dt.date.fromisoformat(deadline) - timezone.localdate()).days
    if days_left < 0:
        return "Your deadline has passed; check the date you gave."
    if wall_hours > days_left * 24:
        return (
            f"The job needs about {wall_hours:,.0f} hours of wall time, longer than the "
            f"{days_left} days until your deadline, before any queue wait."
        )
    return ""


__all__ = [
    "AnswerError",
    "FlowchartError",
    "StepNotOnPath",
    "advisor_session_answer",
    "advisor_session_start",
]
