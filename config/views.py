from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from advisor.embedding import allowed_origins, frame_ancestors
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


# --- Error pages ------------------------------------------------------------------------------
# handler400/403/404/500 (config/urls.py). Django's defaults are wrapped in requires_csrf_token,
# which reads request.POST again: a body Django already refused (a form post declaring
# charset=latin-1, say) raised a second time inside the handler and became a bare 500. These
# never touch the body. The API answers in JSON; embed pages answer inside the intranet frame.

API_PREFIX = "/api/"

ERROR_MESSAGES = {
    400: "That request could not be understood. Nothing was changed.",
    403: "You are not allowed to do that.",
    404: "There is nothing at this address.",
    429: "Too many requests from you in a short time. Wait a minute, then try again.",
    500: "Something went wrong on our side. The error has been logged; please try again in a "
    "few minutes.",
}


def _framed(response: HttpResponse) -> HttpResponse:
    response.xframe_options_exempt = True
    response["Content-Security-Policy"] = f"frame-ancestors {frame_ancestors()}"
    return response


def _error_page(
    request: HttpRequest, status: int, template: str, *, use_request: bool = True
) -> HttpResponse:
    message = ERROR_MESSAGES[status]
    path = request.path
    if path.startswith(API_PREFIX):
        return JsonResponse({"errors": [{"field": "", "message": message}]}, status=status)
    if path.startswith(EMBED_PREFIX):
        context = {
            "embed": True,
            "embed_origins": allowed_origins(),
            "status": status,
            "message": message,
            "resume_url": "/embed/",
        }
        if use_request:
            return _framed(render(request, "advisor/problem.html", context, status=status))
        page = loader.get_template("advisor/problem.html").render(context)
        return _framed(HttpResponse(page, status=status))
    if use_request:
        return render(request, template, {"message": message}, status=status)
    return HttpResponse(loader.get_template(template).render(), status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    return _error_page(request, 400, "400.html")


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _error_page(request, 403, "403.html")


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _error_page(request, 404, "404.html")


def server_error(request: HttpRequest) -> HttpResponse:
    # Rendered without the request: whatever failed (the database, a session) may fail again.
    try:
        return _error_page(request, 500, "500.html", use_request=False)
    except Exception:  # noqa: BLE001 - the last resort must answer, whatever broke
        return HttpResponse(ERROR_MESSAGES[500], status=500, content_type="text/plain")


def too_many_requests(request: HttpRequest, exception=None) -> HttpResponse:
    """RATELIMIT_VIEW: 429 with Retry-After, as JSON, a framed page or a site page."""
    response = _error_page(request, 429, "429.html")
    response["Retry-After"] = "60"
    return response
