"""LoRA's time: the frozen layers run the same forward and input-gradient matmuls as full
training (and skip the weight gradients), so LoRA is faster per token than a full fine-tune
of the same model; its adapters cost memory traffic, not a share of the utilisation.
torchtune's README ('Optimization flags', Llama 3.2 3B on an A100, batch 2 x 4,096,
checkpointing on): LoRA 8,210 tokens/s against 7,210 for the full fine-tune."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.compute import lora_adapter_bytes_per_token
from advisor.engine.memory_terms import Workload
from advisor.engine.models import EstimateRequest
from advisor.engine.workload import build_workload, resolve_shape
from tests.engine.inputs import config, default_catalog

LLAMA32_1B = config("meta-llama__Llama-3.2-1B")


def _request(task: str, **fields) -> EstimateRequest:
    return EstimateRequest(
        config=LLAMA32_1B, task=task, precision="bf16", framework="torchtune", batch_size=2,
        micro_batch=2, seq_len=4096, gradient_checkpointing=True, tokens=10**9,
        system="stanage", accelerator="a100-80-sxm4", num_gpus=1, **fields,
    )  # fmt: skip


def test_lora_is_faster_per_token_than_the_same_full_fine_tune():
    """8N FLOPs per token against 6N with recomputation: at most 1.33 x faster, less the
    adapters' traffic (torchtune measured 1.14 x for Llama 3.2 3B)."""
    full = estimate(_request("full_finetune"), default_catalog()).recommendation.gpu_hours
    lora = estimate(_request("lora", lora_dropout=0.0), default_catalog()).recommendation.gpu_hours
    assert 1.05 < full / lora < 1.33


def _traffic(**fields) -> float:
    request = _request("lora", **fields)
    shape = resolve_shape(request)
    wl: Workload = build_workload(request, shape)
    return lora_adapter_bytes_per_token(shape, wl, recompute=True)


def test_the_adapters_traffic_grows_with_the_layers_they_adapt_and_with_dropout():
    every = _traffic(lora_dropout=0.0)
    attention_only = _traffic(lora_dropout=0.0, lora_target_modules=["q_proj", "v_proj"])
    assert 0 < attention_only < every
    assert _traffic(lora_dropout=0.05) > every


def test_full_training_has_no_adapter_traffic():
    request = _request("full_finetune")
    shape = resolve_shape(request)
    assert lora_adapter_bytes_per_token(shape, build_workload(request, shape), True) == 0
