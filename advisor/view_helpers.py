"""What the advisor's page views share: URLs, rendering, the session a page is about, the
journey so far, and the problem page for what cannot be shown."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

from advisor import flow_services
from advisor.embedding import allowed_origins
from advisor.flowchart import FlowchartError, Node
from advisor.models import AdvisorSession
from web.partials import render_page

if TYPE_CHECKING:
    from advisor.flow_services import FlowState


SESSION_KEY = "advisor_session_id"


def flow_url(name: str, *, embed: bool, **kwargs: Any) -> str:
    return reverse(f"advisor:{'embed-' if embed else ''}{name}", kwargs=kwargs or None)


def page(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    status: int = 200,
    partial: str | None = None,
) -> HttpResponse:
    """An advisor page (or its htmx partial): the embed chrome knows which origins may frame it."""
    context.setdefault("embed", False)
    if context["embed"]:
        context.setdefault("embed_origins", allowed_origins())
    return render_page(request, template, context, status=status, partial=partial)


def problem(
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
        "resume_url": flow_url("resume", embed=embed, session_id=advisor_session.id)
        if advisor_session
        else flow_url("start", embed=embed),
    }
    return page(request, "advisor/problem.html", context, status=status)


def chart_gone(view):
    """A session whose chart file was removed or broken gets a message, not a 500."""

    @functools.wraps(view)
    def wrapped(request, *args, embed: bool = False, **kwargs):
        try:
            return view(request, *args, embed=embed, **kwargs)
        except FlowchartError:
            return problem(
                request,
                status=410,
                embed=embed,
                message="The flowchart this session used is no longer available. "
                "Please start again.",
            )

    return wrapped


def load_session(request: HttpRequest, session_id) -> AdvisorSession:
    advisor_session = get_object_or_404(AdvisorSession, pk=session_id)
    user = request.user
    if advisor_session.user_id is not None and (
        not user.is_authenticated or user.pk != advisor_session.user_id
    ):
        # Once attached to an account the session is that account's alone.
        raise Http404("No such advisor session.")
    if user.is_authenticated:
        flow_services.advisor_session_attach_user(advisor_session=advisor_session, user=user)
    remember(request, advisor_session)
    return advisor_session


def remember(request: HttpRequest, advisor_session: AdvisorSession) -> None:
    """Keep the visitor's advisor session in their cookie session, for "continue where you
    left off". Only once they have answered something: a visitor who merely opened the start
    page or a link gets no session row (each would live SESSION_COOKIE_AGE in the database),
    and only when it changes (every assignment is a write)."""
    if not advisor_session.answers:
        return
    if request.session.get(SESSION_KEY) != str(advisor_session.id):
        request.session[SESSION_KEY] = str(advisor_session.id)


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


def journey(state: FlowState, advisor_session: AdvisorSession, *, embed: bool) -> list[dict]:
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
                    "change_url": flow_url(
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
