"""Liveness of the parts the app needs: the database and the task broker."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from kombu import Connection


def database_status() -> dict[str, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "down"; report it, don't raise
        return {"status": "down", "engine": connection.vendor, "error": type(exc).__name__}
    return {"status": "ok", "engine": connection.vendor}


def broker_status() -> dict[str, str]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"status": "ok", "transport": "in-process (tasks run eagerly)"}
    url = settings.CELERY_BROKER_URL
    transport = url.split("://", 1)[0]
    try:
        with Connection(url, connect_timeout=2, transport_options={"max_retries": 0}) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # noqa: BLE001 - report, don't raise
        return {"status": "down", "transport": transport, "error": type(exc).__name__}
    return {"status": "ok", "transport": transport}
