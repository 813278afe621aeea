"""Site-wide request handling that no single app owns."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


class HeadAsGetMiddleware:
    """HEAD answers wherever GET does, with GET's status and headers and no body.

    RFC 9110 section 9.3.2: a server SHOULD send the same header fields for HEAD as for GET.
    Django's `require_GET` refuses HEAD with 405, so monitors, link checkers and `curl -I` saw
    405 on pages that work. Views see a GET (they have no side effects on GET), and the body
    is dropped here; Content-Length stays that of the GET response. Static files are answered
    by WhiteNoise, which handles HEAD itself, so this sits after it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method != "HEAD":
            return self.get_response(request)
        request.method = "GET"
        response = self.get_response(request)
        if response.streaming:
            close = getattr(response, "close", None)
            response.streaming_content = []
            if close is not None:
                close()
        else:
            length = len(response.content)
            response.content = b""
            response["Content-Length"] = str(length)
        return response
