"""Lookups when the Hub does not answer: the bundled or staff-added config.json, and they say so.

The real client talks to the fake Hub (tests/support/fake_hub.py), made unreachable, slow or
failing; nothing is monkeypatched.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from advisor import hub
from advisor.engine.architecture import architecture_from_hub
from advisor.models import HfModelLookup, StaffModelConfig
from advisor.selectors import hf_model_lookup_metadata
from advisor.services import hf_model_lookup_refresh, hf_model_lookup_request

pytestmark = pytest.mark.django_db
Status = HfModelLookup.Status
DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


def look_up(repo_id: str, callbacks) -> HfModelLookup:
    with callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id=repo_id)
    lookup.refresh_from_db()
    return lookup


def test_unreachable_hub_answers_a_bundled_model_from_its_config_and_says_so(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    settings.HF_ENDPOINT = DOWN

    lookup = look_up("meta-llama/Llama-3.1-8B", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.metadata["config_source"] == "bundled"
    assert lookup.metadata["params_total"] == 8_030_261_248
    assert lookup.metadata["params_source"] == "config.json (llama)"
    assert lookup.metadata["license"] == "llama3.1"
    assert lookup.message.startswith(
        "Counted from the bundled config; the Hub did not answer (it cannot be reached)."
    )
    # The estimate reads it like any lookup.
    metadata = hf_model_lookup_metadata(repo_id="meta-llama/Llama-3.1-8B")
    assert architecture_from_hub(metadata).params_total == 8_030_261_248


def test_hub_server_errors_fall_back_to_the_bundled_config(
    fake_hub, django_capture_on_commit_callbacks
):
    fake_hub.fail("Qwen/Qwen3-30B-A3B", 503, times=10)

    lookup = look_up("Qwen/Qwen3-30B-A3B", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.metadata["params_total"] == 30_532_122_624
    assert "the Hub did not answer (it answered with an error)" in lookup.message
    assert fake_hub.model_info_requests("Qwen/Qwen3-30B-A3B") == 1


def test_hub_timeout_falls_back_to_the_bundled_config(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    settings.HF_TIMEOUT_SECONDS = 0.3
    fake_hub.delay("google/gemma-2-9b", 2.0)

    lookup = look_up("google/gemma-2-9b", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.metadata["params_total"] == 9_241_705_984
    assert "(it took too long to answer)" in lookup.message


def test_an_alias_finds_the_bundled_config_under_its_canonical_id(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    settings.HF_ENDPOINT = DOWN

    lookup = look_up("gpt2", django_capture_on_commit_callbacks)

    assert (lookup.repo_id, lookup.requested_id) == ("openai-community/gpt2", "gpt2")
    assert lookup.metadata["params_total"] == 124_439_808


def test_a_model_with_no_local_config_still_fails_with_a_way_forward(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    settings.HF_ENDPOINT = DOWN

    lookup = look_up("acme/slow-model", django_capture_on_commit_callbacks)

    assert lookup.status == Status.FAILED
    assert lookup.error_kind == hub.UNREACHABLE
    assert "type the parameter count by hand" in lookup.message


def test_an_earlier_hub_answer_is_kept_over_the_bundled_file_while_the_hub_is_down(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    first = look_up("gpt2", django_capture_on_commit_callbacks)
    assert first.metadata["config_source"] == "hub"
    old = timezone.now() - timedelta(hours=settings.HF_LOOKUP_MAX_AGE_HOURS + 1)
    HfModelLookup.objects.filter(pk=first.pk).update(fetched_at=old)
    settings.HF_ENDPOINT = DOWN

    again = look_up("gpt2", django_capture_on_commit_callbacks)

    assert again.metadata["config_source"] == "hub"
    assert again.metadata["sha"] == fake_hub.find("gpt2").sha
    assert again.error_kind == hub.UNREACHABLE


def test_a_bundled_answer_is_asked_of_the_hub_again_once_it_is_back(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    hub_url = settings.HF_ENDPOINT
    settings.HF_ENDPOINT = DOWN
    lookup = look_up("mistralai/Mistral-7B-v0.1", django_capture_on_commit_callbacks)
    assert lookup.metadata["config_source"] == "bundled"

    settings.HF_ENDPOINT = hub_url
    fresh = look_up("mistralai/Mistral-7B-v0.1", django_capture_on_commit_callbacks)
    assert fresh.metadata["config_source"] == "bundled"  # not yet: the retry window is open
    retry = timedelta(seconds=settings.HF_LOOKUP_FAILED_MAX_AGE_SECONDS + 1)
    HfModelLookup.objects.filter(pk=lookup.pk).update(fetched_at=timezone.now() - retry)

    later = look_up("mistralai/Mistral-7B-v0.1", django_capture_on_commit_callbacks)

    assert later.metadata["config_source"] == "hub"
    assert later.sha == fake_hub.find("mistralai/Mistral-7B-v0.1").sha
    assert later.message == ""


def test_staff_config_is_used_before_the_bundled_one(
    fake_hub, settings, django_capture_on_commit_callbacks
):
    small = {**json.loads(json.dumps(_bundled("openai-community/gpt2"))), "n_layer": 6}
    StaffModelConfig.objects.create(
        repo_id="openai-community/gpt2", config=small, model_type="gpt2", params_total=1
    )
    settings.HF_ENDPOINT = DOWN

    lookup = look_up("openai-community/gpt2", django_capture_on_commit_callbacks)

    assert lookup.metadata["config_source"] == "staff"
    assert lookup.metadata["params_total"] == 81_912_576  # 6 blocks, as staff's file says
    assert lookup.message.startswith(
        "Counted from a config.json added by staff; the Hub did not answer"
    )


def test_staff_config_answers_for_a_model_the_hub_does_not_show(
    fake_hub, django_capture_on_commit_callbacks
):
    StaffModelConfig.objects.create(
        repo_id="acme/in-house-7b",
        config=_bundled("mistralai/Mistral-7B-v0.1"),
        model_type="mistral",
        params_total=7_241_732_096,
    )

    lookup = look_up("acme/in-house-7b", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.metadata["params_total"] == 7_241_732_096
    assert "it shows no public model by that name" in lookup.message


def test_a_bundled_config_never_hides_a_model_the_hub_says_does_not_exist(
    fake_hub, django_capture_on_commit_callbacks
):
    # The Hub answered: only a config staff chose to add overrides a "not found".
    lookup = look_up("mistralai/Mixtral-8x22B-v0.1", django_capture_on_commit_callbacks)

    assert lookup.status == Status.FAILED
    assert lookup.error_kind == hub.NOT_FOUND


def test_gated_config_is_counted_from_the_bundled_copy(
    fake_hub, django_capture_on_commit_callbacks
):
    lookup = look_up("meta-llama/Llama-3.2-1B", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.error_kind == hub.GATED
    assert lookup.metadata["config_source"] == "hub+bundled"
    assert lookup.metadata["config"]["model_type"] == "llama"
    assert lookup.metadata["params_total"] == 1_235_814_400
    assert lookup.metadata["safetensors_note"] == ""  # the Hub's count agrees exactly


def test_gpt2_reports_its_parameters_and_the_hub_total_beside_them_with_the_reason(
    fake_hub, django_capture_on_commit_callbacks, capsys
):
    call_command("lookup_model", "openai-community/gpt2")
    printed = json.loads(capsys.readouterr().out)["metadata"]

    assert printed["params_total"] == 124_439_808
    assert printed["params_source"] == "config.json (gpt2)"
    assert printed["safetensors_total"] == 137_022_720
    assert printed["safetensors_note"] == (
        "The Hub's safetensors count (137,022,720) is +12,582,912 because the checkpoint also "
        "stores a causal-mask buffer per layer; those are not counted as parameters."
    )


def test_lookup_card_shows_the_parameters_and_the_hub_total_with_its_reason(
    fake_hub, client, django_capture_on_commit_callbacks
):
    lookup = look_up("gpt2", django_capture_on_commit_callbacks)

    page = client.get(lookup.get_absolute_url()).content.decode()

    assert "124,439,808" in page
    assert "137,022,720" in page
    assert "a causal-mask buffer per layer" in page


def test_lookup_card_says_the_answer_came_from_the_bundled_config(
    fake_hub, client, settings, django_capture_on_commit_callbacks
):
    settings.HF_ENDPOINT = DOWN
    lookup = look_up("Qwen/Qwen2.5-7B-Instruct", django_capture_on_commit_callbacks)

    page = client.get(lookup.get_absolute_url()).content.decode()

    assert "Counted from the bundled config; the Hub did not answer" in page
    assert "7,615,616,512" in page


def test_a_temporary_error_for_a_bundled_model_is_answered_not_retried(fake_hub, settings):
    lookup = HfModelLookup.objects.create(repo_id="google/gemma-7b", requested_id="gemma-7b")
    fake_hub.fail("google/gemma-7b", 500, times=3)

    hf_model_lookup_refresh(lookup_id=lookup.pk, final_attempt=False)

    lookup.refresh_from_db()
    assert lookup.status == Status.DONE
    assert lookup.metadata["params_total"] == 8_537_680_896


def _bundled(repo_id: str) -> dict:
    from advisor.model_configs import find_bundled

    return find_bundled(repo_id).config


def test_a_hub_count_beyond_any_real_model_is_ignored_with_a_note(
    fake_hub, django_capture_on_commit_callbacks
):
    from tests.support.fake_hub import FakeModel

    fake_hub.add(
        FakeModel(
            "acme/absurd-count",
            _bundled("Qwen/Qwen2.5-0.5B"),
            safetensors_parameters={"BF16": 10**308},
        )
    )

    lookup = look_up("acme/absurd-count", django_capture_on_commit_callbacks)

    assert lookup.status == Status.DONE
    assert lookup.metadata["safetensors_parameters"] == {}
    assert lookup.metadata["params_total"] == 494_032_768  # counted from its config.json
    assert "beyond any real model" in lookup.message
