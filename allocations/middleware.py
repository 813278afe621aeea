"""Single sign-on behind the institute's proxy: trust the user name the proxy authenticated."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.middleware import PersistentRemoteUserMiddleware


class ProxyRemoteUserMiddleware(PersistentRemoteUserMiddleware):
    """Reads the user name from settings.AUTH_REMOTE_USER_HEADER (a request.META key).

    "REMOTE_USER" suits servers that set the WSGI variable themselves (Apache mod_wsgi with
    mod_auth_*). Behind nginx + gunicorn the proxy sends a header, e.g. X-Remote-User, which
    Django sees as "HTTP_X_REMOTE_USER"; the proxy MUST then drop that header from clients'
    requests, or anyone could claim any name (docs/accounts.md). Persistent: the session
    survives pages the proxy does not protect.
    """

    def __init__(self, get_response):
        super().__init__(get_response)
        self.header = settings.AUTH_REMOTE_USER_HEADER
