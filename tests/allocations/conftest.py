from __future__ import annotations

import os
from pathlib import Path

# The real Celery worker (tests/conftest.py) inherits this process's environment when it
# starts, so e-mail it sends lands in files the integration tests can read. Set at import,
# before any worker exists; the test process itself keeps Django's locmem test backend.
EMAIL_DIR = Path(__file__).resolve().parents[2] / "test-artifacts" / f"emails-{os.getpid()}"
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
os.environ.setdefault("EMAIL_FILE_PATH", str(EMAIL_DIR))
