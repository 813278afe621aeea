"""Real headless Chromium (Debian's package) driven by Playwright, against Django's live server.

One browser per test session; each test gets fresh contexts. Without chromium the tests skip
with the reason, except under CI=true, where a missing browser is an error.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import missing_browser_tool as _missing

ROOT = Path(__file__).resolve().parents[2]


def _axe_path() -> str | None:
    path = os.environ.get("AXE_CORE_PATH") or str(
        ROOT / ".cache/npm/node_modules/axe-core/axe.min.js"
    )
    return path if Path(path).exists() else None


@pytest.fixture(scope="session")
def axe_core_path() -> str:
    path = _axe_path()
    if path is None:
        _missing("axe-core is not installed (npm install --prefix .cache/npm axe-core@4)")
    return path


@pytest.fixture
def default_catalog(transactional_db):
    from django.core.management import call_command

    call_command("load_catalog", "default", verbosity=0)


class HostPage:
    """A tiny intranet page on its own localhost port that pastes in the embed snippet."""

    def __init__(self, directory: Path):
        handler = partial(_QuietHandler, directory=str(directory))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = f"http://localhost:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        pass


@pytest.fixture
def intranet(tmp_path, live_server) -> Iterator:
    """Two host pages: one whose origin the advisor allows, one it does not."""
    page = (
        "<!doctype html><html lang='en'><head><title>Intranet</title></head><body>"
        "<h1>Research computing</h1>"
        f"<script src='{live_server.url}/static/advisor/embed.js' data-allocation-triage async>"
        "</script></body></html>"
    )
    allowed_dir, denied_dir = tmp_path / "allowed", tmp_path / "denied"
    for folder in (allowed_dir, denied_dir):
        folder.mkdir()
        (folder / "index.html").write_text(page)
    allowed, denied = HostPage(allowed_dir), HostPage(denied_dir)
    yield allowed, denied
    allowed.stop()
    denied.stop()
