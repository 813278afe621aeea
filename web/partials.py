"""One way to render a page or, for htmx, one named partial of it (django-template-partials).

A view renders its page's own template; an htmx request gets the partial `template#name` (the
partial's name is the id of its root element and the hx-target). A history-restore request
(htmx asking again for a page missing from its history cache, `HX-History-Restore-Request`)
also carries `HX-Request`, but htmx puts the answer in place of the whole <body>: it gets the
full page, or the restored page would have no layout. Either way the response varies on both
headers, so a cache never serves the fragment for a full page.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

HTMX_HEADERS = ("HX-Request", "HX-History-Restore-Request")


def wants_partial(request: HttpRequest) -> bool:
    """An htmx request that swaps a region of the page (not a history restore)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def render_page(
    request: HttpRequest,
    template_name: str,
    context: dict[str, Any] | None = None,
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The page, or only its `partial` for an htmx swap; Vary names the htmx headers."""
    name = f"{template_name}#{partial}" if partial and wants_partial(request) else template_name
    response = render(request, name, context, status=status)
    if partial:
        patch_vary_headers(response, HTMX_HEADERS)
    return response
