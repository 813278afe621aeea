"""The optimizer step's own time (advisor/engine/optimizer_step.py): one pass over the
trainable parameters' gradients, states and weights at the memory bandwidth per optimizer
step, on each GPU's share. It matters where a step holds few tokens (fine-tuning a few
sequences a step without accumulation) and vanishes for the large global batches of
pre-training."""

from __future__ import annotations

from functools import cache

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.engine.optimizer_step import step_bytes_per_param, step_seconds
from advisor.engine.workload import build_workload, resolve_shape
from tests.engine.inputs import config, default_catalog

LLAMA_1B = config("meta-llama__Llama-3.2-1B")


def workload(**fields):
    request = EstimateRequest(config=LLAMA_1B, seq_len=2048, **fields)
    shape = resolve_shape(request)
    return shape, build_workload(request, shape)


# Lightning does not clip gradients by default: the step's own bytes.
PLAIN = {"framework": "lightning"}


@pytest.mark.parametrize(
    ("fields", "optimizer", "expected"),
    [
        # fp32 master + moments read and written, 16-bit gradient read, 16-bit weights written.
        ({**PLAIN, "task": "full_finetune", "precision": "bf16"}, "adamw", 28),
        ({**PLAIN, "task": "full_finetune", "precision": "bf16"}, "adamw_8bit", 16),
        ({**PLAIN, "task": "full_finetune", "precision": "bf16"}, "paged_adamw", 28),
        # torchtune: weights, gradients and moments all bf16 (and no clipping by default).
        ({"task": "full_finetune", "precision": "bf16", "framework": "torchtune"}, "adamw", 14),
        ({**PLAIN, "task": "full_finetune", "precision": "fp32"}, "adamw", 28),
        # LoRA's fp32 adapters are their own master copy.
        ({**PLAIN, "task": "lora", "precision": "bf16"}, "adamw", 28),
        # The Trainer clips the gradient norm (max_grad_norm 1.0): AMP's fp32 gradients read
        # for the norm, then read and written to scale them.
        ({"task": "full_finetune", "precision": "bf16", "framework": "hf_trainer"}, "adamw", 40),
    ],
)
def test_bytes_per_parameter_follow_the_training_state(fields, optimizer, expected):
    _, wl = workload(**fields)
    assert step_bytes_per_param(wl, optimizer) == expected


def test_clipping_sharded_gradients_reads_their_sixteen_bit_copies():
    """Under ZeRO / FSDP the optimizer's gradients are the 16-bit ones: 28 + 3 x 2."""
    _, wl = workload(task="full_finetune", precision="bf16", framework="hf_trainer")
    assert step_bytes_per_param(wl, "adamw", "zero2") == 34


def test_sharded_optimizers_step_a_share_on_each_gpu():
    shape, wl = workload(**PLAIN, task="full_finetune", precision="bf16")
    whole = step_seconds(shape, wl, "adamw", "ddp", 8, 2_039)
    assert step_seconds(shape, wl, "adamw", "zero2", 8, 2_039) == pytest.approx(whole / 8)
    assert step_seconds(shape, wl, "adamw", "fsdp", 8, 2_039) == pytest.approx(whole / 8)
    # CPU offload steps on the host (offload.py times it).
    assert step_seconds(shape, wl, "adamw", "zero3_offload", 1, 2_039) == 0.0
    # 1.24 B parameters x 28 bytes over 2,039 GB/s: about 17 ms a step.
    assert whole == pytest.approx(0.017, rel=0.05)


@cache
def fine_tune_hours(batch_size: int) -> float:
    request = EstimateRequest(
        config=LLAMA_1B,
        task="full_finetune",
        precision="bf16",
        seq_len=512,
        batch_size=batch_size,
        micro_batch=4,
        gradient_checkpointing=False,
        optimizer="adamw",
        tokens=100_000_000,
        accelerator="a100-80-sxm4",
        num_gpus=1,
    )
    return estimate(request, default_catalog()).recommendation.gpu_hours


def test_accumulation_spreads_the_optimizer_step_over_more_tokens():
    """Four 512-token sequences a step on one A100 with the Trainer: its step (40 bytes a
    parameter with the gradient clipping, about 24 ms) adds about a quarter to the step's
    compute; accumulating 16 micro-batches a step leaves under 2 %."""
    per_micro, accumulated = fine_tune_hours(4), fine_tune_hours(64)
    assert 1.15 < per_micro / accumulated < 1.45
