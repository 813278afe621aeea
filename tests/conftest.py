from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import time_machine
from django.conf import settings as django_settings
from django.core.management import call_command

from config.celery import app as celery_app
from tests.support.worker import WorkerProcess, database_url

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# Playwright's sync API runs an event loop in the test thread for the rest of the session once a
# browser starts; the ORM calls tests make between page actions are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def pytest_addoption(parser):
    parser.addoption(
        "--clock",
        metavar="YYYY-MM-DD",
        help="run the tests as if today were this date (time-machine), to catch dates that expire",
    )


def pytest_configure(config):
    when = config.getoption("--clock")
    if when:
        # tick=True: time still moves, so timeouts and polling loops behave as they do today.
        traveller = time_machine.travel(f"{when}T10:00:00Z", tick=True)
        traveller.start()
        config.add_cleanup(traveller.stop)


def pytest_report_header(config):
    db = django_settings.DATABASES["default"]
    where = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}" if db.get("HOST") else ""
    engine = db["ENGINE"].rsplit(".", 1)[-1]
    broker = os.environ.get("CELERY_BROKER_URL") or "in-process (eager), no Redis"
    return [f"database: {engine} {where}".rstrip(), f"broker: {broker}"]


def real_services_available() -> tuple[bool, str]:
    if "postgresql" not in django_settings.DATABASES["default"]["ENGINE"]:
        return False, "PostgreSQL is not configured (DATABASE_URL)"
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        return False, "Redis is not configured (CELERY_BROKER_URL)"
    return True, ""


def pytest_collection_modifyitems(config, items):
    ok, why = real_services_available()
    if ok:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {why}: integration tests cannot be skipped in CI.")
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """Every test client is 127.0.0.1, so limits would count across tests; the tests of the
    limits (tests/reliability/test_rate_limits.py) turn them back on."""
    settings.RATELIMIT_ENABLE = False


@pytest.fixture(autouse=True)
def _no_local_page_copies():
    """Each web process keeps the pages it served last (web.page_cache.local_pages); a test
    starts without the copies an earlier test's requests left."""
    from web.page_cache import local_pages

    local_pages.clear()
    yield
    local_pages.clear()


@pytest.fixture(autouse=True)
def _celery_mode(request):
    """Unit tests run tasks in-process; integration tests send them through the real broker."""
    eager = "integration" not in request.keywords
    previous = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = eager
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def default_catalog(db):
    """The default catalog in the test database, loaded as `bin/dev` loads it."""
    call_command("load_catalog", "default", stdout=io.StringIO())


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def _celery_worker_session(django_db_setup, django_db_blocker, artifacts_dir, _fake_hub_session):
    from django.db import connection

    worker = WorkerProcess(
        database_url=database_url(connection.settings_dict),
        broker_url=os.environ["CELERY_BROKER_URL"],
        queue=django_settings.CELERY_TASK_DEFAULT_QUEUE,
        log_dir=artifacts_dir,
        extra_env=_worker_extra_env(),
    )
    worker.start()
    yield worker
    worker.stop()


def _worker_extra_env() -> dict[str, str]:
    # Anything the test session points at (a fake Hub, say) must reach the worker too.
    keys = (
        "HF_ENDPOINT",
        "HF_TOKEN",
        "HF_TIMEOUT_SECONDS",
        "CELERY_VISIBILITY_TIMEOUT",
        "EMAIL_BACKEND",
        "EMAIL_FILE_PATH",
        "STAFF_NOTIFICATION_EMAILS",
        "TICKET_EMAIL",
    )
    return {key: os.environ[key] for key in keys if key in os.environ}


@pytest.fixture
def celery_worker(_celery_worker_session, transactional_db):
    """A real worker consuming this session's own queue; the test's writes are committed."""
    worker = _celery_worker_session
    if worker.process is None or worker.process.poll() is not None:
        worker.start()
    return worker


# --- Hugging Face Hub: a fake server the real huggingface_hub client talks to --------------------

# huggingface_hub reads these at import: keep its cache out of $HOME, and pre-seed the agent
# registry it would otherwise fetch from constants.ENDPOINT once a day.
_HF_HOME = Path(os.environ.setdefault("HF_HOME", str(ARTIFACTS / "hf-home")))
_HF_HOME.mkdir(parents=True, exist_ok=True)
(_HF_HOME / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}')
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture(scope="session")
def _fake_hub_session():
    """One fake Hub for the session, started before any worker so the worker inherits it."""
    from tests.support.fake_hub import FakeHub

    hub = FakeHub().start()
    previous_env = os.environ.get("HF_ENDPOINT")
    previous_setting = django_settings.HF_ENDPOINT
    os.environ["HF_ENDPOINT"] = hub.url
    django_settings.HF_ENDPOINT = hub.url
    yield hub
    django_settings.HF_ENDPOINT = previous_setting
    if previous_env is None:
        os.environ.pop("HF_ENDPOINT", None)
    else:
        os.environ["HF_ENDPOINT"] = previous_env
    hub.stop()


@pytest.fixture
def fake_hub(_fake_hub_session, settings):
    """The fake Hub with no faults, delays or counted requests left over from other tests."""
    from django.core.cache import cache

    settings.HF_ENDPOINT = _fake_hub_session.url
    settings.HF_TOKEN = None
    _fake_hub_session.reset()
    cache.clear()
    yield _fake_hub_session
    _fake_hub_session.reset()


def missing_browser_tool(what: str):
    """Skip a browser test for a missing tool, except under CI=true, where it is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what}", pytrace=False)
    pytest.skip(what)


def chromium_path() -> str | None:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    return path if Path(path).exists() else None


@pytest.fixture(scope="session")
def browser() -> Iterator:
    """Debian's headless Chromium driven by Playwright, one per test session."""
    chromium = chromium_path()
    if chromium is None:
        missing_browser_tool("Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_browser_tool("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
