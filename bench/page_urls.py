"""The project's URLs plus /bench/bare/: a plain response behind the same middleware, the
baseline bench/page_throughput.py compares the advisor's pages with."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok\n", content_type="text/plain")


urlpatterns = [path("bench/bare/", bare), path("", include("config.urls"))]
