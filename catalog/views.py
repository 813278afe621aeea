from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from catalog.selectors import (
    DEFAULT_SORT,
    SORT_KEYS,
    comparison_rows,
    profiles_loaded,
    secure_systems,
)
from web.partials import render_page


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


@require_GET
@vary_on_headers("HX-Request")
def systems(request: HtmxHttpRequest) -> HttpResponse:
    profiles = list(profiles_loaded())
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
    }
    return render_page(request, "catalog/systems.html", context, partial="catalog-table")
