"""One settings module for every environment, driven by environment variables.

With nothing set the app runs on SQLite with Celery tasks executed in-process, so a fresh
checkout needs no other server. Production differs only by environment variables
(see .env.example) and refuses to start when half-configured.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, *, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}.")


def env_int(name: str, *, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from exc


def env_list(name: str, *, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def _required(name: str) -> str:
    raise ImproperlyConfigured(f"{name} must be set when DJANGO_DEBUG is false (see .env.example).")


# --- Core -------------------------------------------------------------------------------------

DEBUG = env_bool("DJANGO_DEBUG", default=True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or (
    "dev-only-insecure-key-never-used-in-production" if DEBUG else _required("DJANGO_SECRET_KEY")
)
ALLOWED_HOSTS = env_list(
    "DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")
# Our own 403 page for a refused form post, framable inside the embed (config/views.py).
CSRF_FAILURE_VIEW = "config.views.csrf_failure"

INSTALLED_APPS = [
    "config.apps.TriageAdminConfig",  # django.contrib.admin with config.admin.TriageAdminSite
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "catalog",
    "advisor",
    "allocations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.HeadAsGetMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Turns django-ratelimit's Ratelimited into the 429 page (RATELIMIT_VIEW).
    "django_ratelimit.middleware.RatelimitMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

# --- Database ---------------------------------------------------------------------------------
# DATABASE_URL selects PostgreSQL (postgres://user@host:5432/name); unset means a SQLite file.

DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=env_int("DJANGO_DB_CONN_MAX_AGE", default=60),
            conn_health_checks=True,
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache ------------------------------------------------------------------------------------
# Shared between web workers in production (typeahead suggestions); per-process by default.

# A Redis outage makes every cache read a miss and every write a no-op (config/cache.py), never
# an error page; short socket timeouts keep a dead Redis from stalling the request.
CACHE_URL = os.environ.get("CACHE_URL", "").strip()
if CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "config.cache.ResilientRedisCache",
            "LOCATION": CACHE_URL,
            "OPTIONS": {
                "socket_connect_timeout": float(os.environ.get("CACHE_TIMEOUT_SECONDS", "0.5")),
                "socket_timeout": float(os.environ.get("CACHE_TIMEOUT_SECONDS", "0.5")),
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Rendered advisor pages (web/page_cache.py) are keyed on everything they are rendered from,
# so an entry is never stale, only unused: the timeout bounds the memory they hold.
PAGE_CACHE_SECONDS = env_int("PAGE_CACHE_SECONDS", default=60 * 60)
# Each web process also keeps the pages it served last in its own memory, up to this many
# bytes (0: none): a reload then skips the cache round trip. Safe for the same reason.
PAGE_CACHE_LOCAL_BYTES = env_int("PAGE_CACHE_LOCAL_BYTES", default=16 * 1024 * 1024)

# With a shared cache, anonymous visitors' sessions are read from it instead of the database
# (config/sessions.py: signed-in sessions always come from the database; a copy lives at most
# SESSION_CACHE_SECONDS). A per-process cache keeps the database backend: other processes
# would hold old copies.
SESSION_CACHE_SECONDS = env_int("SESSION_CACHE_SECONDS", default=10 * 60)
if CACHE_URL:
    SESSION_ENGINE = "config.sessions"

# --- Auth -------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# Single sign-on behind the institute's proxy: the proxy authenticates and sets REMOTE_USER.
AUTH_REMOTE_USER = env_bool("DJANGO_AUTH_REMOTE_USER", default=False)
# The request.META key holding the name: REMOTE_USER (set by the web server) or, behind a proxy
# that sends a header such as X-Remote-User, HTTP_X_REMOTE_USER. See docs/accounts.md.
AUTH_REMOTE_USER_HEADER = os.environ.get("DJANGO_AUTH_REMOTE_USER_HEADER", "REMOTE_USER")
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
if AUTH_REMOTE_USER:
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
        "allocations.middleware.ProxyRemoteUserMiddleware",
    )
    AUTHENTICATION_BACKENDS.insert(0, "allocations.backends.ProxyRemoteUserBackend")

# --- Internationalisation ---------------------------------------------------------------------

LANGUAGE_CODE = "en-gb"
TIME_ZONE = os.environ.get("DJANGO_TIME_ZONE", "Europe/London")
USE_I18N = True
USE_TZ = True

# --- Static files -----------------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Security ---------------------------------------------------------------------------------
# Production defaults are strict; each can be relaxed by its variable (see .env.example).

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # container healthchecks speak plain HTTP internally
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool(
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG
)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=not DEBUG)
if env_bool("DJANGO_BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", default=not DEBUG)
# "Lax" suits a same-site intranet; a cross-site intranet that frames the advisor needs "None"
# (which browsers accept only with Secure cookies). See README, "Embedding in the intranet".
SESSION_COOKIE_SAMESITE = os.environ.get("DJANGO_SESSION_COOKIE_SAMESITE", "Lax")
CSRF_COOKIE_SAMESITE = os.environ.get("DJANGO_CSRF_COOKIE_SAMESITE", "Lax")
SESSION_COOKIE_AGE = env_int("DJANGO_SESSION_COOKIE_AGE", default=60 * 60 * 24 * 30)

# Origins (scheme://host[:port]) allowed to frame the advisor's embed pages.
EMBED_ALLOWED_ORIGINS = env_list("EMBED_ALLOWED_ORIGINS")

# Rate limits (config/ratelimits.py, django-ratelimit): requests per client per period on what
# costs the institute; an empty value turns that limit off. Counted in the default cache.
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", default=True)
RATELIMIT_ESTIMATES = os.environ.get("RATELIMIT_ESTIMATES", "60/m")
RATELIMIT_LOOKUPS = os.environ.get("RATELIMIT_LOOKUPS", "20/m")
RATELIMIT_SUGGESTIONS = os.environ.get("RATELIMIT_SUGGESTIONS", "120/m")
RATELIMIT_VIEW = "config.views.too_many_requests"
RATELIMIT_FAIL_OPEN = True
# Behind a proxy every request comes from the proxy: take the client's address from the header
# it sets (HTTP_X_REAL_IP with deploy/nginx); unset means REMOTE_ADDR.
CLIENT_IP_HEADER = os.environ.get("DJANGO_CLIENT_IP_HEADER", "").strip() or "REMOTE_ADDR"
RATELIMIT_IP_META_KEY = "config.ratelimits.client_ip"

# Reject oversized bodies with a 400 before any view reads them.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DJANGO_DATA_UPLOAD_MAX_MEMORY_SIZE", default=256 * 1024)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 200

# --- Celery -----------------------------------------------------------------------------------
# CELERY_BROKER_URL selects Redis; unset means tasks run in-process (eager) with no broker.

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "").strip() or "memory://"
CELERY_TASK_ALWAYS_EAGER = not os.environ.get("CELERY_BROKER_URL", "").strip()
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", default=120)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", default=90)
# acks_late tasks are idempotent, so a task whose worker died is safe to deliver again.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# How long Redis waits before redelivering an unacknowledged task (a worker killed mid-task).
# Longer than any task may run (the hard time limits) and than any retry countdown (capped at
# 240 s in the tasks), or a task still running or waiting would be delivered twice.
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", default=300)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT}
# Production runs the prefork pool: only it enforces the hard time limit by killing the child.
CELERY_WORKER_POOL = "prefork"
# config.tasks is not an app, so autodiscovery does not find it.
CELERY_IMPORTS = ("config.tasks",)

# The outbox (config/outbox.py): how often Celery beat sweeps it, how long a row the broker never
# took waits before the sweep sends it, and how long one the broker took may stay undone before
# it is sent again (the visibility timeout: by then Redis would have redelivered it too).
OUTBOX_SWEEP_SECONDS = env_int("OUTBOX_SWEEP_SECONDS", default=30)
OUTBOX_UNQUEUED_GRACE_SECONDS = env_int("OUTBOX_UNQUEUED_GRACE_SECONDS", default=10)
OUTBOX_REQUEUE_AFTER_SECONDS = env_int(
    "OUTBOX_REQUEUE_AFTER_SECONDS", default=CELERY_VISIBILITY_TIMEOUT
)
CELERY_BEAT_SCHEDULE = {
    "outbox-sweep": {"task": "config.tasks.outbox_sweep", "schedule": OUTBOX_SWEEP_SECONDS},
    # Expired sessions are deleted once a day (Django never does it by itself).
    "sessions-clear": {"task": "config.tasks.sessions_clear", "schedule": 24 * 60 * 60},
}

# --- Hugging Face Hub -------------------------------------------------------------------------

HF_ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
HF_TOKEN = os.environ.get("HF_TOKEN") or None
HF_TIMEOUT_SECONDS = float(os.environ.get("HF_TIMEOUT_SECONDS", "10"))
HF_LOOKUP_MAX_AGE_HOURS = env_int("HF_LOOKUP_MAX_AGE_HOURS", default=24 * 7)
# A failed lookup (not found, gated, Hub down after retries) is asked again after this long.
HF_LOOKUP_FAILED_MAX_AGE_SECONDS = env_int("HF_LOOKUP_FAILED_MAX_AGE_SECONDS", default=600)
# The lookup task's time limits. A lookup left "running" for longer than the hard limit belongs
# to a worker that died, so another delivery may take it over.
HF_LOOKUP_SOFT_TIME_LIMIT_SECONDS = env_int("HF_LOOKUP_SOFT_TIME_LIMIT_SECONDS", default=60)
HF_LOOKUP_TIME_LIMIT_SECONDS = env_int("HF_LOOKUP_TIME_LIMIT_SECONDS", default=90)
HF_LOOKUP_MAX_RETRIES = env_int("HF_LOOKUP_MAX_RETRIES", default=5)
# Search-as-you-type: how long the Hub may take, and how long an answer is reused.
HF_SEARCH_TIMEOUT_SECONDS = float(os.environ.get("HF_SEARCH_TIMEOUT_SECONDS", "2"))
HF_SEARCH_CACHE_SECONDS = env_int("HF_SEARCH_CACHE_SECONDS", default=60)

# --- Email ------------------------------------------------------------------------------------

EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", default=587)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=True)
    EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", default=20)
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
# An explicit backend wins (the integration tests point the worker at the file backend).
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "").strip() or EMAIL_BACKEND
if os.environ.get("EMAIL_FILE_PATH"):
    EMAIL_FILE_PATH = os.environ["EMAIL_FILE_PATH"]
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "allocation-triage@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
STAFF_NOTIFICATION_EMAILS = env_list("STAFF_NOTIFICATION_EMAILS")
TICKET_EMAIL = os.environ.get("TICKET_EMAIL", "")

# --- The product ------------------------------------------------------------------------------

CATALOG_PROFILE = os.environ.get("CATALOG_PROFILE", "default")
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# Trial access: "restricted to 400 GPU hours" (seed 001, Turing). A catalog system's own
# trial_gpu_hours wins; this is the default for systems that state none.
ALLOCATION_TRIAL_GPU_HOURS_DEFAULT = env_int("ALLOCATION_TRIAL_GPU_HOURS_DEFAULT", default=400)
# Sanity caps on one request; a ServiceLimit row (admin) may lower them per service.
ALLOCATION_MAX_GPU_HOURS = env_int("ALLOCATION_MAX_GPU_HOURS", default=500_000)
ALLOCATION_MAX_CPU_HOURS = env_int("ALLOCATION_MAX_CPU_HOURS", default=10_000_000)
# Pre-fills the form's "Branch" (the seed's example: "The Alan Turing Institute").
ALLOCATION_DEFAULT_BRANCH = os.environ.get("ALLOCATION_DEFAULT_BRANCH", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
    "loggers": {
        # The Hub client logs request URLs and headers at DEBUG; never let a token reach the log.
        "huggingface_hub": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
