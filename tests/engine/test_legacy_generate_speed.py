"""Issue 14: generation time under transformers 4.35 and older, against what optimum's GPTQ
benchmark measured there (Llama-2-13b-chat on one A100 80GB: fp16 47.4 ms a step at batch 8,
GPTQ with the exllama kernel 73.6 ms; docs/accuracy.md keeps those rows as test points).

Two things that era's stack does cost time: the tuple KV cache is rebuilt by torch.cat every
step (the cache is read and written once more than it is attended), and AutoGPTQ's exllama
kernel rebuilds each 4-bit layer in fp16 for a step of 8 sequences or more."""

from __future__ import annotations

from functools import cache

import pytest

from tests.engine.inputs import llama2_13b_prompts

BATCHES = 10_000  # GPU hours are rounded to 0.01: enough steps to time a step to 1 us


@cache
def step_seconds(framework: str, batch: int, gptq: bool = False) -> tuple[float, tuple]:
    """Seconds per generated token of a 512 + 512-token batch on one A100 80GB, and the
    result's assumptions."""
    option, result = llama2_13b_prompts(
        batch, new_tokens=512, batches=BATCHES, framework=framework, gptq=gptq,
        flash_attention=False,
    )  # fmt: skip
    return option.gpu_hours * 3600 / BATCHES / 512, tuple(result.assumptions)


def test_a_rebuilt_tuple_cache_costs_more_the_larger_the_batch():
    """The copy moves the whole cache each step, so the gap to DynamicCache grows with it."""
    gap = {
        batch: step_seconds("transformers_legacy", batch)[0]
        - step_seconds("transformers", batch)[0]
        for batch in (1, 16)
    }
    assert gap[1] > 0
    # 16 sequences hold 16 times the cache: about 16 times the extra traffic.
    assert 12 * gap[1] < gap[16] < 20 * gap[1]
    # Llama-2-13B keeps 0.82 MB of fp16 cache per token; the average step of batch 16 holds
    # 16 x 768 tokens (10 GB): a read and a write more at 81 % of 2,039 GB/s is about 12 ms.
    assert gap[16] == pytest.approx(2 * 16 * 768 * 819_200 / (2039e9 * 0.81), rel=0.1)


def test_the_assumption_says_the_decoding_time_counts_the_copy():
    _, assumptions = step_seconds("transformers_legacy", 16)
    copies = next(a for a in assumptions if a.name.startswith("KV cache copies"))
    assert "moves the cache three times" in copies.value


def test_legacy_gptq_at_8_sequences_is_slower_than_fp16_as_measured():
    """optimum's table: exllama 73.6 ms a step against fp16's 47.4 at batch 8 (rebuilt layers:
    0.5 + 2 + 2 bytes a weight against 2)."""
    fp16, _ = step_seconds("transformers_legacy", 8)
    gptq, assumptions = step_seconds("transformers_legacy", 8, gptq=True)
    assert gptq > 1.2 * fp16
    speed = next(a for a in assumptions if a.name == "4-bit weights and speed")
    assert "rebuilt in 16-bit" in speed.value
    assert "matmul_recons_thd" in speed.source


def test_legacy_gptq_below_8_sequences_and_current_transformers_read_packed_weights():
    fp16, _ = step_seconds("transformers_legacy", 4)
    gptq, assumptions = step_seconds("transformers_legacy", 4, gptq=True)
    assert gptq < fp16
    assert not any(a.name == "4-bit weights and speed" for a in assumptions)
    current, assumptions = step_seconds("transformers", 8, gptq=True)
    assert current < step_seconds("transformers", 8)[0]
    assert not any(a.name == "4-bit weights and speed" for a in assumptions)
