"""Redis stopped and restarted, a worker killed mid-lookup: nothing is lost.

Everything here is real: a Redis server this test starts on its own port (and stops, and starts
again), a Celery worker and Celery beat started through bin/start-worker and bin/start-beat,
PostgreSQL, the real huggingface_hub client against the fake Hub, e-mail written to files.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

from advisor.models import HfModelLookup
from allocations.models import AllocationRequest, Notification, Status
from tests.allocations.factories import (
    as_post,
    complete_fields,
    make_request,
    make_session,
    make_user,
)
from tests.support.beat import BeatProcess
from tests.support.redis_server import RedisServer, celery_broker
from tests.support.worker import WorkerProcess, database_url

pytestmark = pytest.mark.integration


def wait_for(predicate, *, timeout: float, what: str, logs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    tails = "\n".join(process.log()[-3000:] for process in logs)
    raise AssertionError(f"timed out waiting for {what}\n{tails}")


class Stack:
    """Our own Redis, a worker and beat on it, and this process sending tasks to it."""

    def __init__(self, tmp_path: Path, fake_hub, **env):
        self.redis = RedisServer(tmp_path / "redis")
        self.mail_dir = tmp_path / "mail"
        self.env = {
            "HF_ENDPOINT": fake_hub.url,
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(self.mail_dir),
            "OUTBOX_SWEEP_SECONDS": "1",
            "OUTBOX_UNQUEUED_GRACE_SECONDS": "1",
            **env,
        }
        self.worker: WorkerProcess | None = None
        self.beat: BeatProcess | None = None
        self.tmp_path = tmp_path

    def start(self) -> Stack:
        self.redis.start()
        self.env["CELERY_BROKER_URL"] = self.redis.url()
        self.worker = WorkerProcess(
            database_url=database_url(connection.settings_dict),
            broker_url=self.redis.url(),
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            log_dir=self.tmp_path,
            extra_env=self.env,
        )
        self.worker.start()
        self.beat = BeatProcess(
            env={**self.env, "CELERY_TASK_DEFAULT_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE},
            directory=self.tmp_path / "beat",
        ).start()
        return self

    def stop(self) -> None:
        for process in (self.beat, self.worker):
            if process is not None:
                process.stop()
        self.redis.stop()

    def mails(self) -> list[str]:
        return [p.read_text() for p in sorted(self.mail_dir.glob("*.log"))]

    @property
    def logs(self):
        return [p for p in (self.worker, self.beat) if p is not None]


@pytest.fixture
def stack(tmp_path, fake_hub, transactional_db):
    stack = Stack(tmp_path, fake_hub).start()
    try:
        with celery_broker(stack.redis.url()):
            yield stack
    finally:
        stack.stop()


def test_redis_down_at_commit_loses_nothing_and_sends_each_email_once(stack, client, settings):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp-queue@example.ac.uk"]
    researcher = make_user(email="ada@example.ac.uk")
    session = make_session(user=researcher)
    waiting = make_request(status=Status.SUBMITTED, researcher=researcher, project_title="Waiting")
    staff = make_user(staff=True, is_superuser=True)

    stack.redis.stop()

    client.force_login(researcher)
    submitted = client.post(
        reverse("allocations:request-create", args=[session.pk]),
        as_post(complete_fields(project_title="Submitted during the outage"), action="submit"),
        follow=True,
    )
    assert submitted.status_code == 200
    assert "will be sent when the mail service is back" in submitted.content.decode(), [
        (n.status, n.queued_at, n.attempts, n.last_error) for n in Notification.objects.all()
    ]
    client.force_login(staff)
    decided = client.post(
        reverse("admin:allocations_allocationrequest_decide", args=[waiting.pk, "approve"]),
        {"granted_gpu_hours": "100", "message": "Approved during the outage.", "note": ""},
        follow=True,
    )
    assert decided.status_code == 200
    looked_up = client.post(
        reverse("advisor:lookup-start"), {"repo_id": "mistralai/Mistral-7B-v0.1"}, follow=True
    )
    assert looked_up.status_code == 200
    assert "will start as soon as it is back" in looked_up.content.decode()

    # The request, the decision and the lookup are saved; the side effects wait in the outbox.
    new_request = AllocationRequest.objects.get(project_title="Submitted during the outage")
    assert new_request.status == Status.SUBMITTED
    waiting.refresh_from_db()
    assert (waiting.status, waiting.granted_gpu_hours) == (Status.APPROVED, 100)
    assert set(Notification.objects.values_list("status", "queued_at")) == {("pending", None)}
    assert Notification.objects.count() == 2
    lookup = HfModelLookup.objects.get()
    assert lookup.status == HfModelLookup.Status.PENDING

    stack.redis.start()  # same port: the worker and beat reconnect by themselves

    wait_for(
        lambda: (
            set(Notification.objects.values_list("status", flat=True)) == {"sent"}
            and HfModelLookup.objects.filter(status="done").exists()
        ),
        timeout=90,
        what="the outbox to drain after Redis came back",
        logs=stack.logs,
    )
    time.sleep(3)  # a few more sweeps: nothing is sent twice
    mails = stack.mails()
    assert sum("Submitted during the outage" in text for text in mails) == 1
    assert sum("Approved during the outage." in text for text in mails) == 1
    assert len(mails) == 2
    assert list(Notification.objects.values_list("attempts", flat=True)) == [1, 1]
    lookup.refresh_from_db()
    assert lookup.metadata["safetensors_parameters"] == {"BF16": 7241732096}


def test_a_lookup_whose_worker_is_killed_is_taken_over_within_its_time_limit(
    tmp_path, fake_hub, transactional_db
):
    # The broker's visibility timeout stays at its default (minutes): the takeover comes from
    # the expiring claim and the sweep, not from Redis redelivering the task.
    stack = Stack(
        tmp_path,
        fake_hub,
        HF_LOOKUP_TIME_LIMIT_SECONDS="5",
        HF_LOOKUP_SOFT_TIME_LIMIT_SECONDS="4",
    ).start()
    try:
        with celery_broker(stack.redis.url()):
            fake_hub.delay("acme/slow-model", 3)  # the worker is mid-request when it dies
            from advisor.services import hf_model_lookup_request

            lookup = hf_model_lookup_request(repo_id="acme/slow-model")
            wait_for(
                lambda: fake_hub.model_info_requests("acme/slow-model") == 1,
                timeout=30,
                what="the worker to ask the Hub",
                logs=stack.logs,
            )
            killed_at = time.monotonic()
            stack.worker.kill()
            lookup.refresh_from_db()
            assert (lookup.status, lookup.attempts) == (HfModelLookup.Status.RUNNING, 1)
            fake_hub.delay("acme/slow-model", 0)
            stack.worker.start()

            wait_for(
                lambda: HfModelLookup.objects.filter(status="done").exists(),
                timeout=60,
                what="the sweep to hand the lookup to the new worker",
                logs=stack.logs,
            )
            taken_over_in = time.monotonic() - killed_at
    finally:
        stack.stop()

    lookup.refresh_from_db()
    assert lookup.attempts == 2
    assert lookup.metadata["params_total"] == 494032768
    assert fake_hub.model_info_requests("acme/slow-model") == 2
    assert taken_over_in < 60 < settings.CELERY_VISIBILITY_TIMEOUT
