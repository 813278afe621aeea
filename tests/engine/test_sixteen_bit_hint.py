"""fp32 is what the Transformers Trainer runs when nobody passes --bf16 or --fp16, and its
matmuls then skip the tensor cores. Where 16-bit on the recommended GPUs needs a third fewer GPU
hours or less, the result says how many and how to ask for it."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

BERT_BASE = config("google-bert__bert-base-uncased")
LLAMA_1B = config("meta-llama__Llama-3.2-1B")


def _result(model, **fields):
    return estimate(EstimateRequest(config=model, **fields), default_catalog())


def _hints(result) -> list[str]:
    return [w for w in result.warnings if "in fp32: 16-bit matmuls" in w]


def test_fp32_fine_tuning_names_mixed_precision_and_its_gpu_hours():
    result = _result(
        LLAMA_1B, task="full_finetune", precision="fp32", seq_len=1024, batch_size=32,
        tokens=100_000_000,
    )  # fmt: skip
    (said,) = _hints(result)
    rec = result.recommendation
    sixteen = "bf16" if "bf16" in said else "fp16"
    assert said.startswith(f"With {sixteen} mixed precision")
    assert f"Choose {sixteen} in the flowchart (precision: {sixteen} in the API)" in said
    # The 16-bit run, sized on the same system and GPU, is at least a third cheaper.
    pinned = _result(
        LLAMA_1B, task="full_finetune", precision=sixteen, mixed_precision=True, seq_len=1024,
        batch_size=32, tokens=100_000_000, system=rec.system, accelerator=rec.accelerator,
    ).recommendation  # fmt: skip
    assert pinned.gpu_hours < 2 / 3 * rec.gpu_hours


def test_a_gpu_without_bf16_gets_fp16_with_loss_scaling():
    result = _result(
        BERT_BASE, task="full_finetune", precision="fp32", seq_len=128, batch_size=32,
        tokens=38_400_000, accelerator="t4-16",
    )  # fmt: skip
    (said,) = _hints(result)
    assert said.startswith("With fp16 mixed precision and loss scaling (the Trainer's --fp16")


def test_fp32_inference_names_sixteen_bit_weights():
    result = _result(
        BERT_BASE, task="inference", precision="fp32", seq_len=512, batch_size=64,
        new_tokens=0, tokens=5_000_000_000,
    )  # fmt: skip
    (said,) = _hints(result)
    assert "weights, this job would take" in said


def test_no_hint_for_a_sixteen_bit_job():
    result = _result(
        BERT_BASE, task="full_finetune", precision="bf16", seq_len=128, batch_size=32,
        tokens=38_400_000,
    )  # fmt: skip
    assert not _hints(result)
