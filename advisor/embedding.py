"""Framing rules: embed pages may be framed by the intranet origins staff list; nothing else.

Every page keeps Django's `X-Frame-Options: DENY`. Views wrapped in `embeddable` drop that
header and instead send `Content-Security-Policy: frame-ancestors 'self' <origins>`, with the
origins from `EMBED_ALLOWED_ORIGINS`. Browsers that know CSP use it; with no origins listed only
the advisor itself may frame the page.
"""

from __future__ import annotations

import functools
import re

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse

# scheme://host[:port], nothing more: anything else would let a typo widen the policy.
_ORIGIN = re.compile(
    r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$|^https?://\[[0-9A-Fa-f:]+\](:\d{1,5})?$"
)


def allowed_origins() -> list[str]:
    origins = [origin.rstrip("/") for origin in settings.EMBED_ALLOWED_ORIGINS]
    bad = [origin for origin in origins if not _ORIGIN.match(origin)]
    if bad:
        raise ImproperlyConfigured(
            f"EMBED_ALLOWED_ORIGINS must list origins like https://intranet.example.ac.uk; "
            f"not {', '.join(bad)}"
        )
    return origins


def frame_ancestors() -> str:
    return " ".join(["'self'", *allowed_origins()])


def embeddable(view):
    """Let allowed origins frame this view's responses (and only this view's)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            # Django's own 404 page carries X-Frame-Options: DENY, which the frame shows as an
            # empty box: answer inside the frame instead, with a way to start again.
            response = render(
                request,
                "advisor/problem.html",
                {
                    "embed": True,
                    "embed_origins": allowed_origins(),
                    "status": 404,
                    "message": "There is no advisor session at this address: the link may be "
                    "mistyped or the session belongs to another account.",
                    "resume_url": reverse("advisor:embed-start"),
                },
                status=404,
            )
        response.xframe_options_exempt = True
        response["Content-Security-Policy"] = f"frame-ancestors {frame_ancestors()}"
        return response

    return wrapped
