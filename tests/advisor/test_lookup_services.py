"""Lookup services on PostgreSQL, the task run in-process, the real client against the fake Hub."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from advisor import hub
from advisor.engine.models import HubModelMetadata
from advisor.models import HfModelLookup
from advisor.services import LookupBusy, hf_model_lookup_refresh, hf_model_lookup_request

pytestmark = pytest.mark.django_db
Status = HfModelLookup.Status
FLAKY = "acme/flaky-model"


def test_request_enqueues_only_after_commit_and_then_stores_the_answer(
    fake_hub, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        lookup = hf_model_lookup_request(repo_id="Qwen/Qwen2.5-0.5B")

    assert lookup.status == Status.PENDING
    assert len(callbacks) == 1
    assert fake_hub.requests_for("/api/models") == 0  # the web request never waits on the Hub

    callbacks[0]()

    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.repo_id == "Qwen/Qwen2.5-0.5B"
    assert lookup.sha == fake_hub.find("Qwen/Qwen2.5-0.5B").sha
    assert lookup.metadata["params_total"] == 494032768
    assert lookup.attempts == 1
    assert lookup.fetched_at is not None
    assert lookup.error_kind == ""


def test_second_request_shares_the_stored_lookup_without_asking_the_hub(
    fake_hub, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = hf_model_lookup_request(repo_id="gpt2")
    calls = fake_hub.requests_for()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = hf_model_lookup_request(repo_id="gpt2")
        canonical = hf_model_lookup_request(repo_id="openai-community/GPT2")

    assert again.pk == canonical.pk == first.pk
    assert callbacks == []
    assert fake_hub.requests_for() == calls
    assert HfModelLookup.objects.count() == 1
    first.refresh_from_db()
    assert (first.repo_id, first.requested_id) == ("openai-community/gpt2", "gpt2")


def test_done_lookup_is_served_from_the_cache_without_a_query(
    fake_hub, django_capture_on_commit_callbacks, django_assert_num_queries
):
    with django_capture_on_commit_callbacks(execute=True):
        first = hf_model_lookup_request(repo_id="gpt2")
    hf_model_lookup_request(repo_id="gpt2")  # reads the done row and caches it

    with django_assert_num_queries(0):
        cached = hf_model_lookup_request(repo_id="gpt2")

    assert cached.pk == first.pk
    assert cached.status == Status.DONE
    assert cached.metadata["params_total"] == 124439808  # GPT-2's parameters, not its buffers


def test_invalid_id_changes_nothing(fake_hub):
    with pytest.raises(hub.InvalidRepoIdError, match="not a web address"):
        hf_model_lookup_request(repo_id="https://huggingface.co/gpt2")

    assert HfModelLookup.objects.count() == 0
    assert fake_hub.requests_for() == 0


def test_stale_answer_is_refreshed_on_the_next_request(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="gpt2")
    old = timezone.now() - timedelta(hours=settings.HF_LOOKUP_MAX_AGE_HOURS + 1)
    HfModelLookup.objects.filter(pk=lookup.pk).update(fetched_at=old)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        hf_model_lookup_request(repo_id="gpt2")

    assert len(callbacks) == 1
    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.fetched_at > old
    assert lookup.attempts == 2
    assert fake_hub.model_info_requests("openai-community/gpt2") == 1


def test_lookup_at_a_commit_sha_never_goes_stale(fake_hub, django_capture_on_commit_callbacks):
    sha = fake_hub.find("gpt2").sha
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="gpt2", revision=sha)
    long_ago = timezone.now() - timedelta(days=999)
    HfModelLookup.objects.filter(pk=lookup.pk).update(fetched_at=long_ago)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        hf_model_lookup_request(repo_id="gpt2", revision=sha)

    assert callbacks == []


def test_not_found_is_recorded_with_close_matches(fake_hub, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="acme/slow-modle")

    lookup.refresh_from_db()
    assert lookup.status == Status.FAILED
    assert lookup.error_kind == hub.NOT_FOUND
    assert "Check the spelling" in lookup.message
    assert "type the parameter count by hand" in lookup.message
    assert lookup.suggestions == ["acme/slow-model"]
    assert fake_hub.model_info_requests("acme/slow-modle") == 1  # permanent: never retried


def test_gated_model_is_done_with_counts_and_a_way_to_get_access(
    fake_hub, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="meta-llama/Llama-3.2-1B")

    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.error_kind == hub.GATED
    assert "Request access on the model's Hub page" in lookup.message
    assert lookup.metadata["params_total"] == 1235814400


def test_temporary_error_puts_the_lookup_back_for_a_retry_that_then_succeeds(fake_hub):
    lookup = HfModelLookup.objects.create(repo_id=FLAKY, requested_id=FLAKY)
    fake_hub.fail("acme/flaky-model", 503, times=1)

    with pytest.raises(hub.HubTemporaryError):
        hf_model_lookup_refresh(lookup_id=lookup.pk)

    lookup.refresh_from_db()
    assert lookup.status == Status.PENDING
    assert lookup.error_kind == hub.SERVER_ERROR
    assert lookup.message == (
        "The Hub answered with an error (503); the lookup will try again shortly."
    )

    hf_model_lookup_refresh(lookup_id=lookup.pk)

    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.attempts == 2
    assert lookup.error_kind == lookup.message == ""


def test_final_attempt_records_the_failure_with_a_way_forward(fake_hub):
    lookup = HfModelLookup.objects.create(repo_id=FLAKY, requested_id=FLAKY)
    fake_hub.fail("acme/flaky-model", 429, times=1, retry_after=30)

    hf_model_lookup_refresh(lookup_id=lookup.pk, final_attempt=True)

    lookup.refresh_from_db()
    assert lookup.status == Status.FAILED
    assert lookup.error_kind == hub.RATE_LIMITED
    assert lookup.message == (
        "The Hub is rate-limiting us. Try again later. "
        "You can type the parameter count by hand instead."
    )


def test_unreachable_hub_fails_the_lookup_not_the_request(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"

    # A model with no bundled config (gpt2 now falls back to its bundled config.json, see
    # test_lookup_without_hub.py), so the failure is what the researcher gets.
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="acme/slow-model")

    # In-process (no broker) there is one attempt, and its failure is stored, not raised.
    lookup.refresh_from_db()
    assert lookup.status == Status.FAILED
    assert lookup.error_kind == hub.UNREACHABLE
    assert lookup.message.startswith("The Hub cannot be reached right now. Try again later.")


def test_redelivered_task_changes_nothing(fake_hub, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="gpt2")
    lookup.refresh_from_db()
    before = (lookup.status, lookup.attempts, lookup.fetched_at, lookup.metadata)
    calls = fake_hub.requests_for()

    hf_model_lookup_refresh(lookup_id=lookup.pk)

    lookup.refresh_from_db()
    assert (lookup.status, lookup.attempts, lookup.fetched_at, lookup.metadata) == before
    assert fake_hub.requests_for() == calls


def test_running_lookup_is_left_alone_until_its_time_limit_has_passed(fake_hub, settings):
    lookup = HfModelLookup.objects.create(
        repo_id="gpt2",
        requested_id="gpt2",
        status=Status.RUNNING,
        started_at=timezone.now(),
        attempts=1,
    )

    with pytest.raises(LookupBusy) as busy:
        hf_model_lookup_refresh(lookup_id=lookup.pk)

    assert 1 <= busy.value.retry_in <= settings.HF_LOOKUP_TIME_LIMIT_SECONDS + 2
    assert fake_hub.requests_for() == 0

    # Older than the hard time limit: the worker that claimed it is dead, so take it over.
    long_ago = timezone.now() - timedelta(seconds=settings.HF_LOOKUP_TIME_LIMIT_SECONDS + 5)
    HfModelLookup.objects.filter(pk=lookup.pk).update(started_at=long_ago)
    hf_model_lookup_refresh(lookup_id=lookup.pk)

    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.attempts == 2


def test_to_hub_metadata_gives_the_engine_its_input(fake_hub, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="mistralai/Mistral-7B-v0.1")
    lookup.refresh_from_db()

    metadata = lookup.to_hub_metadata()

    assert isinstance(metadata, HubModelMetadata)
    assert metadata.repo_id == "mistralai/Mistral-7B-v0.1"
    assert metadata.safetensors_parameters == {"BF16": 7241732096}
    assert metadata.safetensors_total == 7241732096
    assert metadata.params_total == 7241732096
    assert metadata.config["num_hidden_layers"] == 32
    assert metadata.license == "apache-2.0"
    assert metadata.file_sizes["model-00001-of-00002.safetensors"] > 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_one_model_make_one_hub_call(fake_hub):
    fake_hub.delay("acme/bench-model", 0.3)  # keep the first lookup in flight while others ask
    barrier = threading.Barrier(12)
    seen: list[int] = []
    errors: list[BaseException] = []

    def ask():
        try:
            barrier.wait()
            seen.append(hf_model_lookup_request(repo_id="acme/bench-model").pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert len(set(seen)) == 1
    assert HfModelLookup.objects.get().status == Status.DONE
    assert fake_hub.model_info_requests("acme/bench-model") == 1


def test_server_token_is_used_but_never_logged_stored_or_shown(
    fake_hub, settings, caplog, client, django_capture_on_commit_callbacks
):
    import logging

    token = "hf_server_secret_granted_0123456789"
    settings.HF_TOKEN = token
    fake_hub.granted_tokens.add(token)
    caplog.set_level(logging.DEBUG)

    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="meta-llama/Llama-3.2-1B")
    lookup.refresh_from_db()
    page = client.get(lookup.get_absolute_url())

    assert f"Bearer {token}" in fake_hub.authorizations()
    assert lookup.metadata["config"]["hidden_size"] == 2048  # the gated file was readable
    assert token not in caplog.text
    assert token not in str(lookup.metadata) + lookup.message
    assert token not in page.content.decode()


def test_in_process_task_leaves_a_lookup_running_elsewhere_alone(fake_hub):
    from advisor.tasks import hf_model_lookup_refresh as task

    lookup = HfModelLookup.objects.create(
        repo_id="gpt2", requested_id="gpt2", status=Status.RUNNING, started_at=timezone.now()
    )

    task.delay(lookup.pk)  # eager here: must neither loop nor ask the Hub

    lookup.refresh_from_db()
    assert lookup.status == Status.RUNNING
    assert fake_hub.requests_for() == 0


def test_metadata_selector_finds_a_lookup_by_either_id(
    fake_hub, django_capture_on_commit_callbacks
):
    from advisor.selectors import hf_model_lookup_metadata

    assert hf_model_lookup_metadata(repo_id="gpt2") is None
    with django_capture_on_commit_callbacks(execute=True):
        hf_model_lookup_request(repo_id="gpt2")

    by_alias = hf_model_lookup_metadata(repo_id="gpt2")
    by_canonical = hf_model_lookup_metadata(repo_id="OpenAI-Community/gpt2")

    assert by_alias == by_canonical
    assert by_alias.repo_id == "openai-community/gpt2"
    assert by_alias.safetensors_parameters == {"F32": 137022720}
