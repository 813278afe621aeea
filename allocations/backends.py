"""The account behind the proxy's user name, refusing names no account could have."""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import RemoteUserBackend

logger = logging.getLogger(__name__)


class ProxyRemoteUserBackend(RemoteUserBackend):
    """Django's RemoteUserBackend, except that a name longer than the username column or holding
    control characters (NUL: PostgreSQL refuses it) signs nobody in instead of failing with a
    database error on every page. The person then sees the ordinary sign-in page."""

    def authenticate(self, request, remote_user):
        if remote_user and not _usable(remote_user):
            logger.warning(
                "Proxy sent an unusable user name (%d characters); nobody signed in.",
                len(remote_user),
            )
            return None
        return super().authenticate(request, remote_user)


def _usable(name: str) -> bool:
    user_model = get_user_model()
    max_length = user_model._meta.get_field(user_model.USERNAME_FIELD).max_length
    return name.isprintable() and (max_length is None or len(name) <= max_length)
