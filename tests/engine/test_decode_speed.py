"""Issue 14: inference time per library. Decoding is bandwidth-bound; eager Transformers
generate() pays host time per layer and step at small batches (far below the bound), vLLM's
CUDA graphs and paged cache come close to it, and batching amortises the host time."""

from __future__ import annotations

from functools import cache

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from bench.engine_rankings import catalog_from_file
from tests.engine.inputs import config

LLAMA_2_7B = config("meta-llama__Llama-2-7b-hf")


@cache
def catalog():
    return catalog_from_file()


def one_a100(framework: str, batch: int):
    request = EstimateRequest(
        config=LLAMA_2_7B,
        task="inference",
        precision="bf16",
        seq_len=16,
        new_tokens=512,
        batch_size=batch,
        tokens=(16 + 512) * batch * 100,
        framework=framework,
        accelerator="a100-80-sxm4",
        num_gpus=1,
    )
    result = estimate(request, catalog())
    option = next(o for o in result.options if o.gpu_hours and o.num_gpus == 1)
    return option, result


def generated_per_second(option, batch: int) -> float:
    return 512 * batch * 100 / (option.gpu_hours * 3600)


def test_transformers_generate_at_batch_1_runs_far_below_the_bandwidth_bound_and_vllm_near_it():
    hf, _ = one_a100("transformers", 1)
    vllm, _ = one_a100("vllm", 1)
    # Reading 13.2 GB of bf16 weights per token (all but the 32,000 x 4,096 input embedding
    # table, of which a step looks up one row) at an A100 80GB's 2,039 GB/s: about 154/s.
    # vLLM adds its scheduler (0.87 ms a step) and its kernels' latency (0.072 ms a layer) to
    # 0.80 of the bound: the Qwen2.5 benchmark's Qwen2.5-7B (14.1 GB a step) ran at 84.3
    # tokens/s on this GPU, 0.58 of its bound. generate() waits on 32 layers of launches.
    bound = 2039e9 / ((6.74e9 - 32000 * 4096) * 2)
    assert 0.5 * bound <= generated_per_second(vllm, 1) <= 0.65 * bound
    assert generated_per_second(hf, 1) <= 0.25 * bound
    assert generated_per_second(hf, 1) < generated_per_second(vllm, 1)


def test_batching_amortises_the_host_time_of_eager_generation():
    gap_at_1 = generated_per_second(one_a100("vllm", 1)[0], 1) / generated_per_second(
        one_a100("transformers", 1)[0], 1
    )
    gap_at_32 = generated_per_second(one_a100("vllm", 32)[0], 32) / generated_per_second(
        one_a100("transformers", 32)[0], 32
    )
    assert gap_at_32 < gap_at_1


def test_the_result_states_the_librarys_decoding_speed_with_its_source():
    _, result = one_a100("vllm", 1)
    decoding = next(a for a in result.assumptions if a.name == "Decoding speed")
    assert decoding.value.startswith("80% of the memory bandwidth for the weights")
    assert "0.87 ms of host time between steps" in decoding.value
    assert "hamel.dev" in decoding.source
    assert "Qwen2.5 speed benchmark" in decoding.source
    _, eager = one_a100("transformers", 1)
    decoding = next(a for a in eager.assumptions if a.name == "Decoding speed")
    assert "at least 0.81 ms of kernel launches per layer" in decoding.value
    assert "read once per query head at 16%" in decoding.value
    assert "Qwen2.5 speed benchmark" in decoding.source


def _hours(model: str, new_tokens: int, seq_len: int = 512) -> float:
    request = EstimateRequest(
        config=config(model),
        task="inference",
        precision="bf16",
        seq_len=seq_len,
        new_tokens=new_tokens,
        batch_size=1,
        tokens=100_000 * (seq_len + new_tokens),  # enough that 0.01 h rounding is noise
        accelerator="a100-80-sxm4",
        num_gpus=1,
    )
    result = estimate(request, catalog())
    return next(o for o in result.options if o.gpu_hours and o.num_gpus == 1).gpu_hours


def test_the_prompts_forward_pass_yields_the_first_new_token():
    """optimum's prefill-only rows time generate(max_new_tokens=1) as one forward pass of the
    prompt: a decoder-only model samples its first token from the prompt's last logits, so
    one new token costs no decoding step and 33 new tokens cost 32."""
    scoring = _hours("meta-llama__Llama-2-13b-hf", 0)
    assert _hours("meta-llama__Llama-2-13b-hf", 1) == pytest.approx(scoring, rel=0.01)
    step = _hours("meta-llama__Llama-2-13b-hf", 2) - scoring
    assert step > 0
    assert _hours("meta-llama__Llama-2-13b-hf", 33) - scoring == pytest.approx(32 * step, rel=0.05)


def test_an_encoder_decoder_runs_its_decoder_for_every_new_token():
    """T5's encoder pass yields no token: its decoder runs once per new token, the first
    included."""
    encoded = _hours("google-t5__t5-base", 0)
    assert _hours("google-t5__t5-base", 1) > encoded
