"""The advisor flow: sessions, answers, decisions and the result at the end of a path.

Writes go through the `advisor_session_*` services; views stay thin. The catalog comes from
`advisor.engine_catalog` once per request (a view passes the state's catalog on), so decisions
and results use the same numbers.
"""

from __future__ import annotations

import datetime as dt
import logging
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
from advisor.engine_catalog import engine_catalog
from advisor.flowchart import (
    AnswerError,
    Decision,
    Flowchart,
    FlowchartError,
    Node,
    Walk,
    available_charts,
    clean_answer,
    effective_answers,
    load_chart,
    walk,
)
from advisor.models import ActiveFlowchart, AdvisorSession
from advisor.selectors import hf_model_lookup_metadata

logger = logging.getLogger(__name__)

GPU_TASKS = {"inference", "full_finetune", "lora", "qlora", "pretrain"}
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
    load_chart(chart)  # refuses a chart that does not load, with the node and field named
    row = ActiveFlowchart.objects.order_by("pk").first() or ActiveFlowchart()
    row.chart = chart
    row.changed_by = user
    row.full_clean()
    row.save()
    return row


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
    path = walk(chart, advisor_session.answers, _decider(catalog, cache))
    return FlowState(
        chart=chart,
        path=path,
        answers=effective_answers(chart, advisor_session.answers, path),
        catalog=catalog,
        estimates=cache,
    )


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
    advisor_session.full_clean()
    _save_unless_changed(advisor_session)
    return new_state


_ANSWER_FIELDS = (
    "answers",
    "current_step",
    "completed_at",
    "estimate_request",
    "estimate_result",
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
    advisor_session.engine_version = ""
    if not _wants_gpu_estimate(state):
        return
    request = estimate_request_for(answers=state.answers, outcome=outcome, catalog=state.catalog)
    if request is None:
        return
    advisor_session.estimate_request = request.model_dump(mode="json")
    try:
        result = estimate(request, state.catalog)
    except ValueError as exc:  # the engine's errors carry a message
        logger.warning("advisor session %s: no estimate: %s", advisor_session.pk, exc)
        advisor_session.estimate_result = {"error": str(exc)}
        return
    advisor_session.estimate_result = result.model_dump(mode="json")
    advisor_session.engine_version = result.engine_version[:40]


def _wants_gpu_estimate(state: FlowState) -> bool:
    outcome = state.outcome
    if outcome is None or outcome.advice in ("cpu_interactive", "cpu_batch"):
        return False
    return state.answers.get("work_kind") != "cpu"


# --- From answers to an estimate request -----------------------------------------------------


def estimate_request_for(
    *, answers: Mapping[str, Any], outcome: Node | None = None, catalog: CatalogSpec | None = None
) -> EstimateRequest | None:
    """The engine's request from the answers, limited by the outcome's systems when given.

    With the catalog, systems it marks unavailable to the institute are dropped from the
    outcome's list, so no outcome recommends them (see `outcome_systems`).
    """
    given = dict(answers)
    kind = given.get("work_kind")
    if kind == "cpu" or kind is None:
        return None
    task = kind if kind in GPU_TASKS else "inference"  # notebooks: interactive inference
    params_b = given.get("model_params")
    model_id = given.get("model") or None
    tokens_m = given.get("dataset_tokens", given.get("inference_tokens"))
    constraints: dict[str, Any] = {
        "data_sensitivity": given.get("data_sensitivity") or "public",
    }
    hours_left = _hours_until_deadline(given.get("timeline"))
    if hours_left is not None and 0 < hours_left < TARGET_WALL_HOURS.value:
        # A deadline nearer than the engine's one-week default becomes the wall-time target,
        # so the recommendation adds GPUs to finish in time (the queue wait is not included).
        constraints["max_wall_hours"] = hours_left
    if outcome is not None:
        constraints["needs_notebooks"] = outcome.needs_notebooks
        if outcome.needs_cloud is not None:
            constraints["needs_cloud"] = outcome.needs_cloud
        if outcome.systems:
            constraints["systems"] = (
                outcome_systems(outcome=outcome, catalog=catalog).usable
                if catalog is not None
                else list(outcome.systems)
            )
    fields: dict[str, Any] = {
        "task": task,
        "model_id": model_id,
        "params": round(float(params_b) * 1e9) if params_b not in (None, "") else None,
        "hub": hf_model_lookup_metadata(repo_id=model_id) if model_id else None,
        "precision": given.get("precision") or "bf16",
        "framework": _framework_answer(
            given.get("framework_inference" if task == "inference" else "framework_training"),
            task,
        ),
        "batch_size": int(given.get("batch_size") or 1),
        "seq_len": int(given.get("seq_len") or 2048),
        "tokens": round(float(tokens_m) * 1e6) if tokens_m not in (None, "") else None,
        "epochs": float(given.get("epochs") or 1),
        "num_gpus": int(given["num_gpus"]) if given.get("num_gpus") else None,
        "constraints": Constraints(**constraints),
    }
    return EstimateRequest(**fields)


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


def project_pays(answers: Mapping[str, Any]) -> bool:
    return "project" in (answers.get("who_pays"), answers.get("hosting_who_pays"))


def hosting_plan_for(*, state: FlowState, result: EstimateResult):
    """The always-on VM for a web service, from the inference memory the engine estimated.

    None unless the researcher is hosting a service and the outcome names a cloud system.
    """
    from advisor.engine.hosting import hosting_plan

    outcome = state.outcome
    if state.answers.get("work_kind") != "hosting" or outcome is None:
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
        months=float(state.answers.get("hosting_months") or 1),
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


def _decider(catalog: CatalogSpec, cache: dict[str, Any]):
    def decide(node: Node, answers: Mapping[str, Any]) -> Decision:
        check = CHECKS.get(node.check)
        if check is None:
            return Decision("unknown", f"No check called {node.check!r} is known.")
        return check(node=node, answers=answers, catalog=catalog, cache=cache)

    return decide


def _estimate_for_check(answers, catalog, cache) -> EstimateResult | str:
    """One unconstrained estimate per set of answers, shared by the decisions on a path."""
    key = repr(sorted((k, str(v)) for k, v in answers.items()))
    if key in cache:
        return cache[key]
    request = None
    try:
        request = estimate_request_for(answers=answers)
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


def check_v100_sufficient(*, node, answers, catalog, cache) -> Decision:
    """V100s are enough when the work runs in fp16/fp32 and fits 32 GB per GPU on one node."""
    precision = answers.get("precision")
    if precision == "bf16":
        return Decision(
            "no",
            "You chose bf16, which V100s do not support (they have fp16 and fp32 only); "
            "A100 and newer GPUs run bf16 natively.",
        )
    result = _estimate_for_check(answers, catalog, cache)
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
            f"It needs {_gb(best.memory_per_gpu_bytes)} per GPU on {best.num_gpus} V100 "
            f"GPU(s) ({best.strategy}), within a V100's 32 GB.",
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


def check_fits_gpu_memory(*, node, answers, catalog, cache) -> Decision:
    """Fits when some option needs at most `memory_gb` per GPU on at most `max_gpus` GPUs."""
    limit_gb = float(node.params.get("memory_gb", 80))
    max_gpus = int(node.params.get("max_gpus", 1))
    result = _estimate_for_check(answers, catalog, cache)
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
            f"It needs {_gb(best.memory_per_gpu_bytes)} per GPU on {best.num_gpus} GPU(s), "
            f"within {limit_gb:g} GB.",
        )
    single = [o.memory_per_gpu_bytes for o in result.options if o.num_gpus == 1]
    need = min(single) if single else result.memory.total_bytes
    gpus = "one GPU" if max_gpus == 1 else f"up to {max_gpus} GPUs"
    return Decision(
        "no", f"It needs {_gb(need)} on one GPU and does not fit {limit_gb:g} GB on {gpus}."
    )


CHECKS = {
    "v100_sufficient": check_v100_sufficient,
    "fits_gpu_memory": check_fits_gpu_memory,
}


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
    answers = state.answers
    data_gb = answers.get("cpu_data_size")
    reasons = [
        "You said the work does not need a GPU: web scraping and data processing spend their "
        "time waiting on the network or disk, which a GPU does not speed up (seed 000).",
    ]
    if answers.get("cpu_interactive") == "yes":
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
    sensitivity = answers.get("data_sensitivity")
    if sensitivity in ("confidential", "restricted"):
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
    deadline = state.answers.get("timeline")
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
