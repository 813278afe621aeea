"""What the Django benches share: a database to write in and the staff account that reads.

A bench imports this after putting the repository on sys.path; `django_ready()` sets Django up
against DATABASE_URL's database when set (use a scratch one: the rows are left there), else a
throwaway SQLite file, with the test client allowed and DEBUG off so that what is timed is
what production serves.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def django_ready() -> None:
    """Set Django up for a bench and migrate its database."""
    if not os.environ.get("DATABASE_URL"):
        os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp()) / "bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()  # allows the test client's host and keeps e-mail in memory
    settings.DEBUG = False  # time what production serves (no debug cursor on every query)
    call_command("migrate", verbosity=0)


def bench_staff():
    """The superuser the benches log in as, created once per database."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    return users.filter(username="bench-staff").first() or users.create_superuser(
        "bench-staff", "staff@example.ac.uk", "bench-only"
    )
