"""The outbox: side effects the broker carries survive the broker being down.

Every side effect a Celery task performs (an e-mail, a Hub lookup) first exists as a row written
in the same transaction as the change that caused it (a Notification, an HfModelLookup). Only
after commit is the task sent, and sending is allowed to fail: the row stays pending with
`queued_at` unset, the web request answers normally and says what will happen, and the periodic
sweep (Celery beat, see CELERY_BEAT_SCHEDULE) sends it again once the broker is back. Tasks
claim their row with a conditional update, so a task sent twice still acts once.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Model, Q
from django.utils import timezone
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)

# What sending a task raises when the broker cannot be reached: Celery wraps the transport's
# connection errors (redis-py's ConnectionError, socket errors) in kombu's OperationalError.
BROKER_ERRORS = (OperationalError, ConnectionError, TimeoutError)

# Publishing gives up quickly when the broker is down: the row is the durable copy, and a web
# request must not hang on a dead Redis. (Celery's default policy retries 3 times over ~0.6 s.)
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}


def task_send(task, *args) -> bool:
    """Send `task(*args)` now; False (logged, not raised) when the broker cannot take it."""
    if task.app.conf.task_always_eager:
        task.apply_async(args=args)  # in-process: runs now, and its own errors propagate
        return True
    try:
        task.apply_async(args=args, retry=True, retry_policy=PUBLISH_RETRY_POLICY)
    except BROKER_ERRORS as exc:
        logger.warning(
            "Broker unavailable; %s%r stays in the outbox for the sweep: %s", task.name, args, exc
        )
        return False
    return True


def task_send_on_commit(task, row: Model) -> None:
    """After commit, send `task(row.pk)` and stamp the row's `queued_at` if the broker took it."""
    model, pk = type(row), row.pk

    def send() -> None:
        if task_send(task, pk):
            queued_at = timezone.now()
            model.objects.filter(pk=pk).update(queued_at=queued_at)
            row.queued_at = queued_at  # outside a transaction this runs at once: keep it true

    transaction.on_commit(send)


def outbox_due(*, now=None) -> Q:
    """Rows to send again: never taken by the broker, or taken long ago and still not done.

    A row the broker never took is sent after a short grace (its own on_commit may still be
    running); one it took is sent again only after the visibility timeout, when Redis itself
    would have redelivered a task whose worker died, so retries with a countdown are not rushed.
    """
    now = now or timezone.now()
    unqueued = now - timedelta(seconds=settings.OUTBOX_UNQUEUED_GRACE_SECONDS)
    lost = now - timedelta(seconds=settings.OUTBOX_REQUEUE_AFTER_SECONDS)
    return Q(queued_at__isnull=True, created_at__lt=unqueued) | Q(queued_at__lt=lost)


def rows_requeue(task, queryset, *, limit: int = 500) -> int:
    """Send `task(pk)` for each row; stamp those the broker took. Stops at the first refusal."""
    sent = 0
    for pk in queryset.order_by("pk").values_list("pk", flat=True)[:limit]:
        if not task_send(task, pk):
            break  # the broker is down: the next sweep tries again
        queryset.model.objects.filter(pk=pk).update(queued_at=timezone.now())
        sent += 1
    return sent
