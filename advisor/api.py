"""JSON API: POST /api/estimate takes an EstimateRequest and returns an EstimateResult."""

from __future__ import annotations

import json

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from advisor.engine import RequestError
from advisor.estimation import error_list, estimate_run
from advisor.json_input import JsonNumberError, json_loads
from config.ratelimits import rate_limit

# A config.json is a few KB and Hub metadata tens of KB; anything larger is not a request.
MAX_BODY_BYTES = 256 * 1024


def _errors(status: int, field: str, message: str, **headers) -> JsonResponse:
    response = JsonResponse({"errors": [{"field": field, "message": message}]}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


@csrf_exempt  # a JSON API for tools: no cookies are read, so there is nothing to forge
def estimate_api(request: HttpRequest) -> JsonResponse:
    if request.method != "POST":
        return _errors(405, "", "Use POST with a JSON body.", Allow="POST")
    rate_limit(request, "estimate")
    if request.content_type != "application/json":
        return _errors(415, "", "Send the request as Content-Type: application/json.")
    length = request.META.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return _errors(413, "", f"The request body is limited to {MAX_BODY_BYTES // 1024} KB.")
    try:
        body = request.body
    except RequestDataTooBig:
        return _errors(413, "", f"The request body is limited to {MAX_BODY_BYTES // 1024} KB.")
    try:
        data = json_loads(body)
    except JsonNumberError as exc:
        return _errors(400, "", f"The body cannot be an estimate request: {exc}.")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _errors(400, "", f"The body is not valid JSON: {exc}.")
    except RecursionError:
        # A quarter of a megabyte of "[" parses into nothing an estimate could use.
        return _errors(400, "", "The body is nested too deeply to be an estimate request.")
    try:
        result = estimate_run(data=data)
    except RequestError as exc:
        return JsonResponse({"errors": error_list(exc)}, status=400)
    return JsonResponse(result.model_dump(mode="json"))
