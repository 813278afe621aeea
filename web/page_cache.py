"""Rendered pages kept in the configured cache (Redis in production, local memory in dev),
keyed on exactly what they were rendered from, with the visitor's CSRF token put back on
every request. Each web process also keeps the entries it used last (`local_pages`), which a
content-addressed key makes as safe as the shared copy.

A view caches a page only under a key naming everything its HTML depends on (`page_key`): the
content's inputs and the visitor's own bits the page shows (who is signed in, the address the
sign-in link returns to). Pages with messages waiting are never kept, since showing them uses
them up. The CSRF token never enters the cache: pages are rendered with a placeholder in its
place, and each response gets the requesting visitor's own token (`with_csrf_token`). The
cache only saves work: when it is down or evicts an entry, the page comes from this process's
copy or is rendered afresh.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.http import HttpRequest
from django.middleware.csrf import get_token

logger = logging.getLogger(__name__)

# Rendered as the CSRF token (`{% csrf_token %}` and `{{ csrf_token }}`) in a page meant for the
# cache; replaced by the visitor's token in every response built from it.
CSRF_PLACEHOLDER = "csrf-token-placeholder-for-cached-pages"
_CSRF_PLACEHOLDER_BYTES = CSRF_PLACEHOLDER.encode()
_KEY_PREFIX = "page:v1:"


# The project's own code and templates, and the static files' manifest (their hashed names):
# a page kept by one release is never shown by another (Redis outlives a deploy). Dependencies
# and what only tests or tools read are left out.
_CODE_SUFFIXES = (".py", ".html", ".yaml", ".json")
_NOT_CODE = {
    ".venv",
    ".git",
    ".cache",
    "tests",
    "bench",
    "docs",
    "scripts",
    "node_modules",
    "__pycache__",
    "test-artifacts",
    "staticfiles",  # collected copies: only its manifest counts (below)
}


@functools.cache
def code_version() -> str:
    """A digest of the project's code and templates, read once per process."""
    digest = hashlib.sha256(django.get_version().encode())
    root = Path(settings.BASE_DIR)
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if d not in _NOT_CODE)
        for name in sorted(files):
            if name.endswith(_CODE_SUFFIXES):
                path = Path(directory) / name
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    manifest = Path(settings.STATIC_ROOT or root / "staticfiles") / "staticfiles.json"
    if manifest.is_file():
        digest.update(manifest.read_bytes())
    return digest.hexdigest()


def page_key(request: HttpRequest, *parts: Hashable) -> str | None:
    """The cache key of a page rendered from `parts` for this visitor by this release, or None
    when the page must not be kept (messages are waiting to be shown)."""
    if len(get_messages(request)):
        return None
    user = request.user
    visitor = (user.pk, user.get_username()) if user.is_authenticated else None
    kept = (code_version(), visitor, request.get_full_path(), parts)
    return _KEY_PREFIX + hashlib.sha256(repr(kept).encode()).hexdigest()


class _LocalPages:
    """The entries this process read or wrote last, up to PAGE_CACHE_LOCAL_BYTES of page
    bytes, each until PAGE_CACHE_SECONDS after it was kept. A key names everything its page is
    rendered from, so the entry under a key never changes and a local copy cannot be stale: a
    reload or a back button is answered without the shared cache's round trip (about a tenth
    of a millisecond of the worker's and Redis's CPU). Entries are the views' (stamp, bytes)
    tuples, never changed after they are kept."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[float, int, Any]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            expires, _size, entry = found
            if expires < time.monotonic():
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: Any) -> None:
        limit = settings.PAGE_CACHE_LOCAL_BYTES
        size = _entry_bytes(entry)
        if size > limit:
            return
        with self._lock:
            self._drop(key)
            self._entries[key] = (time.monotonic() + settings.PAGE_CACHE_SECONDS, size, entry)
            self._bytes += size
            while self._bytes > limit:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: str) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._bytes -= found[1]


def _entry_bytes(entry: Any) -> int:
    """What an entry holds: its page's bytes (kept alone or as a (stamp, bytes) tuple), else a
    nominal kB."""
    body = entry[-1] if isinstance(entry, tuple) and entry else entry
    return len(body) + 100 if isinstance(body, bytes) else 1024


local_pages = _LocalPages()


def cache_read(key: str) -> Any:
    """The cached entry, or None (not cached, or the cache is unreachable): this process's
    copy where it has one (`_LocalPages`), else the shared cache's."""
    entry = local_pages.get(key)
    if entry is not None:
        return entry
    try:
        entry = cache.get(key)
    except Exception:  # noqa: BLE001 - any cache failure is a miss, never an error page
        logger.warning("page cache read failed; rendering afresh", exc_info=True)
        return None
    if entry is not None:
        local_pages.put(key, entry)
    return entry


def cache_write(key: str, entry: Any) -> None:
    local_pages.put(key, entry)
    try:
        cache.set(key, entry, timeout=settings.PAGE_CACHE_SECONDS)
    except Exception:  # noqa: BLE001 - losing the cache costs speed only
        logger.warning("page cache write failed", exc_info=True)


def with_csrf_token(request: HttpRequest, body: bytes) -> bytes:
    """A page rendered with the placeholder, with this visitor's CSRF token in its place (and
    the CSRF cookie set on the response, as `{% csrf_token %}` would). Pages are kept as the
    response's bytes: a hit then neither decodes nor encodes tens of kB of HTML."""
    if _CSRF_PLACEHOLDER_BYTES not in body:
        return body
    return body.replace(_CSRF_PLACEHOLDER_BYTES, get_token(request).encode())
