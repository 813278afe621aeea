"""The researcher's pages: start, one question per step, the result, the whole chart.

Every page works as a plain form post; with htmx the step region is swapped in place and the
address pushed, so back, forward and reload land on real pages. The same views serve the
intranet embed (`embed=True`), which only changes the chrome and the framing headers.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, push_url

from advisor import flow_services
from advisor.embedding import allowed_origins
from advisor.engine.models import EstimateResult, Option
from advisor.engine.ranking import alternatives as alternatives_of
from advisor.flowchart import (
    AnswerError,
    Flowchart,
    FlowchartError,
    Node,
    _edge_label,
    load_chart,
)
from advisor.forms import StepForm
from advisor.memory_svg import COMPONENTS, MemoryBar, memory_chart_svg
from advisor.models import AdvisorSession
from config.ratelimits import rate_limit

SESSION_KEY = "advisor_session_id"


def _url(name: str, *, embed: bool, **kwargs: Any) -> str:
    return reverse(f"advisor:{'embed-' if embed else ''}{name}", kwargs=kwargs or None)


def _page(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    status: int = 200,
    partial: str | None = None,
) -> HttpResponse:
    htmx = getattr(request, "htmx", None)
    wants_partial = partial and htmx and not htmx.history_restore_request
    name = f"{template}#{partial}" if wants_partial else template
    context.setdefault("embed", False)
    if context["embed"]:
        context.setdefault("embed_origins", allowed_origins())
    return render(request, name, context, status=status)


def _problem(
    request: HttpRequest,
    *,
    status: int,
    message: str,
    embed: bool,
    advisor_session: AdvisorSession | None = None,
) -> HttpResponse:
    context = {
        "message": message,
        "status": status,
        "embed": embed,
        "advisor_session": advisor_session,
        "resume_url": _url("resume", embed=embed, session_id=advisor_session.id)
        if advisor_session
        else _url("start", embed=embed),
    }
    return _page(request, "advisor/problem.html", context, status=status)


def _chart_gone(view):
    """A session whose chart file was removed or broken gets a message, not a 500."""
    import functools

    @functools.wraps(view)
    def wrapped(request, *args, embed: bool = False, **kwargs):
        try:
            return view(request, *args, embed=embed, **kwargs)
        except FlowchartError:
            return _problem(
                request,
                status=410,
                embed=embed,
                message="The flowchart this session used is no longer available. "
                "Please start again.",
            )

    return wrapped


def _load_session(request: HttpRequest, session_id) -> AdvisorSession:
    advisor_session = get_object_or_404(AdvisorSession, pk=session_id)
    user = request.user
    if advisor_session.user_id is not None and (
        not user.is_authenticated or user.pk != advisor_session.user_id
    ):
        # Once attached to an account the session is that account's alone.
        raise Http404("No such advisor session.")
    if user.is_authenticated:
        flow_services.advisor_session_attach_user(advisor_session=advisor_session, user=user)
    _remember(request, advisor_session)
    return advisor_session


def _remember(request: HttpRequest, advisor_session: AdvisorSession) -> None:
    """Keep the visitor's advisor session in their cookie session, for "continue where you
    left off". Only once they have answered something: a visitor who merely opened the start
    page or a link gets no session row (each would live SESSION_COOKIE_AGE in the database),
    and only when it changes (every assignment is a write)."""
    if not advisor_session.answers:
        return
    if request.session.get(SESSION_KEY) != str(advisor_session.id):
        request.session[SESSION_KEY] = str(advisor_session.id)


# --- Start ------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def flow_start(request: HttpRequest, embed: bool = False) -> HttpResponse:
    if request.method == "POST":
        advisor_session = flow_services.advisor_session_start(user=request.user)
        return redirect(
            _url(
                "step",
                embed=embed,
                session_id=advisor_session.id,
                step=advisor_session.current_step,
            )
        )
    chart_key, chart_warning = flow_services.active_chart()
    chart = load_chart(chart_key)
    previous = None
    previous_id = request.session.get(SESSION_KEY)
    if previous_id:
        previous = AdvisorSession.objects.filter(pk=previous_id).first()
    return _page(
        request,
        "advisor/start.html",
        {
            "chart": chart,
            "embed": embed,
            "previous": previous,
            "previous_url": _url("resume", embed=embed, session_id=previous.id) if previous else "",
            "start_url": _url("start", embed=embed),
            "chart_warning": chart_warning if request.user.is_staff else "",
        },
    )


@require_GET
@_chart_gone
def flow_resume(request: HttpRequest, session_id, embed: bool = False) -> HttpResponse:
    advisor_session = _load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    if state.path.outcome:
        return redirect(_url("result", embed=embed, session_id=advisor_session.id))
    return redirect(
        _url("step", embed=embed, session_id=advisor_session.id, step=state.path.current)
    )


# --- One question per step --------------------------------------------------------------------


def display_answer(node: Node, value: Any) -> str:
    if value in (None, "", []):
        return "(left blank)"
    if node.type == "single":
        return node.choice_labels.get(str(value), str(value))
    if node.type == "multiple":
        return ", ".join(node.choice_labels.get(v, v) for v in value)
    if node.type == "number":
        number = f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"
        return f"{number} {node.unit}".strip()
    return str(value)


def _journey(
    state: flow_services.FlowState, advisor_session: AdvisorSession, *, embed: bool
) -> list[dict]:
    """The path so far: answered questions with a link to change each, and decisions made."""
    items = []
    for step in state.path.steps:
        node = state.chart.by_id[step]
        if node.kind == "question" and step in state.answers:
            items.append(
                {
                    "kind": "question",
                    "node": node,
                    "answer": display_answer(node, state.answers[step]),
                    "change_url": _url(
                        "step", embed=embed, session_id=advisor_session.id, step=step
                    ),
                }
            )
        elif node.kind == "decision":
            decision = state.path.decisions[step]
            items.append(
                {
                    "kind": "decision",
                    "node": node,
                    "answer": node.outcomes.get(decision.value, decision.value),
                    "explanation": decision.explanation,
                }
            )
    return items


def _progress(
    state: flow_services.FlowState, stored: dict[str, Any] | None = None, step: str | None = None
) -> dict:
    """ "Question n of about N": N counts the questions on this researcher's likely path.

    Changing an earlier answer (`step` before the current question, or any step once the
    path is finished) counts from that question: the ones before it, then the path ahead of
    it as the other answers settle it, not "Question 12 of about 12".
    """
    current = state.path.current
    questions = list(state.path.questions)
    if step and step != current and step in questions:
        done = questions.index(step)
        current = step
    else:
        done = len([s for s in questions if s != current])
    known = {**(stored or {}), **state.answers}
    known.update({s: d.value for s, d in state.path.decisions.items()})
    known.pop(current or "", None)
    remaining = state.chart.questions_ahead(current, known) if current else 0
    total = done + remaining
    return {"done": done, "total": total, "step_number": min(done + 1, total) if total else 0}


def _step_context(request, advisor_session, state, node, form, *, embed: bool) -> dict:
    return {
        "advisor_session": advisor_session,
        "chart": state.chart,
        "node": node,
        "form": form,
        "embed": embed,
        "progress": _progress(state, advisor_session.answers, node.id),
        "journey": _journey(state, advisor_session, embed=embed),
        "editing_earlier": node.id != state.path.current,
        "lookup": flow_services.model_lookup_for(state.fields.get("model_id"))
        if _is_model_question(node) or _follows_model_question(state, node)
        else None,
        # The size question names the model it asks about: the name is kept for the request.
        "model_name": state.fields.get("model_id") if _feeds(node, "params") else "",
        "action_url": _url("step", embed=embed, session_id=advisor_session.id, step=node.id),
        # A "did you mean" suggestion on the lookup card answers the model question again.
        "model_step_url": _url(
            "step",
            embed=embed,
            session_id=advisor_session.id,
            step=state.chart.step_for_field("model_id") or node.id,
        ),
        "resume_url": request.build_absolute_uri(
            _url("resume", embed=False, session_id=advisor_session.id)
        ),
        "chart_url": _url("session-chart", embed=False, session_id=advisor_session.id),
        "current_url": _url(
            "step", embed=embed, session_id=advisor_session.id, step=state.path.current
        )
        if state.path.current
        else _url("result", embed=embed, session_id=advisor_session.id),
    }


def _feeds(node: Node, field_name: str) -> bool:
    return node.estimate is not None and node.estimate.field == field_name


def _is_model_question(node: Node) -> bool:
    return node.type == "model_id" or _feeds(node, "params")


def _follows_model_question(state: flow_services.FlowState, node: Node) -> bool:
    """The question right after the model's: where the lookup's card shows when the size was
    found and no size question is asked."""
    questions = state.path.questions
    if node.id not in questions:
        return False
    index = questions.index(node.id)
    return index > 0 and state.chart.by_id[questions[index - 1]].type == "model_id"


def _earlier_answers(state: flow_services.FlowState, step: str) -> dict[str, Any]:
    earlier: dict[str, Any] = {s: d.value for s, d in state.path.decisions.items()}
    for s in state.path.questions:
        if s == step:
            break
        if s in state.answers:
            earlier[s] = state.answers[s]
    return earlier


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@_chart_gone
def flow_step(request: HttpRequest, session_id, step: str, embed: bool = False) -> HttpResponse:
    advisor_session = _load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    node = state.chart.node(step)
    if node is None or node.kind != "question":
        return _problem(
            request,
            status=404,
            embed=embed,
            advisor_session=advisor_session,
            message="This flowchart has no question with that name.",
        )
    if not flow_services.step_is_answerable(state=state, step=step):
        if request.method == "POST":
            return _problem(
                request,
                status=400,
                embed=embed,
                advisor_session=advisor_session,
                message="That question is not on your path: your earlier answers lead "
                "elsewhere. Nothing was saved.",
            )
        return redirect(_url("resume", embed=embed, session_id=advisor_session.id))
    earlier = _earlier_answers(state, step)
    if request.method == "POST":
        # Every answer may run the engine; a model answer may ask the Hub.
        rate_limit(request, "estimate")
        if node.type == "model_id":
            rate_limit(request, "lookup")
        form = StepForm(request.POST, node=node, earlier=earlier, autofocus_errors=not request.htmx)
        if form.is_valid():
            try:
                new_state = flow_services.advisor_session_answer(
                    advisor_session=advisor_session,
                    step=step,
                    raw=form.cleaned_data["answer"],
                    state=state,
                )
            except AnswerError as exc:
                form.add_error("answer", str(exc))
            except flow_services.StepNotOnPath:
                return _problem(
                    request,
                    status=400,
                    embed=embed,
                    advisor_session=advisor_session,
                    message="That question is not on your path. Nothing was saved.",
                )
            else:
                advisor_session.refresh_from_db(fields=["answers"])
                _remember(request, advisor_session)
                return _after_answer(request, advisor_session, new_state, embed=embed)
    else:
        initial = advisor_session.answers.get(step)
        form = StepForm(
            initial={"answer": initial} if initial is not None else None, node=node, earlier=earlier
        )
    context = _step_context(request, advisor_session, state, node, form, embed=embed)
    return _page(request, "advisor/flow.html", context, partial="advisor-step")


def _after_answer(request, advisor_session, state, *, embed: bool) -> HttpResponse:
    if state.path.outcome:
        target = _url("result", embed=embed, session_id=advisor_session.id)
        if request.htmx:
            return HttpResponseClientRedirect(target)
        return redirect(target)
    next_step = state.path.current
    target = _url("step", embed=embed, session_id=advisor_session.id, step=next_step)
    if not request.htmx:
        return redirect(target)
    node = state.chart.by_id[next_step]
    previous = advisor_session.answers.get(next_step)
    form = StepForm(
        initial={"answer": previous} if previous is not None else None,
        node=node,
        earlier=_earlier_answers(state, next_step),
    )
    context = _step_context(request, advisor_session, state, node, form, embed=embed)
    response = _page(request, "advisor/flow.html", context, partial="advisor-step")
    return push_url(response, target)


# --- The result -------------------------------------------------------------------------------


def _allocation_url(advisor_session: AdvisorSession) -> str:
    return reverse("allocations:request-create", kwargs={"session_id": advisor_session.id})


def _names(catalog) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    systems = {s.name: s.display_name for s in catalog.systems}
    accelerators = {a.name: a.display_name for a in catalog.accelerators}
    capacity = {a.name: a.memory_gb * 1e9 for a in catalog.accelerators}
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
    "cost": ("charged cost", lambda o: o.charge.total if o.charge else None),
}


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
    return f"{n_bytes / 1e9:,.2f} GB"


def _memory_range(result) -> str:
    """The engine's stated memory range for the recommendation, in words."""
    u = result.uncertainty or {}
    low, high = u.get("memory_low_bytes"), u.get("memory_high_bytes")
    if not low or not high:
        return ""
    points = int(u.get("memory_test_points") or 0)
    basis = (
        f"the error that covers 80% of {points} published measurements the engine was not tuned on"
        if points
        else "the engine's calibration margin"
    )
    return f"likely {low / 1e9:,.1f} to {high / 1e9:,.1f} GB ({basis})"


EXPERIENCE_TIPS = {
    "none": "New to HPC? Batch systems run your script from a queue: start with a short test "
    "job (a few minutes, one GPU) using the starter script, check it with seff or "
    "sstat, then scale up. Trial access, where a system offers it, suits this first "
    "step (the Turing's HPC Days 2024 talk).",
    "some": "Run a short test job first and check its memory and speed before the full run.",
}


@require_GET
@_chart_gone
def flow_result(request: HttpRequest, session_id, embed: bool = False) -> HttpResponse:
    advisor_session = _load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    if not state.path.outcome:
        return redirect(
            _url("step", embed=embed, session_id=advisor_session.id, step=state.path.current)
        )
    outcome = state.outcome
    stored = advisor_session.estimate_result or {}
    if isinstance(stored, dict) and stored.get("error"):
        # A model lookup may have ended since: estimate again rather than show an old failure.
        flow_services.advisor_session_refresh_result(advisor_session=advisor_session)
        advisor_session.refresh_from_db()
        state = flow_services.advisor_session_state(advisor_session=advisor_session)
        if not state.path.outcome:
            return redirect(
                _url("step", embed=embed, session_id=advisor_session.id, step=state.path.current)
            )
        outcome = state.outcome
        stored = advisor_session.estimate_result or {}
    result = None
    error = stored.get("error", "") if isinstance(stored, dict) else ""
    if stored and not error:
        result = EstimateResult.model_validate(stored)
    context: dict[str, Any] = {
        "advisor_session": advisor_session,
        "chart": state.chart,
        "outcome": outcome,
        "embed": embed,
        "journey": _journey(state, advisor_session, embed=embed),
        "result": result,
        "estimate_error": error,
        "cpu": flow_services.cpu_advice_for(state=state)
        if outcome.advice in ("cpu_interactive", "cpu_batch")
        else None,
        "allocation_url": _allocation_url(advisor_session),
        "chart_url": _url("session-chart", embed=False, session_id=advisor_session.id),
        "resume_url": request.build_absolute_uri(
            _url("resume", embed=False, session_id=advisor_session.id)
        ),
        "restart_url": _url("start", embed=embed),
        "experience_tip": EXPERIENCE_TIPS.get(state.fields.get("hpc_experience", ""), ""),
        "plan": advisor_session.project_plan,
        "systems_sentence": flow_services.outcome_systems(
            outcome=outcome, catalog=state.catalog
        ).sentence(state.catalog, outcome)
        if outcome.advice in ("gpu_estimate", "cloud")
        else "",
        "project_pays": flow_services.project_pays(state.fields),
        "hosting": flow_services.hosting_plan_for(state=state, result=result)
        if result is not None
        else None,
    }
    if outcome.advice == "secure":
        context["secure"] = flow_services.secure_route_for(
            state=state, result=result, plan=advisor_session.project_plan
        )
    if context["hosting"] is not None:
        from advisor.engine.hosting import months_text

        context["hosting_months_text"] = months_text(context["hosting"].months)
        context["hosting_justification"] = flow_services.hosting_justification(
            plan=context["hosting"], catalog=state.catalog, params=result.params_total
        )
        context["experience_tip"] = ""
    if result is not None:
        systems, accelerators, capacity = _names(state.catalog)
        sort = request.GET.get("sort", "rank")
        if sort not in ALTERNATIVE_SORTS:
            sort = "rank"
        alternatives = _alternatives(result, sort)
        shown = ([result.recommendation] if result.recommendation else []) + alternatives[:3]
        context.update(
            {
                "alternatives": [
                    {"option": o, "label": _option_label(o, systems, accelerators)}
                    for o in alternatives
                ],
                "alternative_sort": sort,
                "alternative_sorts": [
                    {"key": key, "words": words} for key, (words, _) in ALTERNATIVE_SORTS.items()
                ],
                "recommendation_label": _option_label(result.recommendation, systems, accelerators)
                if result.recommendation
                else "",
                "memory_svg": memory_chart_svg(
                    bars=_memory_bars(result, shown, systems, accelerators, capacity)
                ),
                "memory_rows": [
                    {"label": label, "gb": _gb(getattr(result.memory, key))}
                    for key, label in COMPONENTS
                    if getattr(result.memory, key)
                ],
                "memory_total": _gb(result.memory.total_bytes),
                "rec_memory": _gb(result.recommendation.memory_per_gpu_bytes)
                if result.recommendation
                else "",
                "justification": flow_services.session_justification(
                    state=state, result=result, plan=advisor_session.project_plan
                ),
                "memory_range": _memory_range(result),
                "deadline_warning": flow_services.deadline_warning(
                    state=state,
                    wall_hours=result.recommendation.wall_hours if result.recommendation else None,
                ),
            }
        )
    return _page(request, "advisor/result.html", context)


# --- The whole chart --------------------------------------------------------------------------


KIND_WORDS = {"question": "Question", "decision": "Decided for you", "outcome": "Outcome"}


def chart_outline(chart: Flowchart, steps: list[str]) -> list[dict]:
    """The chart in words, in the chart's order: each step and where each answer leads.

    What /chart/ shows without JavaScript (and to screen readers) instead of Mermaid source.
    """
    by_id = chart.by_id
    on_path = set(steps)
    outline = []
    for number, node in enumerate(chart.nodes, start=1):
        branches = []
        for edge in node.next:
            when = edge.label or _edge_label(node, edge, by_id)
            branches.append({"when": when, "to": edge.to, "title": by_id[edge.to].title})
        outline.append(
            {
                "number": number,
                "node": node,
                "kind": KIND_WORDS[node.kind],
                "branches": branches,
                "on_path": node.id in on_path,
            }
        )
    return outline


def _chart_context(chart: Flowchart, steps: list[str]) -> dict:
    by_id = chart.by_id
    return {
        "chart": chart,
        "mermaid": chart.mermaid(highlight=steps),
        "outline": chart_outline(chart, steps),
        "path_titles": [by_id[s].title for s in steps],
    }


@require_GET
def chart_view(request: HttpRequest) -> HttpResponse:
    chart_key, chart_warning = flow_services.active_chart()
    context = _chart_context(load_chart(chart_key), [])
    context["chart_warning"] = chart_warning if request.user.is_staff else ""
    return _page(request, "advisor/chart.html", context)


@require_GET
def session_chart_view(request: HttpRequest, session_id) -> HttpResponse:
    advisor_session = _load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    context = _chart_context(state.chart, state.path.steps)
    context["advisor_session"] = advisor_session
    context["back_url"] = _url("resume", embed=False, session_id=advisor_session.id)
    return _page(request, "advisor/chart.html", context)
