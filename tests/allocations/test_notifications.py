"""E-mails: templates, escaping, the ticket copy, retries that never lose a decision."""

from __future__ import annotations

import pytest
from django.core import mail

from allocations.models import Notification, Status
from allocations.notifications import EmailTemporaryError, notification_send
from allocations.services import allocation_request_approve, allocation_request_submit
from allocations.tasks import notification_send as notification_send_task
from tests.allocations.email_backends import FlakySMTPBackend
from tests.allocations.factories import make_request, make_user

pytestmark = pytest.mark.django_db

EVIL_TITLE = '<b onmouseover="x()">Big & bold</b>'


@pytest.fixture
def staff():
    return make_user(staff=True, email="staff@example.ac.uk")


def _approve(allocation_request, staff, capture, **kwargs):
    with capture(execute=True):
        return allocation_request_approve(
            allocation_request=allocation_request, reviewer=staff, **kwargs
        )


def test_staff_email_on_submission_from_templates(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(project_title=EVIL_TITLE)
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    (message,) = mail.outbox
    assert message.to == ["staff@example.ac.uk"]  # staff users when no list is configured
    assert message.subject == f"[Allocation request submitted] {EVIL_TITLE}"
    assert f"Project:      {EVIL_TITLE} (ABC-DEF-001)" in message.body
    assert f"/admin/allocations/allocationrequest/{allocation_request.pk}/change/" in message.body
    html, mimetype = message.alternatives[0]
    assert mimetype == "text/html"
    assert "&lt;b onmouseover=&quot;x()&quot;&gt;Big &amp; bold&lt;/b&gt;" in html
    assert "<b onmouseover" not in html


def test_subject_cannot_carry_extra_headers(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(project_title="Title\r\nBcc: victim@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    (message,) = mail.outbox
    assert message.subject == "[Allocation request submitted] Title Bcc: victim@example.com"
    assert message.bcc == []


def test_decision_message_is_escaped_in_html(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(status=Status.SUBMITTED)
    _approve(
        allocation_request,
        staff,
        django_capture_on_commit_callbacks,
        message="<script>steal()</script>",
    )
    (message,) = mail.outbox
    assert message.to == [allocation_request.researcher.email]
    assert "<script>steal()</script>" in message.body  # plain text shows what was typed
    html = message.alternatives[0][0]
    assert "&lt;script&gt;steal()&lt;/script&gt;" in html
    assert "<script>" not in html


def test_ticket_system_gets_a_copy(staff, django_capture_on_commit_callbacks, settings):
    settings.TICKET_EMAIL = "tickets@example.ac.uk"
    allocation_request = make_request(status=Status.SUBMITTED)
    _approve(allocation_request, staff, django_capture_on_commit_callbacks)
    (message,) = mail.outbox
    assert message.bcc == ["tickets@example.ac.uk"]
    assert "tickets@example.ac.uk" in message.recipients()


def test_no_ticket_copy_when_unset(staff, django_capture_on_commit_callbacks, settings):
    settings.TICKET_EMAIL = ""
    allocation_request = make_request(status=Status.SUBMITTED)
    _approve(allocation_request, staff, django_capture_on_commit_callbacks)
    assert mail.outbox[0].bcc == []


def test_failed_send_is_retried_and_the_decision_kept(
    staff, django_capture_on_commit_callbacks, settings
):
    settings.EMAIL_BACKEND = "tests.allocations.email_backends.FlakySMTPBackend"
    FlakySMTPBackend.failures_left = 2
    allocation_request = make_request(status=Status.SUBMITTED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    assert len(callbacks) == 1
    notification = Notification.objects.get()
    # What the worker runs: the task with its retry policy. apply() runs each retry at once
    # (no countdown) when errors are not propagated, as a worker would record them.
    # (tests/conftest.py's autouse _celery_mode fixture restores the setting afterwards)
    notification_send_task.app.conf.task_eager_propagates = False
    result = notification_send_task.apply(args=[notification.pk])
    assert result.successful()
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.APPROVED
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == (Notification.State.SENT, 3)
    assert len(mail.outbox) == 1


def test_send_that_keeps_failing_is_recorded_and_decision_kept(staff, settings):
    settings.EMAIL_BACKEND = "tests.allocations.email_backends.FlakySMTPBackend"
    FlakySMTPBackend.failures_left = 1
    allocation_request = make_request(status=Status.SUBMITTED)
    allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    notification = Notification.objects.get()
    with pytest.raises(EmailTemporaryError, match="Connection unexpectedly closed"):
        notification_send(notification_id=notification.pk)
    notification.refresh_from_db()
    assert notification.status == Notification.State.FAILED
    assert notification.last_error == "SMTPServerDisconnected: Connection unexpectedly closed"
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.APPROVED


def test_task_retries_only_temporary_errors():
    assert notification_send_task.autoretry_for == (EmailTemporaryError,)
    assert notification_send_task.max_retries == 10
    assert notification_send_task.acks_late is True


def test_sent_notification_is_not_sent_again(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(status=Status.SUBMITTED)
    _approve(allocation_request, staff, django_capture_on_commit_callbacks)
    notification = Notification.objects.get()
    notification_send(notification_id=notification.pk)  # a redelivered task
    assert len(mail.outbox) == 1
    notification.refresh_from_db()
    assert notification.attempts == 1


def test_withdrawal_sends_nothing(django_capture_on_commit_callbacks):
    from allocations.services import allocation_request_withdraw

    allocation_request = make_request(status=Status.DRAFT)
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_withdraw(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    assert mail.outbox == []
    assert not Notification.objects.exists()


@pytest.mark.parametrize(("claimed_minutes_ago", "sent"), [(60, True), (1, False)])
def test_claim_of_a_dead_worker_is_taken_over(staff, claimed_minutes_ago, sent):
    from datetime import timedelta

    from django.utils import timezone

    allocation_request = make_request(status=Status.SUBMITTED)
    allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    notification = Notification.objects.get()
    Notification.objects.filter(pk=notification.pk).update(
        status=Notification.State.SENDING,
        claimed_at=timezone.now() - timedelta(minutes=claimed_minutes_ago),
    )
    notification_send(notification_id=notification.pk)
    assert len(mail.outbox) == (1 if sent else 0)
