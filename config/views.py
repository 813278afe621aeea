from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from advisor.embedding import frame_ancestors
from config.health import broker_status, database_status

EMBED_PREFIX = "/embed/"


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_status(), "broker": broker_status()}
    healthy = all(check["status"] == "ok" for check in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages without a <link rel="icon"> (the admin's own)."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a plain 403 page that says what to do, framable inside the embed.

    Inside the intranet frame the usual cause is a browser refusing this site's cookie; the
    page must then show in the frame (not be blanked by X-Frame-Options) and offer a new tab.
    """
    embed = request.path.startswith(EMBED_PREFIX)
    page = request.path.removeprefix("/embed") if embed else request.path
    response = render(
        request, "403_csrf.html", {"embed": embed, "retry_url": page, "reason": reason}, status=403
    )
    if embed:
        response.xframe_options_exempt = True
        response["Content-Security-Policy"] = f"frame-ancestors {frame_ancestors()}"
    return response
