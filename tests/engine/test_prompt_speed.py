"""Issue 14: how fast a prompt pass (prefill) runs. It runs the matmuls a training step runs,
so it gets the utilisation training reaches on the chip without recomputation, and like a
small training micro-batch a pass of few tokens leaves the GPU idle. A library that rebuilds
4-bit layers in 16-bit for many rows pays the rebuild once per pass."""

from __future__ import annotations

from functools import cache

import pytest

from advisor.engine.models import EstimateRequest
from tests.engine.inputs import llama2_13b_prompts

PASSES = 10_000  # GPU hours are rounded to 0.01: enough passes to time one to 1 us


@cache
def pass_seconds(
    batch: int, *, framework: str = "transformers", gptq: bool = False, accelerator="a100-80-sxm4"
):
    """Seconds of one prompt pass of `batch` 512-token prompts (one new token: no decoding
    step) on one GPU, with the option and the result's assumptions."""
    option, result = llama2_13b_prompts(
        batch, new_tokens=1, batches=PASSES, framework=framework, gptq=gptq,
        accelerator=accelerator,
    )  # fmt: skip
    return option.gpu_hours * 3600 / PASSES, option, tuple(result.assumptions)


def test_a_pass_of_few_tokens_runs_further_below_the_peak():
    """optimum measured Llama-2-13B fp16 prompts of 512 tokens on an A100 at 96 ms for one and
    306 ms for four: 0.79 of the per-token speed at one prompt. From 2,048 tokens a pass the
    matmuls are full and the time grows with the tokens."""
    one, four, sixteen = (pass_seconds(b)[0] for b in (1, 4, 16))
    assert one / 1 > 1.2 * four / 4
    assert sixteen == pytest.approx(4 * four, rel=0.02)


def test_the_prompt_utilisation_is_the_chips_training_figure_and_says_so():
    seconds, option, assumptions = pass_seconds(16)
    assert option.utilisation_source.startswith("benchmark llmfoundry-mpt-13b")
    # llm-foundry's MPT-13B on 8 x A100 80GB: 59.6 % MFU without recomputation.
    assert option.utilisation == pytest.approx(0.596, abs=0.01)
    assert any(
        r.startswith(f"assumes prompts run at {option.utilisation:.0%} of the fp16 dense peak")
        for r in option.reasons
    )
    prefill = next(a for a in assumptions if a.name == "Prompt processing (prefill)")
    assert "llmfoundry" in prefill.source
    # 16 x 512 tokens x 2 x 13B FLOPs at 59.6 % of 312 TFLOP/s: about 1.15 s.
    assert seconds == pytest.approx(16 * 512 * 2 * 13.0e9 / (0.596 * 312e12), rel=0.1)


def test_a_faster_chip_runs_prompts_faster_but_by_its_measured_not_its_peak_ratio():
    """H100 SXM has 3.2 x the A100's dense bf16 peak; llm-foundry trains MPT-13B at about
    2 x the A100's speed on it, and prompts follow the measurement."""
    a100 = pass_seconds(16)[0]
    h100 = pass_seconds(16, accelerator="h100-80-sxm5")[0]
    assert 1.6 < a100 / h100 < 2.6


def test_transformers_rebuilds_a_gptq_model_once_per_prompt_pass():
    """exllama's kernels rebuild each 4-bit layer in fp16 from 50 rows (8 under transformers
    4.35): a pass of 512 tokens pays one rebuild of every quantised weight, 0.5 bytes read and
    2 written each (13B: about 32 GB, some 20 ms on an A100 at 80 % of its bandwidth)."""
    fp16 = pass_seconds(4)[0]
    gptq, _, _ = pass_seconds(4, gptq=True)
    legacy, _, _ = pass_seconds(4, gptq=True, framework="transformers_legacy")
    assert gptq - fp16 == pytest.approx(0.020, abs=0.006)
    assert legacy == pytest.approx(gptq, rel=0.01)


def test_vllm_multiplies_packed_weights_and_rebuilds_nothing():
    fp16 = pass_seconds(4, framework="vllm")[0]
    gptq = pass_seconds(4, framework="vllm", gptq=True)[0]
    assert gptq <= fp16


@pytest.mark.parametrize(
    ("framework", "quantization", "rows"),
    [
        ("transformers", "gptq", 50),  # exllama v2: MAX_Q_GEMM_ROWS
        ("transformers_legacy", "gptq", 8),  # AutoGPTQ exllama: matmul_recons_thd
        ("vllm", None, 2),  # vLLM's bitsandbytes method calls bitsandbytes' matmul_4bit
        ("vllm", "gptq", None),  # Marlin multiplies packed weights
    ],
)
def test_a_prompt_pass_and_a_decoding_step_rebuild_4_bit_layers_by_one_rule(
    framework, quantization, rows
):
    """A decoding step of b sequences and a prompt pass of b x s tokens are matmuls of that many
    rows: the library rebuilds its 4-bit layers from the same row count in both."""
    from advisor.engine.inference_reads import dequantises_per_step, rebuild_rows
    from advisor.engine.workload import build_workload, resolve_shape
    from tests.engine.inputs import config

    def workload(batch):
        request = EstimateRequest(
            config=config("meta-llama__Llama-2-13b-hf"), task="inference", precision="int4",
            quantization=quantization, framework=framework, batch_size=batch, seq_len=512,
        )  # fmt: skip
        return build_workload(request, resolve_shape(request))

    assert rebuild_rows(workload(1)) == rows
    if rows is None:
        assert not dequantises_per_step(workload(64))
    else:
        assert dequantises_per_step(workload(rows))
        assert not dequantises_per_step(workload(rows - 1))
