"""Issue 14: generation time under transformers 4.35 and older, against what optimum's GPTQ
benchmark measured there (Llama-2-13b-chat on one A100 80GB: fp16 47.4 ms a step at batch 8,
GPTQ with the exllama kernel 73.6 ms; docs/accuracy.md keeps those rows as test points).

That era's stack grows the cache by torch.cat every step, as DynamicCache still does (the
cache is read and written once more than it is attended), and AutoGPTQ's exllama kernel
rebuilds each 4-bit layer in fp16 for a step of 8 sequences or more."""

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


def test_a_tuple_cache_and_dynamiccache_move_the_same_bytes_a_step():
    """Both grow the cache by torch.cat (transformers 4.35's tuple, 4.36's DynamicCache.update):
    the old cache is read and the new one written every step, whichever version; what the
    tuple cache adds is memory (the old tuple alive beside the new one), not time."""
    for batch in (1, 16):
        assert step_seconds("transformers_legacy", batch)[0] == pytest.approx(
            step_seconds("transformers", batch)[0], rel=1e-3
        )


def test_the_copy_and_the_attention_over_the_cache_grow_with_the_batch():
    """optimum's fp16 rows: 37.0 ms a step at batch 1 and 4, 47.4 at 8, 69.9 at 16; the host's
    launches set the small batches' pace, the cache the large ones'."""
    assert (
        step_seconds("transformers_legacy", 4)[0] < 1.1 * step_seconds("transformers_legacy", 1)[0]
    )
    assert (
        step_seconds("transformers_legacy", 16)[0] > 1.5 * step_seconds("transformers_legacy", 1)[0]
    )


def test_the_assumption_says_the_decoding_time_counts_the_copy():
    _, assumptions = step_seconds("transformers_legacy", 16)
    copies = next(a for a in assumptions if a.name.startswith("KV cache copies"))
    assert "the decoding time counts the copy" in copies.value


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
    """Below 8 sequences the exllama kernel reads the packed 4-bit weights; at batch 1 the
    step is the host's either way (optimum: fp16 37.0 ms, exllama 33.7 ms)."""
    fp16, _ = step_seconds("transformers_legacy", 1)
    gptq, assumptions = step_seconds("transformers_legacy", 1, gptq=True)
    assert gptq == pytest.approx(fp16, rel=0.01)
    assert not any(a.name == "4-bit weights and speed" for a in assumptions)
    current, assumptions = step_seconds("transformers", 8, gptq=True)
    assert current < step_seconds("transformers", 8)[0]
    assert not any(a.name == "4-bit weights and speed" for a in assumptions)
