from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.health import broker_status, database_status


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_status(), "broker": broker_status()}
    healthy = all(check["status"] == "ok" for check in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )
