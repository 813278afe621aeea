"""Rate limits on what costs the institute: estimates (CPU), Hub lookups (the server's token
and the Hub's patience), model suggestions (a Hub search each).

django-ratelimit counts in the default cache: Redis in production (shared by every web worker;
config.cache.ResilientRedisCache), so a limit is per client across the whole site. Keyed per
signed-in user, else per client address (DJANGO_CLIENT_IP_HEADER behind the proxy; IPv6 by
/64). Staff are not limited. If Redis is down the counters cannot be kept and requests pass
(RATELIMIT_FAIL_OPEN): the limit protects the service, so it must not become the outage.
"""

from __future__ import annotations

import functools
import ipaddress

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit import ALL
from django_ratelimit.core import is_ratelimited
from django_ratelimit.exceptions import Ratelimited

# group -> the setting holding its rate ("30/m"; empty: no limit).
RATE_SETTINGS = {
    "estimate": "RATELIMIT_ESTIMATES",
    "lookup": "RATELIMIT_LOOKUPS",
    "suggest": "RATELIMIT_SUGGESTIONS",
}


def client_ip(request: HttpRequest) -> str:
    """RATELIMIT_IP_META_KEY: the client's address from CLIENT_IP_HEADER, else REMOTE_ADDR.

    A missing or malformed header (a request that bypassed the proxy, or a forged value) must
    not break the page, so anything that is not an IP address falls back to the peer's.
    """
    for key in (settings.CLIENT_IP_HEADER, "REMOTE_ADDR"):
        value = (request.META.get(key) or "").split(",")[0].strip()
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            continue
    return "0.0.0.0"  # noqa: S104 - not a bind address: the bucket for clients with none


def rate_for(group: str, request: HttpRequest) -> str | None:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return None
    return getattr(settings, RATE_SETTINGS[group]) or None


def rate_limit(request: HttpRequest, group: str) -> None:
    """Count this request against `group`; raise Ratelimited (a 429 page) once over."""
    if not settings.RATELIMIT_ENABLE:
        return
    if is_ratelimited(
        request, group=group, key="user_or_ip", rate=rate_for, method=ALL, increment=True
    ):
        raise Ratelimited()


def rate_limited(group: str, *, methods: tuple[str, ...] = ("POST",)):
    """View decorator: requests with one of `methods` count against `group`."""

    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method in methods:
                rate_limit(request, group)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
