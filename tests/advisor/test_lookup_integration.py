"""A real Celery worker on Redis looks models up on the fake Hub and stores them in PostgreSQL."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection

from advisor.models import HfModelLookup
from advisor.services import hf_model_lookup_request
from tests.support.worker import WorkerProcess, database_url

pytestmark = pytest.mark.integration
Status = HfModelLookup.Status


def wait_for(predicate, *, timeout: float, what: str, worker=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    log = worker.log()[-4000:] if worker is not None else ""
    raise AssertionError(f"timed out waiting for {what}\n{log}")


def settled(lookup: HfModelLookup) -> bool:
    lookup.refresh_from_db()
    return lookup.status in (Status.DONE, Status.FAILED)


def test_worker_looks_the_model_up_and_stores_it(fake_hub, celery_worker):
    lookup = hf_model_lookup_request(repo_id="mistralai/Mistral-7B-v0.1")

    wait_for(lambda: settled(lookup), timeout=60, what="the lookup", worker=celery_worker)

    assert lookup.status == Status.DONE, lookup.message
    assert lookup.metadata["safetensors_parameters"] == {"BF16": 7241732096}
    assert lookup.metadata["config"]["model_type"] == "mistral"
    assert lookup.attempts == 1
    assert fake_hub.model_info_requests("mistralai/Mistral-7B-v0.1") == 1


def test_worker_answers_from_the_bundled_config_when_the_hub_fails(fake_hub, celery_worker):
    fake_hub.fail("Qwen/Qwen3-8B", 503, times=50)

    lookup = hf_model_lookup_request(repo_id="Qwen/Qwen3-8B")
    wait_for(lambda: settled(lookup), timeout=60, what="the lookup", worker=celery_worker)

    assert lookup.status == Status.DONE, lookup.message
    assert lookup.metadata["config_source"] == "bundled"
    assert lookup.metadata["params_total"] == 8_190_735_360
    assert lookup.message.startswith("Counted from the bundled config; the Hub did not answer")
    assert lookup.attempts == 1  # answered at once, not after the retries


def test_worker_waits_as_long_as_retry_after_says_then_completes(fake_hub, celery_worker):
    fake_hub.fail("acme/flaky-model", 429, times=1, retry_after=2)
    started = time.monotonic()

    lookup = hf_model_lookup_request(repo_id="acme/flaky-model")
    wait_for(lambda: settled(lookup), timeout=60, what="the lookup", worker=celery_worker)

    assert lookup.status == Status.DONE, lookup.message
    assert lookup.attempts == 2
    assert fake_hub.model_info_requests("acme/flaky-model") == 2
    assert time.monotonic() - started >= 2  # Retry-After was honoured, not the 2 s backoff's jitter


def test_lookup_survives_its_worker_being_killed_mid_lookup(
    fake_hub,
    transactional_db,
    _celery_worker_session,  # noqa: PT019
    artifacts_dir,
):
    # The shared worker would take the task too; this test needs one whose death it controls,
    # with a short visibility timeout (redelivery) and a short time limit (stale "running").
    _celery_worker_session.stop()
    worker = WorkerProcess(
        database_url=database_url(connection.settings_dict),
        broker_url=settings.CELERY_BROKER_URL,
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        log_dir=artifacts_dir,
        extra_env={
            "HF_ENDPOINT": fake_hub.url,
            "CELERY_VISIBILITY_TIMEOUT": "2",
            "HF_LOOKUP_TIME_LIMIT_SECONDS": "5",
            "HF_LOOKUP_SOFT_TIME_LIMIT_SECONDS": "4",
        },
    )
    worker.start()
    try:
        fake_hub.delay("acme/slow-model", 3)  # the worker is mid-request when it dies
        lookup = hf_model_lookup_request(repo_id="acme/slow-model")
        wait_for(
            lambda: fake_hub.model_info_requests("acme/slow-model") == 1,
            timeout=30,
            what="the worker to ask the Hub",
            worker=worker,
        )

        worker.kill()

        lookup.refresh_from_db()
        assert (lookup.status, lookup.attempts) == (Status.RUNNING, 1)
        fake_hub.delay("acme/slow-model", 0)
        time.sleep(3)  # past the visibility timeout: the restarted worker gets the task back
        worker.start()
        wait_for(lambda: settled(lookup), timeout=60, what="the redelivered lookup", worker=worker)
    finally:
        worker.stop()

    assert lookup.status == Status.DONE, lookup.message
    assert HfModelLookup.objects.filter(requested_id="acme/slow-model").count() == 1
    assert HfModelLookup.objects.count() == 1
    assert lookup.attempts == 2
    assert lookup.metadata["params_total"] == 494032768
    assert fake_hub.model_info_requests("acme/slow-model") == 2  # the killed one, and the redo
