"""What the advisor's page views share: URLs, rendering, the session a page is about, the
journey so far, and the problem page for what cannot be shown."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError, connections
from django.db.models import Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from advisor import flow_services
from advisor.chart_walk import answer_fields
from advisor.embedding import allowed_origins
from advisor.engine import ENGINE_VERSION
from advisor.flow_decisions import model_lookup_for
from advisor.flowchart import FlowchartError, Node, load_chart
from advisor.models import AdvisorSession
from catalog.models import CatalogVersion
from catalog.selectors import catalog_version
from web.page_cache import CSRF_PLACEHOLDER, cache_read, cache_write, page_key, with_csrf_token
from web.partials import HTMX_HEADERS, render_page, wants_partial

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


def cacheable_page(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    cache_key: str | None,
    partial: str | None = None,
    state: FlowState | None = None,
) -> HttpResponse:
    """`page`, rendered for the page cache and kept under `cache_key` (None: not kept).

    Kept with the catalog's version stamp when `state` read the catalog (a page that read none
    does not depend on it; one read at an unknown stamp is not kept).
    """
    context = {**context, "csrf_token": CSRF_PLACEHOLDER}
    response = page(request, template, context, partial=partial)
    body = response.content
    reader = state.catalog_reader if state is not None else None
    read = reader is not None and reader.was_read
    if cache_key is not None and response.status_code == 200 and not (read and not reader.stamp):
        cache_write(cache_key, (reader.stamp if read else None, body))
    response.content = with_csrf_token(request, body)
    return response


def cached_page(
    request: HttpRequest,
    cache_key: str | None,
    *,
    partial: str | None = None,
    advisor_session: AdvisorSession | None = None,
):
    """The page `cacheable_page` kept under `cache_key` with this visitor's CSRF token, or None
    (not kept, or the catalog changed since). The catalog's stamp comes with a session read by
    `load_page_session`, else from its own one-row query (pages that read the catalog only)."""
    entry = cache_read(cache_key) if cache_key else None
    if not isinstance(entry, tuple) or len(entry) != 2:
        return None
    stamp, body = entry
    if not isinstance(body, bytes) or (
        stamp is not None and stamp != _catalog_stamp(advisor_session)
    ):
        return None
    response = HttpResponse(with_csrf_token(request, body))
    if partial:
        patch_vary_headers(response, HTMX_HEADERS)
    return response


def page_cache_key(
    request: HttpRequest, advisor_session: AdvisorSession, *parts: Any
) -> str | None:
    """The page cache key of a page about `advisor_session`: everything it is rendered from
    besides `parts` (the page, its step, its sort...), the visitor (web.page_cache.page_key)
    and the catalog (whose stamp `cacheable_page` keeps beside the page: not every page reads
    it).

    The session's answers and stored estimate (every write moves `updated_at`), the chart
    file's version, the engine's version, today's date (deadlines are counted from it), the
    address links are built on, the origins allowed to frame the embed, and the htmx headers
    (a swap gets the step alone, with the tab's title). A model answer adds its Hub lookup's
    state: the checks on the path and the lookup card read it.
    """
    chart = load_chart(advisor_session.chart)
    model_id = answer_fields(chart, advisor_session.answers).get("model_id")
    lookup = model_lookup_for(str(model_id)) if model_id else None
    return page_key(
        request,
        str(advisor_session.pk),
        advisor_session.updated_at.isoformat() if advisor_session.updated_at else None,
        advisor_session.chart,
        chart.file_version,
        ENGINE_VERSION,
        timezone.localdate().isoformat(),
        request.scheme,
        request.get_host(),
        tuple(allowed_origins()),  # the embed chrome names them (settings, not code)
        bool(getattr(request, "htmx", False)),
        wants_partial(request),
        (lookup.pk, lookup.status, lookup.updated_at.isoformat()) if lookup else None,
        *parts,
    )


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


def _catalog_stamp(advisor_session: AdvisorSession | None) -> str | None:
    if advisor_session is not None and hasattr(advisor_session, "catalog_stamp_now"):
        return advisor_session.catalog_stamp_now
    return catalog_version()


def load_page_session(request: HttpRequest, session_id) -> AdvisorSession:
    """`load_session` for a page the page cache may answer, in one query reading only what the
    page's cache key needs, with the stored estimate's error message (its own column) and the
    catalog's stamp. A page answered from the cache reads nothing else; one that is
    rendered calls `complete_session` first."""
    connection = connections[AdvisorSession.objects.db]
    query = _page_session_query(connection.vendor)
    pk = AdvisorSession._meta.pk
    value = pk.get_db_prep_value(pk.to_python(session_id), connection)
    params = [value if i == query.placeholder else p for i, p in enumerate(query.params)]
    row = _read_checking_connection(connection, query.sql, params)
    if row is None:
        raise Http404("No such advisor session.")
    return load_session(request, session_id, found=query.session_from(row, connection))


def _read_checking_connection(connection, sql: str, params: list) -> tuple | None:
    """One row of a read that doubles as the request's connection health check.

    With CONN_HEALTH_CHECKS Django sends a `SELECT 1` before a request's first query, a round
    trip of its own (about a tenth of a millisecond of CPU, client and server together) on a
    cached page that makes no other query. Here the page's own read is the check: a connection
    the server dropped (a restart, an idle timeout) fails it, and it is reopened and the read,
    which changes nothing, runs once more. Inside a transaction, or where Django has already
    checked, it is a plain read."""
    checking = (
        connection.connection is not None
        and connection.health_check_enabled
        and not connection.health_check_done
        and not connection.in_atomic_block
    )
    if checking:
        connection.health_check_done = True  # this read is the check (see above)
    try:
        return _fetch_one(connection, sql, params)
    except (OperationalError, InterfaceError):
        if not checking:
            raise
        connection.close()  # the next cursor reconnects
        return _fetch_one(connection, sql, params)


def _fetch_one(connection, sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def complete_session(advisor_session: AdvisorSession) -> None:
    """The rest of a session read by `load_page_session` (its answers' estimate, plan...), in
    one query."""
    deferred = advisor_session.get_deferred_fields()
    if deferred:
        advisor_session.refresh_from_db(fields=sorted(deferred))


# What a page's cache key reads (`page_cache_key`, `load_session`); the rest (the estimate is
# tens of kB of JSON) is read only for a page that is rendered.
_KEY_FIELDS = (
    "id",
    "user_id",
    "chart",
    "answers",
    "current_step",
    "updated_at",
    "estimate_error",
)
_PLACEHOLDER_ID = uuid.UUID(int=0)


@dataclass(frozen=True)
class _PageSessionQuery:
    """`load_page_session`'s query, compiled once per process (per database kind): Django
    compiles a queryset on every call, and a raw queryset maps its columns to fields on every
    call too; each costs more CPU than the query takes to run."""

    sql: str
    params: tuple
    placeholder: int  # which parameter is the session's id
    columns: tuple[Any, ...]  # each column's expression: how its value is converted
    names: tuple[str, ...]  # each column's field (attname) or annotation
    annotations: frozenset[str]

    def session_from(self, row: tuple, connection) -> AdvisorSession:
        """The session a row describes (its other fields deferred), its annotations as
        attributes, each value converted as Django's own queries convert it."""
        values = {}
        for name, column, value in zip(self.names, self.columns, row, strict=True):
            converters = connection.ops.get_db_converters(column)
            for convert in converters + column.get_db_converters(connection):
                value = convert(value, column, connection)
            values[name] = value
        fields = [f.attname for f in AdvisorSession._meta.concrete_fields if f.attname in values]
        found = AdvisorSession.from_db(connection.alias, fields, [values[f] for f in fields])
        for name in self.annotations:
            setattr(found, name, values[name])
        return found


@functools.cache
def _page_session_query(vendor: str) -> _PageSessionQuery:
    rows = (
        AdvisorSession.objects.only(*_KEY_FIELDS)
        .annotate(
            catalog_stamp_now=Subquery(
                CatalogVersion.objects.filter(pk=CatalogVersion.SINGLETON).values("stamp")[:1]
            ),
        )
        .filter(pk=_PLACEHOLDER_ID)
        .order_by()
    )
    connection = connections[AdvisorSession.objects.db]
    compiler = rows.query.get_compiler(connection=connection)
    sql, params = compiler.as_sql()
    columns = tuple(expression for expression, _sql, _alias in compiler.select)
    names = [""] * len(columns)
    for index in compiler.klass_info["select_fields"]:
        names[index] = columns[index].target.attname
    for name, index in compiler.annotation_col_map.items():
        names[index] = name
    prepared = AdvisorSession._meta.pk.get_db_prep_value(_PLACEHOLDER_ID, connection)
    return _PageSessionQuery(
        sql=sql,
        params=tuple(params),
        placeholder=list(params).index(prepared),
        columns=columns,
        names=tuple(names),
        annotations=frozenset(compiler.annotation_col_map),
    )


def load_session(
    request: HttpRequest, session_id, *, found: AdvisorSession | None = None
) -> AdvisorSession:
    advisor_session = found or get_object_or_404(AdvisorSession, pk=session_id)
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
