"""The optimizer step's own time: a pass over every trainable parameter's gradient, optimizer
states and weights at the GPU's memory bandwidth, once per optimizer step on each GPU's share.

PyTorch's AdamW (foreach by default since 2.0, fused on request) and the ZeRO / FSDP optimizers
read each parameter's gradient, read and write its states (the fp32 master copy among them
under mixed precision) and write the weights the model computes with. The step does nothing
else meanwhile, so it adds to the GPU hours: little for a large global batch (0.05 % of an
llm-foundry 7B step), a twentieth of the time for BERT-large fine-tuned in fp16 four sequences a
step on a V100. The bytes come from the memory model's per-parameter states (memory.FULL_STATE,
memory.ADAPTER_STATE); the traffic is counted at the bandwidth, as the per-layer roofline
counts elementwise traffic."""

from __future__ import annotations

from advisor.engine.memory import ADAPTER_STATE, FULL_STATE
from advisor.engine.memory_terms import Workload, lora_trainable_params
from advisor.engine.shape import ModelShape

# Layouts where every GPU steps the whole optimizer; every other training layout splits it
# over the GPUs (ZeRO 1-3, FSDP, Megatron's distributed optimizer over its tensor, pipeline and
# data-parallel ranks), and CPU offload steps it on the host (offload.py times that).
WHOLE_ON_EACH_GPU = frozenset({"single", "ddp"})
ON_THE_HOST = frozenset({"zero3_offload"})


def step_bytes_per_param(wl: Workload, optimizer: str, strategy: str = "single") -> float:
    """Bytes an optimizer step moves per trainable parameter: the gradient read, every state
    read and written, and the weights written (read too where they are the master copy:
    pure 16-bit and fp32 training, and LoRA's fp32 adapters). AdamW under mixed precision:
    2 + 2 x 12 + 2 = 28 bytes (PyTorch AMP's fp32 weights and gradients come to the same:
    4 + 2 x 4 + 2 x 8); pure bf16 (torchtune) 14; 8-bit AdamW 16. A library that clips the
    gradient norm (wl.clips_gradients) reads every gradient once more for the norm and once
    more to scale it, writing it back: 3 x the gradient's bytes (4 under PyTorch AMP, whose
    gradients are fp32 on a GPU that holds the whole model: +12, 40 in all)."""
    kind = optimizer.removeprefix("paged_")  # paged states move the same bytes
    if kind == "adamw_32bit":
        kind = "adamw"
    if wl.adapters:
        weights, grads, states = ADAPTER_STATE[(wl.state_mode, kind)]
        moved = grads + 2 * states + 2 * weights
    else:
        grads, states = FULL_STATE[(wl.state_mode, kind)]
        written = {"mixed": 2.0, "pure16": 2 * 2.0, "fp32": 2 * 4.0}[wl.state_mode]
        moved = grads + 2 * states + written
        if wl.state_mode == "mixed" and strategy in WHOLE_ON_EACH_GPU:
            grads = 4.0  # AMP's fp32 gradients (memory.py's AMP layout)
    if wl.clips_gradients:
        moved += 3 * grads
    return moved


def step_seconds(
    shape: ModelShape, wl: Workload, optimizer: str, strategy: str, n: int, bandwidth_gb_s: float
) -> float:
    """Seconds one optimizer step keeps each of the `n` GPUs busy."""
    if strategy in ON_THE_HOST or not wl.training:
        return 0.0
    trainable = lora_trainable_params(shape, wl) if wl.adapters else shape.params_total
    shards = 1 if strategy in WHOLE_ON_EACH_GPU else max(n, 1)
    per_gpu = trainable / shards * step_bytes_per_param(wl, optimizer, strategy)
    return per_gpu / (max(bandwidth_gb_s, 1.0) * 1e9)


def step_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    optimizer: str,
    strategy: str,
    n: int,
    bandwidth_gb_s: float,
    tokens: float,
    global_batch: int,
) -> float:
    """GPU hours the optimizer steps of `tokens` add on `n` GPUs (one step per global batch
    of sequences)."""
    steps = tokens / max(global_batch * wl.sample_tokens, 1)
    return steps * step_seconds(shape, wl, optimizer, strategy, n, bandwidth_gb_s) * n / 3600
