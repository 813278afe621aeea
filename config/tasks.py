"""Periodic housekeeping run by Celery beat (CELERY_BEAT_SCHEDULE in settings)."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


def outbox_sweep() -> dict[str, int]:
    """Queue again every side effect still waiting in the outbox (config/outbox.py)."""
    from advisor.services import hf_model_lookups_requeue_due
    from allocations.notifications import notifications_requeue_due

    queued = {
        "notifications": notifications_requeue_due(),
        "lookups": hf_model_lookups_requeue_due(),
    }
    if any(queued.values()):
        logger.info("Outbox sweep queued %s", queued)
    return queued


@shared_task(name="config.tasks.outbox_sweep", ignore_result=True, expires=60)
def outbox_sweep_task() -> None:
    outbox_sweep()


@shared_task(name="config.tasks.sessions_clear", ignore_result=True)
def sessions_clear_task() -> None:
    """`manage.py clearsessions`: delete expired sessions (the database backend keeps them)."""
    from django.core.management import call_command

    call_command("clearsessions")
