"""Celery tasks for allocations: thin wrappers that load by id and call the service."""

from __future__ import annotations

from celery import shared_task

from allocations.notifications import EmailTemporaryError


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(EmailTemporaryError,),
    retry_backoff=30,
    retry_backoff_max=30 * 60,
    retry_jitter=True,
    max_retries=10,
)
def notification_send(self, notification_id: int) -> None:
    from allocations.notifications import notification_send as send

    send(notification_id=notification_id)
