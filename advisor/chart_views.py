"""The whole flowchart: as a Mermaid diagram and in words, with a session's path marked."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from advisor import flow_services
from advisor.chart_diagram import chart_mermaid, edge_label
from advisor.flowchart import Flowchart, load_chart
from advisor.view_helpers import flow_url, load_session, page

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
            when = edge.label or edge_label(node, edge, by_id)
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
        "mermaid": chart_mermaid(chart, highlight=steps),
        "outline": chart_outline(chart, steps),
        "path_titles": [by_id[s].title for s in steps],
    }


@require_GET
def chart_view(request: HttpRequest) -> HttpResponse:
    chart_key, chart_warning = flow_services.active_chart()
    context = _chart_context(load_chart(chart_key), [])
    context["chart_warning"] = chart_warning if request.user.is_staff else ""
    return page(request, "advisor/chart.html", context)


@require_GET
def session_chart_view(request: HttpRequest, session_id) -> HttpResponse:
    advisor_session = load_session(request, session_id)
    state = flow_services.advisor_session_state(advisor_session=advisor_session)
    context = _chart_context(state.chart, state.path.steps)
    context["advisor_session"] = advisor_session
    context["back_url"] = flow_url("resume", embed=False, session_id=advisor_session.id)
    return page(request, "advisor/chart.html", context)
