"""Generation timed at the batch the library really runs, and the KV cache it really holds.

vLLM's LLM class is given every prompt of a batch job and schedules them itself (continuous
batching): as many sequences at once as the memory it reserves holds beyond the model, at most
max_num_seqs (EngineArgs.get_batch_defaults: 256, 1,024 on GPUs of >= 70 GiB other than the
A100). With no batch given the engine timed it one request at a time, so 100M tokens through
Llama 3.1 70B read 288 GPU hours on four A100s where the batched run takes a tenth of that.
Transformers generate() still runs the batch the researcher's script builds (one request when
none is given). Multimodal Gemma 3 keeps its sliding window in text_config, which the KV cache
ignored, so its long-context cache read as if every layer were global.
"""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import config, default_catalog


def bundled(repo_id: str) -> dict:
    return find_bundled(repo_id).config


def generate(**fields):
    request = EstimateRequest(task="inference", tokens=10**8, **fields)
    return estimate(request, default_catalog())


def assumption(result, prefix: str):
    return next(a for a in result.assumptions if a.name.startswith(prefix))


def test_vllm_batch_job_is_timed_with_the_sequences_its_kv_cache_holds():
    llama = bundled("meta-llama/Llama-3.1-8B-Instruct")
    one_at_a_time = generate(
        config=llama, framework="vllm", batch_size=1, accelerator="a100-80-sxm4"
    )
    batched = generate(config=llama, framework="vllm", accelerator="a100-80-sxm4")
    # 43,403 requests of 2,048 + 256 tokens. One at a time, 255 decoding steps each read 15 GB
    # of weights (all but the 1 GB input embedding table, of which a step looks up one row);
    # batched, one read serves every sequence in the batch, and the prompts (compute-bound) set
    # most of the time.
    assert batched.recommendation.gpu_hours < one_at_a_time.recommendation.gpu_hours / 8
    # 77 GB reserved (90 % of the A100's 80 GiB) - 17 GB for the model and one sequence, in
    # sequences of 2,304 tokens x 128 KiB of KV cache per token (32 layers x 8 KV heads x 128 x
    # 2 x 2 B).
    held = (0.9 * 80 * 2**30 - batched.recommendation.memory.total_bytes) / (2304 * 131072) + 1
    concurrent = assumption(batched, "Concurrent requests (vLLM")
    assert f"about {int(held)} requests at once" in concurrent.value
    assert "at most 256" in concurrent.value
    assert any(f"room for about {int(held)} sequences" in r for r in batched.recommendation.reasons)
    # The memory a researcher must have is still the model and one sequence.
    assert (
        batched.recommendation.memory_per_gpu_bytes
        == one_at_a_time.recommendation.memory_per_gpu_bytes
    )


def test_the_batch_is_capped_by_max_num_seqs_and_by_the_jobs_own_requests():
    small = config("Qwen__Qwen2.5-0.5B")
    # Qwen2.5 0.5B keeps 12 KiB of cache a token (24 layers x 2 KV heads x 64 x 2 x 2 B), 28 MB
    # a sequence: an 80 GB GPU holds thousands, so vLLM's default limit sets the batch, 256
    # on an A100 and 1,024 on an H100.
    on_a100 = generate(config=small, framework="vllm", accelerator="a100-80-sxm4")
    assert "about 256 requests at once" in assumption(on_a100, "Concurrent").value
    on_h100 = generate(config=small, framework="vllm", accelerator="h100-80-sxm5")
    assert "about 1,024 requests at once" in assumption(on_h100, "Concurrent").value
    # A job of 10 prompts runs 10 at once whatever the room.
    tiny = estimate(
        EstimateRequest(
            config=small,
            task="inference",
            framework="vllm",
            tokens=10 * 2304,
            accelerator="a100-80-sxm4",
        ),
        default_catalog(),
    )
    assert "about 10 requests at once" in assumption(tiny, "Concurrent").value


def test_more_gpus_leave_more_room_and_time_a_70b_model_faster_per_gpu():
    llama70 = bundled("meta-llama/Llama-3.1-70B-Instruct")
    hours = {
        n: generate(
            config=llama70, framework="vllm", accelerator="a100-80-sxm4", num_gpus=n
        ).recommendation.gpu_hours
        for n in (2, 4)
    }
    # On two 80 GB GPUs 141 GB of weights leave about 1 GB each for the cache: a few sequences
    # at once. Four leave 36 GB each: a batch large enough that GPU hours fall, not rise.
    assert hours[4] < hours[2]


def test_transformers_generate_and_a_given_batch_keep_their_batch():
    llama = bundled("meta-llama/Llama-3.1-8B-Instruct")
    plain = generate(config=llama, accelerator="a100-80-sxm4")
    assert assumption(plain, "Concurrent requests").value.startswith("1 request")
    given = generate(config=llama, framework="vllm", batch_size=16, accelerator="a100-80-sxm4")
    assert not any(a.name.startswith("Concurrent requests") for a in given.assumptions)
    assert given.recommendation.recipe.micro_batch == 16


def test_the_vllm_script_runs_the_prompts_as_a_batch_job():
    result = generate(config=bundled("meta-llama/Llama-3.1-8B-Instruct"), framework="vllm")
    script = result.slurm_script
    assert "LLM(" in script
    assert ".generate(" in script
    assert "vllm serve" not in script  # a server alone in a batch job waits for a client


def test_multimodal_gemma3_sliding_window_bounds_its_kv_cache():
    """Gemma 3 (report arXiv:2503.19786): five local layers (1,024-token window) per global
    one; the 27B model has 62 layers, 10 of them global, 16 KV heads of 128."""
    result = estimate(
        EstimateRequest(
            config=bundled("google/gemma-3-27b-it"),
            task="inference",
            seq_len=32_768,
            new_tokens=256,
            tokens=10**6,
        ),
        default_catalog(),
    )
    layer_tokens = 52 * 1024 + 10 * (32_768 + 256)
    assert result.memory.kv_cache == layer_tokens * 2 * 16 * 128 * 2


def test_a_mixture_of_experts_decodes_one_sequence_at_the_speed_of_its_active_weights():
    """Mixtral 8x7B routes each token to 2 of 8 experts: generating one sequence reads 12.9B of
    its 46.7B parameters a step (the kernels skip experts without tokens), about what dense
    Llama 2 13B reads, so the two generate at about the same speed on the same GPUs."""

    def hours(model, **fields):
        request = EstimateRequest(
            config=config(model),
            task="inference",
            tokens=10**7,
            accelerator="h100-80-sxm5",
            num_gpus=2,
            **fields,
        )
        return estimate(request, default_catalog())

    mixtral = hours("mistralai__Mixtral-8x7B-v0.1")
    dense = hours("meta-llama__Llama-2-13b-hf")
    ratio = mixtral.recommendation.gpu_hours / dense.recommendation.gpu_hours
    assert 0.7 < ratio < 1.3
    read = assumption(mixtral, "Experts read per step")
    assert read.value.startswith("28% of the weights at 1 sequence per step")
    # A batch of 64 sequences sends tokens to every expert: the whole model is read.
    batched = hours("mistralai__Mixtral-8x7B-v0.1", batch_size=64)
    assert assumption(batched, "Experts read per step").value.startswith("100% of the weights")


def test_a_service_without_a_job_size_keeps_the_one_request_batch():
    """With no tokens there is no batch job to schedule: a service's concurrency is its
    traffic's, so vLLM's estimate stays at one request and says more fit."""
    result = estimate(
        EstimateRequest(
            config=bundled("meta-llama/Llama-3.1-8B-Instruct"), task="inference", framework="vllm"
        ),
        default_catalog(),
    )
    assert assumption(result, "Concurrent requests").value.startswith("1 request")
    assert any(
        "more concurrent requests fit than the batch estimated" in r
        for r in result.recommendation.reasons
    )
