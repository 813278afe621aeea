from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from catalog.selectors import (
    DEFAULT_SORT,
    SORT_KEYS,
    comparison_rows,
    profiles_and_stamp,
    secure_systems,
)
from web.page_cache import CSRF_PLACEHOLDER, cache_read, cache_write, page_key, with_csrf_token
from web.partials import HTMX_HEADERS, render_page, wants_partial


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


# (sort key or None, heading, unit shown in the heading)
COLUMNS = [
    ("system", "System", ""),
    ("gpu", "GPU", ""),
    ("memory", "Memory per GPU", "GB"),
    ("gpus_per_node", "GPUs per node", ""),
    ("bf16", "BF16 peak", "TFLOP/s"),
    ("fp16", "FP16 peak", "TFLOP/s"),
    ("fp32", "FP32 peak", "TFLOP/s"),
    ("bandwidth", "Memory bandwidth", "GB/s"),
    (None, "Interconnect", ""),
    ("scheduler", "Scheduler", ""),
    ("notebooks", "Notebooks", ""),
    (None, "Tooling", ""),
    (None, "Access", ""),
    ("status", "Status", ""),
]


def _headers(*, sort: str, profile_name: str | None) -> list[dict]:
    current = sort.lstrip("-")
    descending = sort.startswith("-")
    headers = []
    for key, label, unit in COLUMNS:
        header = {"key": key, "label": label, "unit": unit, "aria_sort": None, "href": None}
        if key is not None:
            # Clicking the sorted column flips its direction; any other starts ascending.
            target = f"-{key}" if key == current and not descending else key
            query = f"?sort={target}" + (f"&profile={profile_name}" if profile_name else "")
            header["href"] = query
            if key == current:
                header["aria_sort"] = "descending" if descending else "ascending"
        headers.append(header)
    return headers


def _page_cache_key(request: HtmxHttpRequest, stamp: str | None) -> str | None:
    """The page's key in the page cache (web.page_cache): it changes only with the catalog,
    whose stamp every write replaces. Only the page's own query strings are kept, so made-up
    addresses cannot fill the cache; before the first catalog write nothing is."""
    if stamp is None or not set(request.GET) <= {"sort", "profile"}:
        return None
    if any(len(request.GET.getlist(name)) > 1 for name in request.GET):
        return None
    return page_key(
        request,
        "catalog",
        stamp,
        timezone.localdate().isoformat(),
        wants_partial(request),
        bool(getattr(request, "htmx", False)),
    )


@require_GET
@vary_on_headers("HX-Request")
def systems(request: HtmxHttpRequest) -> HttpResponse:
    # The stamp is read with the profiles, before the other rows: a page built from rows newer
    # than its stamp is never shown again, since the stamp has moved on.
    profiles, stamp = profiles_and_stamp()
    cache_key = _page_cache_key(request, stamp)
    body = cache_read(cache_key) if cache_key else None
    if isinstance(body, bytes):
        response = HttpResponse(with_csrf_token(request, body))
        patch_vary_headers(response, HTMX_HEADERS)
        return response
    requested = request.GET.get("profile")
    if requested:
        profile = next((p for p in profiles if p.name == requested), None)
        if profile is None:
            raise Http404("No catalog profile of that name has been loaded.")
    else:
        profile = next((p for p in profiles if p.is_active), None)
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort.lstrip("-") not in SORT_KEYS:
        sort = DEFAULT_SORT
    context = {
        "profiles": profiles,
        "profile": profile,
        "rows": comparison_rows(profile=profile, sort=sort) if profile else [],
        "headers": _headers(sort=sort, profile_name=requested),
        "sort": sort,
        "secure_systems": secure_systems(profile=profile),
        "csrf_token": CSRF_PLACEHOLDER,  # the visitor's own goes in below, kept or not
    }
    response = render_page(request, "catalog/systems.html", context, partial="catalog-table")
    body = response.content
    if cache_key is not None:
        cache_write(cache_key, body)
    response.content = with_csrf_token(request, body)
    return response
