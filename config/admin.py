"""The project's admin site: Django's, refusing query strings PostgreSQL cannot take.

A list filter or search built from `?facility=%00` reaches the database as text holding NUL,
which PostgreSQL refuses with an error (a 500) when the page is rendered. Every admin page goes
through `admin_view`, so that is where such a query string is turned away, with a message.
"""

from __future__ import annotations

import functools

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponseRedirect


def query_has_nul(request: HttpRequest) -> bool:
    return any(
        "\x00" in key or any("\x00" in value for value in values)
        for key, values in request.GET.lists()
    )


class TriageAdminSite(admin.AdminSite):
    def admin_view(self, view, cacheable=False):
        checked = super().admin_view(view, cacheable)

        @functools.wraps(checked)
        def inner(request: HttpRequest, *args, **kwargs):
            if query_has_nul(request):
                messages.error(
                    request,
                    "Filters and searches cannot contain NUL characters; "
                    "showing the page without them.",
                )
                return HttpResponseRedirect(request.path)
            return checked(request, *args, **kwargs)

        return inner
