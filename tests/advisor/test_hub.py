"""advisor.hub with the real huggingface_hub client against the fake Hub on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from advisor import hub
from tests.support.fake_hub import INVALID_TOKEN


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "Enter a model id"),
        ("meta llama/Llama", "no spaces"),
        ("gpt2 ", "no spaces"),
        ("https://huggingface.co/openai-community/gpt2", "not a web address"),
        ("huggingface.co/gpt2", "not a web address"),
        ("org/name/config.json", "at most one '/'"),
        ("../etc/passwd", "at most one '/'"),
        ("org/../name", "at most one '/'"),
        ("org/na..me", "cannot contain '..' or '--'"),
        ("org/na--me", "cannot contain '..' or '--'"),
        ("org/name.git", "does not end with '.git'"),
        ("/name", "neither starts nor ends with '/'"),
        ("datasets/squad", "dataset or Space"),
        ("org/nämé", "only ASCII"),
        ("org/na$me", "only letters, digits"),
        ("org/-name", "starts and ends with a letter or digit"),
        ("org/" + "a" * 97, "at most 96 characters"),
    ],
)
def test_validate_repo_id_rejects_with_a_reason(raw, message):
    with pytest.raises(hub.InvalidRepoIdError, match=message):
        hub.validate_repo_id(raw)


@pytest.mark.parametrize(
    "raw", ["gpt2", "openai-community/gpt2", "Qwen/Qwen2.5-0.5B", "a/" + "b" * 96, "org/x_y.z-1"]
)
def test_validate_repo_id_accepts_hub_ids(raw):
    assert hub.validate_repo_id(raw) == raw


def test_validate_repo_id_agrees_with_the_client():
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id as client_validate

    samples = [
        "gpt2",
        "a/b",
        "a.b/c",
        "a/b.git",
        "a//b",
        "a/b/c",
        "-a/b",
        "a_/b_",
        "a..b",
        "x" * 96,
        "x" * 97,
        "a b",
        "org/na--me",
        "a-/b",
    ]
    for sample in samples:
        try:
            client_validate(sample)
            client_ok = True
        except HFValidationError:
            client_ok = False
        try:
            hub.validate_repo_id(sample)
            ours_ok = True
        except hub.InvalidRepoIdError:
            ours_ok = False
        assert ours_ok == client_ok, sample


def test_fetch_uses_the_hub_metadata_counts_and_canonical_id(fake_hub):
    fetched = hub.fetch_model("gpt2")

    assert fetched.repo_id == "openai-community/gpt2"
    assert fetched.sha == "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    meta = fetched.metadata
    assert meta["safetensors_parameters"] == {"F32": 137022720}
    assert meta["bytes_per_dtype"] == {"F32": 548090880}
    # Issue 15: the model's parameters come from its architecture; the Hub's total, which counts
    # the 12 attn.bias mask buffers, is kept beside them with the reason (changed deliberately).
    assert meta["params_total"] == 124439808
    assert meta["params_source"] == "config.json (gpt2)"
    assert meta["safetensors_total"] == 137022720
    assert meta["counts_source"] == "hub safetensors metadata"
    assert "a causal-mask buffer per layer" in meta["safetensors_note"]
    assert meta["license"] == "mit"
    assert meta["pipeline_tag"] == "text-generation"
    assert meta["library_name"] == "transformers"
    assert meta["gated"] is False
    assert meta["files"]["model.safetensors"] == 548105171
    assert meta["config"]["n_layer"] == 12
    assert meta["architectures"] == ["GPT2LMHeadModel"]
    # One model_info and one config.json, both pinned to the commit, nothing else.
    assert fake_hub.model_info_requests("gpt2") == 1
    assert fake_hub.requests_for("/openai-community/gpt2/resolve/607a30d7") == 1


def test_fetch_reads_a_single_safetensors_header_when_metadata_has_no_counts(fake_hub):
    fetched = hub.fetch_model("Qwen/Qwen2.5-0.5B")

    # Qwen2.5-0.5B: 494,032,768 parameters (tied embeddings), all BF16.
    assert fetched.metadata["safetensors_parameters"] == {"BF16": 494032768}
    assert fetched.metadata["counts_source"] == "safetensors headers"
    assert fetched.metadata["params_total"] == 494032768
    assert fake_hub.requests_for(f"/Qwen/Qwen2.5-0.5B/resolve/{fetched.sha}/model.safetensors") == 1


def test_fetch_reads_a_header_longer_than_the_first_range_read(fake_hub):
    fetched = hub.fetch_model("acme/many-tensors")

    assert fetched.metadata["safetensors_parameters"] == {"F16": 300000}
    header = fake_hub.find("acme/many-tensors").files["model.safetensors"].header
    assert len(header) > 100_000
    assert fake_hub.requests_for(f"/acme/many-tensors/resolve/{fetched.sha}/model.safetensors") == 2


def test_fetch_reads_sharded_safetensors_headers(fake_hub):
    fetched = hub.fetch_model("mistralai/Mistral-7B-v0.1")

    # Mistral-7B-v0.1: 7,241,732,096 parameters over two shards.
    assert fetched.metadata["safetensors_parameters"] == {"BF16": 7241732096}
    assert fetched.metadata["bytes_per_dtype"] == {"BF16": 14483464192}
    # config.json, the index, and one Range GET per shard header: no weights, no HEAD probes.
    resolve = f"/mistralai/Mistral-7B-v0.1/resolve/{fetched.sha}/"
    assert fake_hub.requests_for(resolve) == 4
    assert fake_hub.requests_for(resolve + "model-00001-of-00002.safetensors") == 1


def test_fetch_without_safetensors_falls_back_to_config(fake_hub):
    fetched = hub.fetch_model("facebook/opt-1.3b")

    assert fetched.metadata["safetensors_parameters"] == {}
    assert fetched.metadata["config"]["model_type"] == "opt"
    # OPT-1.3b: 1,315,758,080 parameters, counted by the engine from config.json.
    assert fetched.metadata["params_total"] == 1315758080
    assert fetched.metadata["params_source"] == "config.json (opt)"
    assert fetched.metadata["notes"] == []


def test_fetch_of_gated_model_keeps_public_counts_and_says_how_to_get_access(fake_hub):
    fetched = hub.fetch_model("meta-llama/Llama-3.2-1B")

    assert fetched.gated_files is True
    assert fetched.metadata["gated"] == "manual"
    assert fetched.metadata["params_total"] == 1235814400
    assert fetched.metadata["config"] is None
    assert "Request access" in " ".join(fetched.metadata["notes"])


def test_fetch_of_gated_model_with_granted_server_token_reads_config(fake_hub, settings):
    settings.HF_TOKEN = "hf_server_token_granted"
    fake_hub.granted_tokens.add("hf_server_token_granted")

    fetched = hub.fetch_model("meta-llama/Llama-3.2-1B")

    assert fetched.gated_files is False
    assert fetched.metadata["config"]["hidden_size"] == 2048
    assert "Bearer hf_server_token_granted" in fake_hub.authorizations()


def test_gated_model_with_a_token_not_yet_granted_says_to_request_access(fake_hub, settings):
    settings.HF_TOKEN = "hf_server_token_not_granted"

    fetched = hub.fetch_model("meta-llama/Llama-3.2-1B")

    assert fetched.gated_files is True
    assert fake_hub.requests_for("/meta-llama/Llama-3.2-1B/resolve/") == 1  # a 403, not retried


def test_unknown_revision_is_permanent(fake_hub):
    with pytest.raises(hub.HubPermanentError) as caught:
        hub.fetch_model("gpt2", revision="no-such-branch")

    assert caught.value.kind == hub.REVISION_NOT_FOUND
    assert "try main" in caught.value.message


def test_no_token_is_sent_when_none_is_configured(fake_hub):
    hub.fetch_model("gpt2")

    assert set(fake_hub.authorizations()) == {None}


@pytest.mark.parametrize(
    ("repo_id", "kind", "says"),
    [
        ("acme/does-not-exist", hub.NOT_FOUND, "Check the spelling"),
        ("acme/secret-model", hub.PRIVATE, "private"),
    ],
)
def test_fetch_permanent_errors_say_what_to_do(fake_hub, repo_id, kind, says):
    with pytest.raises(hub.HubPermanentError) as caught:
        hub.fetch_model(repo_id)

    assert caught.value.kind == kind
    assert says in caught.value.message
    assert "type the parameter count by hand" in caught.value.message


def test_rejected_server_token_is_reported_without_showing_it(fake_hub, settings):
    settings.HF_TOKEN = INVALID_TOKEN

    with pytest.raises(hub.HubPermanentError) as caught:
        hub.fetch_model("gpt2")

    assert caught.value.kind == hub.TOKEN_REJECTED
    assert INVALID_TOKEN not in caught.value.message


def test_rate_limit_is_temporary_and_carries_retry_after(fake_hub):
    fake_hub.fail("gpt2", 429, retry_after=7)

    with pytest.raises(hub.HubTemporaryError) as caught:
        hub.fetch_model("gpt2")

    assert caught.value.kind == hub.RATE_LIMITED
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_temporary(fake_hub, status):
    fake_hub.fail("gpt2", status)

    with pytest.raises(hub.HubTemporaryError) as caught:
        hub.fetch_model("gpt2")

    assert caught.value.kind == hub.SERVER_ERROR


def test_slow_hub_times_out_within_the_configured_timeout(fake_hub, settings):
    settings.HF_TIMEOUT_SECONDS = 0.3
    fake_hub.delay("acme/slow-model", 2)

    started = time.monotonic()
    with pytest.raises(hub.HubTemporaryError) as caught:
        hub.fetch_model("acme/slow-model")

    assert caught.value.kind == hub.TIMEOUT
    assert time.monotonic() - started < 1.5


def test_unreachable_hub_is_temporary(fake_hub, settings):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # discard port: nothing listens

    with pytest.raises(hub.HubTemporaryError) as caught:
        hub.fetch_model("gpt2")

    assert caught.value.kind == hub.UNREACHABLE


def test_search_returns_most_downloaded_first(fake_hub):
    results = hub.search_models("qwen")

    assert [r["id"] for r in results] == ["Qwen/Qwen2.5-0.5B"]
    assert hub.search_models("model")[0]["id"] == "acme/slow-model"
