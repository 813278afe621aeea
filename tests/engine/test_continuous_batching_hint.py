"""A batch job generating text with Transformers generate() (the library assumed when none is
given) runs a batch of requests at a time; vLLM schedules all the prompts itself and keeps
the GPU full. Where that is more than twice as cheap on the recommended GPUs, the result says
by how much: researchers rarely know the difference is an order of magnitude."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA3_8B = config("meta-llama__Meta-Llama-3-8B")
BERT_BASE = config("google-bert__bert-base-uncased")


def _warnings(model=LLAMA3_8B, **fields) -> list[str]:
    request = EstimateRequest(config=model, task="inference", tokens=50_000_000, **fields)
    return [w for w in estimate(request, default_catalog()).warnings if w.startswith("vLLM")]


def test_one_request_at_a_time_names_vllm_and_its_gpu_hours():
    (said,) = _warnings(seq_len=1024, new_tokens=256)
    assert "with Transformers generate() in batches of 1 request" in said
    assert "Choose vLLM as the library" in said


def test_no_hint_where_vllm_is_chosen_or_the_batch_of_short_requests_is_large():
    assert not _warnings(seq_len=1024, new_tokens=256, framework="vllm")
    assert not _warnings(seq_len=128, new_tokens=128, batch_size=32)


def test_a_large_batch_of_long_requests_still_names_vllm():
    """generate()'s attention reads the cache once per query head at a sixth of the bandwidth
    (the Qwen2.5 benchmark's long inputs, optimum's batch 16): 64 requests of 1,024 + 256
    tokens spend most of a step there, where vLLM's paged attention reads each KV head once."""
    (said,) = _warnings(seq_len=1024, new_tokens=256, batch_size=64)
    assert "in batches of 64 requests" in said


def test_no_hint_for_an_encoder_that_generates_nothing():
    assert not _warnings(model=BERT_BASE, seq_len=128)


def test_a_tiny_vllm_figure_reads_less_than_not_about_less_than():
    request = EstimateRequest(
        config=config("openai-community__gpt2"), task="inference", tokens=1_000_000
    )
    (said,) = [w for w in estimate(request, default_catalog()).warnings if w.startswith("vLLM")]
    assert said.startswith("vLLM would generate this job in less than 0.1 GPU hours on 1 GPU")


def _encoder_hint(**fields) -> list[str]:
    request = EstimateRequest(config=BERT_BASE, task="inference", tokens=10**9, **fields)
    return [w for w in estimate(request, default_catalog()).warnings if "per forward pass" in w]


def test_an_encoder_embedding_short_sequences_one_at_a_time_is_told_to_batch():
    """BERT-base over a billion tokens of 64-token sequences, one per forward pass: the GPU
    waits on kernel launches. 32 per pass (sentence-transformers' encode() default) needs a
    fraction of the GPU hours, and the result says how many."""
    (said,) = _encoder_hint(seq_len=64)
    assert said.startswith("32 sequences per forward pass would take about ")
    assert "one sequence at a time (assumed: you gave no batch)" in said
    assert "batch_size in the API" in said


def test_no_encoder_hint_when_a_batch_is_given_or_batching_saves_little():
    assert not _encoder_hint(seq_len=64, batch_size=8)
    assert not _encoder_hint(seq_len=512)  # long sequences already keep the GPU busy


def test_tgi_sent_one_request_at_a_time_says_what_concurrency_would_save():
    """TGI batches what is in flight, but its API takes one prompt per request: without a
    batch size the engine assumes one at a time, and says what sending them together
    (vLLM's figure for the same GPUs) would need."""
    request = EstimateRequest(
        config=LLAMA3_8B, task="inference", tokens=50_000_000, seq_len=1024, new_tokens=256,
        framework="tgi",
    )  # fmt: skip
    result = estimate(request, default_catalog())
    (said,) = [w for w in result.warnings if w.startswith("TGI batches")]
    assert "1 sequence at a time" in said
    assert "--max-concurrent-requests, 128 by default" in said
    assert "Give the concurrency your client sends as the batch size" in said
    stated = EstimateRequest(**{**request.model_dump(), "batch_size": 64})
    assert not [w for w in estimate(stated, default_catalog()).warnings if "TGI batches" in w]
