"""Real PostgreSQL row locks and a real Celery worker on real Redis."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, transaction

from allocations.models import Notification, Status
from allocations.services import (
    TransitionError,
    allocation_request_approve,
    allocation_request_submit,
)
from tests.allocations.factories import make_request, make_user

pytestmark = pytest.mark.integration


@pytest.mark.django_db(transaction=True)
def test_two_staff_approving_at_once_produce_one_approval():
    allocation_request = make_request(status=Status.SUBMITTED, researcher=make_user(email=""))
    first_staff, second_staff = make_user(staff=True), make_user(staff=True)
    first_holds_lock = threading.Event()
    outcomes: dict[str, object] = {}

    def first():
        try:
            with transaction.atomic():
                allocation_request_approve(
                    allocation_request=allocation_request,
                    reviewer=first_staff,
                    granted_gpu_hours=100,
                )
                first_holds_lock.set()
                time.sleep(1.0)  # the second reviewer clicks while this one is still saving
            outcomes["first"] = "approved"
        finally:
            first_holds_lock.set()
            connection.close()

    def second():
        first_holds_lock.wait(10)
        try:
            allocation_request_approve(
                allocation_request=allocation_request,
                reviewer=second_staff,
                granted_gpu_hours=999,
            )
            outcomes["second"] = "approved"
        except TransitionError as exc:
            outcomes["second"] = exc.messages[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert outcomes == {
        "first": "approved",
        "second": "Cannot approve a request that is approved.",
    }
    allocation_request.refresh_from_db()
    assert allocation_request.granted_gpu_hours == 100
    assert list(allocation_request.events.values_list("to_status", flat=True)) == ["approved"]


def test_submission_emails_staff_through_the_real_worker(celery_worker, settings):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp-queue@example.ac.uk"]
    email_dir = Path(os.environ["EMAIL_FILE_PATH"])
    before = set(email_dir.glob("*.log")) if email_dir.exists() else set()
    allocation_request = make_request(status=Status.DRAFT, project_title="Worker-delivered")
    allocation_request_submit(
        allocation_request=allocation_request, researcher=allocation_request.researcher
    )
    notification = Notification.objects.get(event__allocation_request=allocation_request)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        notification.refresh_from_db()
        if notification.status == Notification.State.SENT:
            break
        time.sleep(0.2)
    assert notification.status == Notification.State.SENT, celery_worker.log()[-3000:]
    written = [p.read_text() for p in set(email_dir.glob("*.log")) - before]
    assert any(
        "Subject: [Allocation request submitted] Worker-delivered" in text
        and "To: rcp-queue@example.ac.uk" in text
        for text in written
    )
