"""The browser's session, read from the shared cache for visitors who are not signed in.

Every advisor page reads the visitor's session (who is signed in, which advisor session to
continue); from the database that is a query per page. Django's `cached_db` backend reads it
from the cache instead and writes both. Its weak spot is a cache write that fails while reads
still work (a timeout under load): the cache then keeps the old session. So this backend keeps
only sessions with nobody signed in, whose worst stale value is an older "continue where you
left off" link, and for at most SESSION_CACHE_SECONDS. A signed-in session is always read from
the database, so signing out (or a password change) takes effect on the next request whatever
the cache did. Used only with a cache every web process shares (settings: CACHE_URL); a
per-process cache would leave other processes holding old copies.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import SESSION_KEY as SIGNED_IN_USER
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDbStore
from django.contrib.sessions.backends.db import SessionStore as DbStore

logger = logging.getLogger(__name__)


class SessionStore(CachedDbStore):
    def load(self) -> dict:
        try:
            data = self._cache.get(self.cache_key)
        except Exception:  # noqa: BLE001 - as Django's own: an unreadable key is a miss
            data = None
        if data is not None:
            if SIGNED_IN_USER not in data:
                return data
            self._keep({SIGNED_IN_USER: True}, 0)  # never kept: drop the copy
        row = self._get_session_from_db()
        if not row:
            return {}
        data = self.decode(row.session_data)
        if SIGNED_IN_USER not in data:
            self._keep(data, self.get_expiry_age(expiry=row.expire_date))
        return data

    def save(self, must_create: bool = False) -> None:
        DbStore.save(self, must_create)  # the database first: it is the truth
        self._keep(self._session, self.get_expiry_age())

    def _keep(self, data: dict, expiry_age: int) -> None:
        """Cache an anonymous session's data, for SESSION_CACHE_SECONDS at most; a signed-in
        one is never cached, and any copy under its key is dropped (were that to fail, `load`
        still ignores a copy naming a signed-in user)."""
        try:
            if SIGNED_IN_USER in data:
                self._cache.delete(self.cache_key)
            else:
                timeout = min(expiry_age, settings.SESSION_CACHE_SECONDS)
                self._cache.set(self.cache_key, data, timeout)
        except Exception:  # noqa: BLE001 - the cache only saves work
            logger.warning("session cache write failed", exc_info=True)
