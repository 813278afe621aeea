"""Celery tasks for allocations: thin wrappers that load by id and call the service."""

from __future__ import annotations

from celery import shared_task

from allocations.notifications import EmailTemporaryError

# Retries of one e-mail; after them the row stays failed in the admin for staff to see.
NOTIFICATION_MAX_RETRIES = 10
NOTIFICATION_MAX_ATTEMPTS = NOTIFICATION_MAX_RETRIES + 1


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(EmailTemporaryError,),
    retry_backoff=30,
    # Below the broker's visibility timeout (CELERY_VISIBILITY_TIMEOUT, 300 s by default):
    # Redis would otherwise redeliver a task still waiting for its countdown.
    retry_backoff_max=240,
    retry_jitter=True,
    max_retries=NOTIFICATION_MAX_RETRIES,
)
def notification_send(self, notification_id: int) -> None:
    from allocations.notifications import notification_send as send

    send(notification_id=notification_id)
