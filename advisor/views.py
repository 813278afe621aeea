"""The researcher's pages: start, resume and one question per step.

Every page works as a plain form post; with htmx the step region is swapped in place and the
address pushed, so back, forward and reload land on real pages. The same views serve the
intranet embed (`embed=True`), which only changes the chrome and the framing headers. The
result is in `result_views`, the whole chart in `chart_views`.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, push_url

from advisor import flow_services
from advisor.chart_walk import AnswerError
from advisor.flow_decisions import model_lookup_for
from advisor.flow_services import FlowState
from advisor.flowchart import Node, load_chart
from advisor.forms import StepForm
from advisor.models import AdvisorSession
from advisor.view_helpers import (
    SESSION_KEY,
    cacheable_page,
    cached_page,
    chart_gone,
    flow_url,
    journey,
    load_page_session,
    load_session,
    page,
    page_cache_key,
    problem,
    remember,
)
from config.ratelimits import rate_limit

# --- Start ------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def flow_start(request: HttpRequest, embed: bool = False) -> HttpResponse:
    if request.method == "POST":
        advisor_session = flow_services.advisor_session_start(user=request.user)
        return redirect(
            flow_url(
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
    return page(
        request,
        "advisor/start.html",
        {
            "chart": chart,
            "embed": embed,
            "previous": previous,
            "previous_url": flow_url("resume", embed=embed, session_id=previous.id)
            if previous
            else "",
            "start_url": flow_url("start", embed=embed),
            "chart_warning": chart_warning if request.user.is_staff else "",
        },
    )


@require_GET
@chart_gone
def flow_resume(request: HttpRequest, session_id, embed: bool = False) -> HttpResponse:
    advisor_session = load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    if state.path.outcome:
        return redirect(flow_url("result", embed=embed, session_id=advisor_session.id))
    return redirect(
        flow_url("step", embed=embed, session_id=advisor_session.id, step=state.path.current)
    )


# --- One question per step --------------------------------------------------------------------


def _progress(
    state: FlowState, stored: dict[str, Any] | None = None, step: str | None = None
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
        "journey": journey(state, advisor_session, embed=embed),
        "editing_earlier": node.id != state.path.current,
        "lookup": model_lookup_for(state.fields.get("model_id"))
        if _is_model_question(node) or _follows_model_question(state, node)
        else None,
        # The size question names the model it asks about: the name is kept for the request.
        "model_name": state.fields.get("model_id") if _feeds(node, "params") else "",
        "action_url": flow_url("step", embed=embed, session_id=advisor_session.id, step=node.id),
        # A "did you mean" suggestion on the lookup card answers the model question again.
        "model_step_url": flow_url(
            "step",
            embed=embed,
            session_id=advisor_session.id,
            step=state.chart.step_for_field("model_id") or node.id,
        ),
        "resume_url": request.build_absolute_uri(
            flow_url("resume", embed=False, session_id=advisor_session.id)
        ),
        "chart_url": flow_url("session-chart", embed=False, session_id=advisor_session.id),
        "current_url": flow_url(
            "step", embed=embed, session_id=advisor_session.id, step=state.path.current
        )
        if state.path.current
        else flow_url("result", embed=embed, session_id=advisor_session.id),
    }


def _feeds(node: Node, field_name: str) -> bool:
    return node.estimate is not None and node.estimate.field == field_name


def _is_model_question(node: Node) -> bool:
    return node.type == "model_id" or _feeds(node, "params")


def _follows_model_question(state: FlowState, node: Node) -> bool:
    """The question right after the model's: where the lookup's card shows when the size was
    found and no size question is asked."""
    questions = state.path.questions
    if node.id not in questions:
        return False
    index = questions.index(node.id)
    return index > 0 and state.chart.by_id[questions[index - 1]].type == "model_id"


def _earlier_answers(state: FlowState, step: str) -> dict[str, Any]:
    earlier: dict[str, Any] = {s: d.value for s, d in state.path.decisions.items()}
    for s in state.path.questions:
        if s == step:
            break
        if s in state.answers:
            earlier[s] = state.answers[s]
    return earlier


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@chart_gone
def flow_step(request: HttpRequest, session_id, step: str, embed: bool = False) -> HttpResponse:
    cache_key = None
    if request.method == "GET" and not request.GET:  # a query string: not kept (any is allowed)
        # The question as shown before is shown again while nothing it depends on has changed.
        advisor_session = load_page_session(request, session_id)
        cache_key = page_cache_key(request, advisor_session, "step", step, embed)
        cached = cached_page(
            request, cache_key, partial="advisor-step", advisor_session=advisor_session
        )
        if cached is not None:
            return cached
        # A question shows the answers only: the stored estimate is not read.
    else:
        advisor_session = load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    node = state.chart.node(step)
    if node is None or node.kind != "question":
        return problem(
            request,
            status=404,
            embed=embed,
            advisor_session=advisor_session,
            message="This flowchart has no question with that name.",
        )
    if not flow_services.step_is_answerable(state=state, step=step):
        if request.method == "POST":
            return problem(
                request,
                status=400,
                embed=embed,
                advisor_session=advisor_session,
                message="That question is not on your path: your earlier answers lead "
                "elsewhere. Nothing was saved.",
            )
        return redirect(flow_url("resume", embed=embed, session_id=advisor_session.id))
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
                return problem(
                    request,
                    status=400,
                    embed=embed,
                    advisor_session=advisor_session,
                    message="That question is not on your path. Nothing was saved.",
                )
            else:
                advisor_session.refresh_from_db(fields=["answers"])
                remember(request, advisor_session)
                return _after_answer(request, advisor_session, new_state, embed=embed)
    else:
        initial = advisor_session.answers.get(step)
        form = StepForm(
            initial={"answer": initial} if initial is not None else None, node=node, earlier=earlier
        )
    context = _step_context(request, advisor_session, state, node, form, embed=embed)
    # Only a GET's page is kept: a POST's shows this visitor's rejected answer and its errors.
    return cacheable_page(
        request,
        "advisor/flow.html",
        context,
        partial="advisor-step",
        cache_key=cache_key,
        state=state,
    )


def _after_answer(request, advisor_session, state, *, embed: bool) -> HttpResponse:
    if state.path.outcome:
        target = flow_url("result", embed=embed, session_id=advisor_session.id)
        if request.htmx:
            return HttpResponseClientRedirect(target)
        return redirect(target)
    next_step = state.path.current
    target = flow_url("step", embed=embed, session_id=advisor_session.id, step=next_step)
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
    response = page(request, "advisor/flow.html", context, partial="advisor-step")
    return push_url(response, target)
