"""The broker down at commit: nothing fails, nothing is lost, every e-mail goes exactly once.

These run on the test database with the real Celery app pointed at a port where nothing
listens (so sending a task really fails, as with Redis down); "the broker is back" is the app
returning to its usual in-process mode, where the sweep's tasks run at once.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone
from pytest_django.asserts import assertContains

from advisor.models import HfModelLookup
from allocations.models import AllocationRequest, Notification, Status
from config.tasks import outbox_sweep
from tests.allocations.factories import (
    as_post,
    complete_fields,
    make_request,
    make_session,
    make_user,
)
from tests.support.redis_server import celery_broker, free_port

pytestmark = pytest.mark.django_db

State = Notification.State


@pytest.fixture
def broker_down():
    with celery_broker(f"redis://127.0.0.1:{free_port()}/0"):
        yield


def _age(queryset, **seconds_by_field) -> None:
    """Move timestamps back, as if the rows had waited that long."""
    now = timezone.now()
    queryset.update(**{field: now - timedelta(seconds=s) for field, s in seconds_by_field.items()})


def test_submission_with_the_broker_down_is_saved_and_says_the_mail_will_follow(
    client, settings, broker_down
):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp@example.ac.uk"]
    researcher = make_user()
    client.force_login(researcher)
    session = make_session(user=researcher)
    url = reverse("allocations:request-create", args=[session.pk])

    response = client.post(url, as_post(complete_fields(), action="submit"), follow=True)

    assert response.status_code == 200
    allocation_request = AllocationRequest.objects.get()
    assert allocation_request.status == Status.SUBMITTED
    assertContains(response, "Request submitted: staff will review it.")
    assertContains(response, "will be sent when the mail service is back")
    notification = Notification.objects.get()
    assert (notification.status, notification.queued_at) == (State.PENDING, None)
    assert mail.outbox == []
    # Retrying does not make a second request: the researcher already has the one they need.
    response = client.post(url, as_post(complete_fields(), action="submit"), follow=True)
    assert AllocationRequest.objects.count() == 1


def test_the_sweep_sends_what_waited_exactly_once_when_the_broker_is_back(settings):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp@example.ac.uk"]
    allocation_request = make_request(status=Status.DRAFT)
    from allocations.services import allocation_request_submit

    with celery_broker(f"redis://127.0.0.1:{free_port()}/0"):
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
        # The sweep itself runs while the broker is still down: it sends nothing, loses nothing.
        _age(Notification.objects.all(), created_at=60)
        assert outbox_sweep() == {"notifications": 0, "lookups": 0}
    assert Notification.objects.get().status == State.PENDING

    assert outbox_sweep()["notifications"] == 1
    assert outbox_sweep()["notifications"] == 0
    notification = Notification.objects.get()
    assert notification.status == State.SENT
    assert notification.attempts == 1
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["rcp@example.ac.uk"]


def test_a_fresh_unqueued_row_waits_for_its_own_commit_before_the_sweep_sends_it(settings):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp@example.ac.uk"]
    allocation_request = make_request(status=Status.DRAFT)
    from allocations.services import allocation_request_submit

    with celery_broker(f"redis://127.0.0.1:{free_port()}/0"):
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    assert outbox_sweep()["notifications"] == 0  # created a moment ago: still within the grace
    _age(Notification.objects.all(), created_at=settings.OUTBOX_UNQUEUED_GRACE_SECONDS + 1)
    assert outbox_sweep()["notifications"] == 1
    assert len(mail.outbox) == 1


def test_a_queued_row_the_broker_lost_is_sent_again_after_the_visibility_timeout(settings):
    allocation_request = make_request(status=Status.SUBMITTED, researcher=make_user())
    event = allocation_request.events.create(
        from_status=Status.SUBMITTED, to_status=Status.APPROVED
    )
    notification = Notification.objects.create(
        event=event,
        kind=Notification.Kind.RESEARCHER_DECISION,
        recipients={"to": ["r@example.ac.uk"], "bcc": []},
        queued_at=timezone.now(),
    )
    assert outbox_sweep()["notifications"] == 0  # the worker may just be busy
    _age(Notification.objects.all(), queued_at=settings.OUTBOX_REQUEUE_AFTER_SECONDS + 1)
    assert outbox_sweep()["notifications"] == 1
    notification.refresh_from_db()
    assert notification.status == State.SENT
    assert len(mail.outbox) == 1


def test_a_send_whose_worker_died_is_taken_over_and_one_already_sent_never_again(settings):
    allocation_request = make_request(status=Status.SUBMITTED, researcher=make_user())
    dead = Notification.objects.create(
        event=allocation_request.events.create(to_status=Status.APPROVED),
        kind=Notification.Kind.RESEARCHER_DECISION,
        recipients={"to": ["r@example.ac.uk"], "bcc": []},
        status=State.SENDING,
        attempts=1,
        queued_at=timezone.now(),
    )
    sent = Notification.objects.create(
        event=allocation_request.events.create(to_status=Status.REJECTED),
        kind=Notification.Kind.RESEARCHER_DECISION,
        recipients={"to": ["r@example.ac.uk"], "bcc": []},
        status=State.SENT,
        attempts=1,
    )
    _age(
        Notification.objects.all(),
        claimed_at=2 * settings.CELERY_TASK_TIME_LIMIT + 1,
        queued_at=settings.OUTBOX_REQUEUE_AFTER_SECONDS + 1,
        created_at=3600,
    )
    assert outbox_sweep()["notifications"] == 1
    dead.refresh_from_db()
    sent.refresh_from_db()
    assert (dead.status, dead.attempts) == (State.SENT, 2)
    assert (sent.status, sent.attempts) == (State.SENT, 1)
    assert len(mail.outbox) == 1


def test_staff_decision_with_the_broker_down_is_saved_and_staff_are_told(client, broker_down):
    client.force_login(make_user(staff=True, is_superuser=True))
    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    url = reverse(
        "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
    )

    response = client.post(
        url, {"granted_gpu_hours": "288", "message": "Go ahead.", "note": ""}, follow=True
    )

    assert response.status_code == 200
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.APPROVED
    assertContains(response, "The e-mail to the researcher will be sent when the mail service")
    assert Notification.objects.get().status == State.PENDING


def test_a_lookup_with_the_broker_down_waits_and_says_so_then_the_sweep_runs_it(
    client, fake_hub, settings
):
    with celery_broker(f"redis://127.0.0.1:{free_port()}/0"):
        response = client.post(
            reverse("advisor:lookup-start"), {"repo_id": "mistralai/Mistral-7B-v0.1"}, follow=True
        )
        assert response.status_code == 200
        assertContains(response, "will start as soon as it is back")
    lookup = HfModelLookup.objects.get()
    assert (lookup.status, lookup.queued_at) == (HfModelLookup.Status.PENDING, None)
    assert fake_hub.model_info_requests("mistralai/Mistral-7B-v0.1") == 0

    _age(HfModelLookup.objects.all(), created_at=settings.OUTBOX_UNQUEUED_GRACE_SECONDS + 1)
    assert outbox_sweep()["lookups"] == 1

    lookup.refresh_from_db()
    assert lookup.status == HfModelLookup.Status.DONE
    assert fake_hub.model_info_requests("mistralai/Mistral-7B-v0.1") == 1
    response = client.get(lookup.get_absolute_url())
    assert "will start as soon as it is back" not in response.content.decode()


def test_a_lookup_left_running_by_a_dead_worker_is_taken_over_by_the_sweep(fake_hub, settings):
    lookup = HfModelLookup.objects.create(
        repo_id="mistralai/Mistral-7B-v0.1",
        requested_id="mistralai/Mistral-7B-v0.1",
        status=HfModelLookup.Status.RUNNING,
        attempts=1,
        queued_at=timezone.now(),
    )
    _age(HfModelLookup.objects.all(), started_at=settings.HF_LOOKUP_TIME_LIMIT_SECONDS - 5)
    assert outbox_sweep()["lookups"] == 0  # within its time limit: it may still be working
    _age(HfModelLookup.objects.all(), started_at=settings.HF_LOOKUP_TIME_LIMIT_SECONDS + 2)
    assert outbox_sweep()["lookups"] == 1
    lookup.refresh_from_db()
    assert (lookup.status, lookup.attempts) == (HfModelLookup.Status.DONE, 2)
