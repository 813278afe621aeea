"""E-mails about allocation requests: which to send for an event, and sending one once.

A Notification row is written in the same transaction as the decision and the send is queued
only after commit, so an e-mail never announces a decision that rolled back, and a failing mail
server never undoes a decision. The row is the outbox (config/outbox.py): when the broker is down
at commit the row waits, the request still succeeds, and the sweep sends it once Redis is back.
"""

from __future__ import annotations

import smtplib
import socket
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from allocations.models import AllocationEvent, AllocationRequest, Notification, Status
from config.outbox import outbox_due, rows_requeue, task_send_on_commit


class EmailTemporaryError(Exception):
    """The mail server could not take the message now; sending again later may work."""


# Errors worth another try: the SMTP conversation failed or the network did.
TEMPORARY_EMAIL_ERRORS = (smtplib.SMTPException, TimeoutError, ConnectionError, socket.gaierror)

_DECISIONS = (Status.APPROVED, Status.REJECTED, Status.CHANGES_REQUESTED)


def staff_notification_recipients() -> list[str]:
    if settings.STAFF_NOTIFICATION_EMAILS:
        return list(settings.STAFF_NOTIFICATION_EMAILS)
    return list(
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(email="")
        .order_by("email")
        .values_list("email", flat=True)
    )


def notifications_enqueue_for_event(*, event: AllocationEvent) -> list[Notification]:
    """Create the event's notifications and send each after the transaction commits."""
    from allocations.tasks import notification_send as notification_send_task

    researcher = event.allocation_request.researcher
    planned: list[tuple[str, list[str]]] = []
    if event.to_status in (Status.SUBMITTED, Status.RESUBMITTED):
        planned.append((Notification.Kind.STAFF_SUBMITTED, staff_notification_recipients()))
    elif event.to_status in _DECISIONS and researcher.email:
        planned.append((Notification.Kind.RESEARCHER_DECISION, [researcher.email]))

    created = []
    for kind, to in planned:
        if not to:
            continue
        bcc = [settings.TICKET_EMAIL] if settings.TICKET_EMAIL else []
        notification = Notification.objects.create(
            event=event, kind=kind, recipients={"to": to, "bcc": bcc}
        )
        task_send_on_commit(notification_send_task, notification)
        created.append(notification)
    return created


def _subject(event: AllocationEvent, kind: str) -> str:
    title = " ".join(str(event.allocation_request).split())[:120]  # no header injection
    if kind == Notification.Kind.STAFF_SUBMITTED:
        verb = "resubmitted" if event.to_status == Status.RESUBMITTED else "submitted"
        return f"[Allocation request {verb}] {title}"
    return f"[Allocation request {event.get_to_status_display().lower()}] {title}"


def notification_message(*, notification: Notification) -> EmailMultiAlternatives:
    event = notification.event
    allocation_request = event.allocation_request
    context = {
        "event": event,
        "allocation_request": allocation_request,
        "researcher": allocation_request.researcher,
        "site_url": settings.SITE_URL,
        "detail_url": settings.SITE_URL
        + reverse("allocations:request-detail", args=[allocation_request.pk]),
        "admin_url": settings.SITE_URL
        + reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk]),
    }
    name = (
        "staff_submitted"
        if notification.kind == Notification.Kind.STAFF_SUBMITTED
        else "researcher_decision"
    )
    text = render_to_string(f"allocations/email/{name}.txt", context)
    html = render_to_string(f"allocations/email/{name}.html", context)
    message = EmailMultiAlternatives(
        subject=_subject(event, notification.kind),
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=notification.recipients.get("to", []),
        bcc=notification.recipients.get("bcc", []),
    )
    message.attach_alternative(html, "text/html")
    return message


def _sending_is_stale_after() -> timedelta:
    return timedelta(seconds=2 * settings.CELERY_TASK_TIME_LIMIT)


def notifications_waiting_for_broker(*, allocation_request: AllocationRequest) -> bool:
    """Some e-mail about this request could not be queued yet (the task queue is down)."""
    return Notification.objects.filter(
        event__allocation_request=allocation_request,
        status=Notification.State.PENDING,
        queued_at__isnull=True,
    ).exists()


def notifications_requeue_due() -> int:
    """The outbox sweep for e-mails: send again what the broker never took or lost.

    Pending rows the broker never took, sends that failed and whose retry never came, and sends
    whose worker died mid-way (a stale claim). Returns how many were queued.
    """
    from allocations.tasks import NOTIFICATION_MAX_ATTEMPTS
    from allocations.tasks import notification_send as notification_send_task

    now = timezone.now()
    due = Notification.objects.filter(
        (
            Q(status__in=[Notification.State.PENDING, Notification.State.FAILED])
            & outbox_due(now=now)
        )
        | Q(status=Notification.State.SENDING, claimed_at__lt=now - _sending_is_stale_after()),
        attempts__lt=NOTIFICATION_MAX_ATTEMPTS,
    )
    return rows_requeue(notification_send_task, due)


def notification_send(*, notification_id: int) -> None:
    """Send one notification at most once; raise EmailTemporaryError for a later retry."""
    now = timezone.now()
    # A claim older than any task may run belongs to a worker that died mid-send: take it over.
    # (The mail may then go twice; a decision that is never announced is worse.)
    stale = now - _sending_is_stale_after()
    claimed = (
        Notification.objects.filter(pk=notification_id)
        .filter(
            Q(status__in=[Notification.State.PENDING, Notification.State.FAILED])
            | Q(status=Notification.State.SENDING, claimed_at__lt=stale)
        )
        .update(status=Notification.State.SENDING, claimed_at=now)
    )
    if not claimed:  # already sent, or another worker has it
        return
    notification = Notification.objects.select_related("event__allocation_request__researcher").get(
        pk=notification_id
    )
    notification.attempts += 1
    try:
        message = notification_message(notification=notification)
        get_connection().send_messages([message])
    except TEMPORARY_EMAIL_ERRORS as exc:
        notification.status = Notification.State.FAILED
        notification.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        # The task's own retry re-sends it; the sweep steps in only if that retry is lost.
        notification.queued_at = timezone.now()
        notification.save(update_fields=["status", "attempts", "last_error", "queued_at"])
        raise EmailTemporaryError(notification.last_error) from exc
    except Exception as exc:  # a bug, not the server: record it, let the task fail loudly
        notification.status = Notification.State.FAILED
        notification.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        notification.save(update_fields=["status", "attempts", "last_error"])
        raise
    notification.status = Notification.State.SENT
    notification.sent_at = timezone.now()
    notification.last_error = ""
    notification.save(update_fields=["status", "attempts", "last_error", "sent_at"])
