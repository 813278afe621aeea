"""How fast each inference library generates token by token: the share of the memory
bandwidth bound its decoding steps reach and the host time per layer no CUDA graph hides, each
from a measurement (compute.inference_gpu_hours reads them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DecodeSpeed:
    """How close a library's token-by-token generation comes to the bandwidth bound: each
    step reads the weights and KV cache at `bandwidth_fraction` of the peak, then waits
    `per_layer_overhead_s` per layer for the host (Python, kernel launches) where no CUDA graph
    hides it."""

    bandwidth_fraction: float
    per_layer_overhead_s: float
    source: str


# Hamel Husain, 'Optimizing latency' (hamel.dev/notes/llm/inference/03_inference.html, 2024-03):
# Llama-2-7B fp16, batch 1, 200 new tokens on one RTX A6000 (768 GB/s): vLLM 46.4 tokens/s, a
# step of 21.6 ms against 17.2 ms to read the 13.2 GB a step reads (6.61B parameters: all but
# the input embedding table, of which it looks up one row) at the peak: 0.80 of it.
_VLLM_FRACTION = 0.80
DECODE_SPEED: dict[str, DecodeSpeed] = {
    "vllm": DecodeSpeed(
        _VLLM_FRACTION,
        0.0,
        "vLLM at batch 1 (CUDA graphs, paged KV cache): 46.4 tokens/s for Llama-2-7B fp16 on an "
        "RTX A6000, 0.80 of the bandwidth bound (Hamel Husain, 'Optimizing latency', hamel.dev, "
        "2024-03); continuous batching fills the batch the request asks for",
    ),
    "tgi": DecodeSpeed(
        _VLLM_FRACTION,
        0.0,
        "no measurement of its own: Text Generation Inference runs the same kernels (paged "
        "attention, flash-attention, CUDA graphs) and continuous batching, so vLLM's 0.80 of "
        "the bandwidth bound is used",
    ),
    "transformers": DecodeSpeed(
        _VLLM_FRACTION,
        0.45e-3,
        "Transformers generate() in eager mode: llama-7b fp16, batch 1, 1,000-token prompt, 200 "
        "new tokens on an A10G (600 GB/s) runs at 23.15 tokens/s, 43.2 ms a step "
        "(fxmarty/accelerated-pytorch-transformers-generation README, 'None' row). Reading "
        "13.8 GB of weights (all but the input embedding table) and cache at vLLM's 0.80 of "
        "the peak takes 28.8 ms; the other 14.4 ms over 32 layers is 0.45 ms per layer of host "
        "time with no CUDA graph",
    ),
    "litgpt": DecodeSpeed(
        _VLLM_FRACTION,
        0.45e-3,
        "no measurement of its own: LitGPT's generate is an eager PyTorch loop like "
        "Transformers generate(), so its per-layer host time is used",
    ),
}


def decode_speed(framework: str) -> DecodeSpeed:
    """The library's decoding speed; an unknown key gets the eager Transformers figure."""
    return DECODE_SPEED.get(framework, DECODE_SPEED["transformers"])
