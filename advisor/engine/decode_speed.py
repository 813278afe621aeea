"""How fast each inference library generates token by token: the share of the memory
bandwidth its decoding steps reach, the host's time per layer and per step, and how its
attention reads the KV cache, each from a measurement (compute.decode_step_seconds and
inference_reads.decode_cache_seconds read them)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class DecodeSpeed:
    """How a library's token-by-token generation spends a step (compute.decode_step_seconds):
    the weights and KV cache read at `bandwidth_fraction` of the peak plus a fixed GPU cost per
    layer (`kernel_per_layer_s`, the kernels' own latency however little they do); the host's
    kernel launches per layer where no CUDA graph replays them (`host_per_layer_s`, overlapping
    the GPU's work: the slower sets the pace); and the host's work between two forward passes
    (`host_per_step_s`: sampling, stopping checks, scheduling), during which the GPU waits."""

    bandwidth_fraction: float
    host_per_layer_s: float
    host_per_step_s: float
    kernel_per_layer_s: float
    # The share of the peak bandwidth at which its attention at one query position reads the
    # KV cache, and whether it reads it once per query head (keys and values repeated for
    # each head of a group, or a kernel that parallelises over query heads) or once per KV
    # head (paged attention groups the heads that share a KV head).
    attention_bandwidth_fraction: float
    attention_per_query_head: bool
    # Whether it grows the cache by concatenation (torch.cat reads the old cache and writes
    # the new one every step) rather than writing the new token into a reserved buffer.
    grows_cache_by_copy: bool
    source: str


# The Qwen2.5 speed benchmark (QwenLM/Qwen2.5 docs/source/benchmark/speed_benchmark.rst; one
# A100 80GB, batch 1, 2,048 new tokens after inputs of 1 to 30,720 tokens, bf16) times the same
# five models under Transformers 4.46 generate() (flash-attention 2) and vLLM 0.6.3 (CUDA
# graphs). Its calibration rows (docs/accuracy/measurements.json, role calibration) set the
# constants below; its other 35 rows are test points.
#
# vLLM: at input length 1 a step of Qwen2.5-0.5B (24 layers, 0.99 GB read) takes 3.21 ms and
# one of Qwen2.5-14B (48 layers, 28.0 GB) 21.6 ms, both more than their reads at 0.80 of the
# peak (0.61 and 17.2 ms; 0.80 is Hamel Husain's Llama-2-7B row on an RTX A6000,
# hamel.dev/notes/llm/inference/03_inference.html, 2024-03). The two rows give 0.87 ms a step
# for the scheduler and sampler and 0.072 ms a layer for the replayed kernels' own latency.
_VLLM = DecodeSpeed(
    bandwidth_fraction=0.80,
    host_per_layer_s=0.0,
    host_per_step_s=0.866e-3,
    kernel_per_layer_s=0.0722e-3,
    attention_bandwidth_fraction=0.80,
    attention_per_query_head=False,
    grows_cache_by_copy=False,
    source="vLLM at batch 1 (CUDA graphs, paged KV cache): 0.80 of the bandwidth bound for the "
    "reads (Hamel Husain, 'Optimizing latency', hamel.dev, 2024-03), plus 0.87 ms a step and "
    "0.072 ms a layer, from the Qwen2.5 speed benchmark's 0.5B and 14B rows at input length 1 "
    "(vLLM 0.6.3, one A100 80GB: 311.6 and 46.3 tokens/s); continuous batching fills the "
    "batch the request asks for",
)
# Transformers generate(): the 0.5B and 14B rows at input length 1 (47.4 and 24.7 tokens/s,
# 21.1 and 40.4 ms a step) are host-bound (their reads take 0.6 and 17 ms): 0.805 ms a layer
# of kernel launches, overlapping the GPU, and 1.77 ms a step for the logits processors and
# stopping checks. At long inputs the attention over the cache sets the pace: Qwen2.5-7B at
# 30,720 tokens (18.8 tokens/s) gives 0.162 of the peak for reading the cache once per query
# head, which optimum's eager-attention rows at batch 8 and 16 (transformers 4.35) meet within
# 16 % (test points).
_EAGER = DecodeSpeed(
    bandwidth_fraction=0.80,
    host_per_layer_s=0.805e-3,
    host_per_step_s=1.77e-3,
    kernel_per_layer_s=0.0,
    attention_bandwidth_fraction=0.162,
    attention_per_query_head=True,
    grows_cache_by_copy=True,
    source="Transformers generate() in eager mode, from the Qwen2.5 speed benchmark (one A100 "
    "80GB, transformers 4.46, flash-attention 2): 0.805 ms of kernel launches a layer, "
    "overlapping the GPU's reads, and 1.77 ms a step (0.5B and 14B rows at input length 1); "
    "the cache grown by torch.cat each step (cache_utils.DynamicCache) and read once per query "
    "head at 0.162 of the peak bandwidth (7B row at 30,720 tokens)",
)
# TGI runs the same kernels as vLLM (paged attention, flash-attention, CUDA graphs) and
# continuous batching; LitGPT's generate is an eager loop like Transformers', but writes each
# token into a preallocated cache (litgpt/model.py KVCache.forward: index_copy_).
_LITGPT = replace(
    _EAGER,
    grows_cache_by_copy=False,
    source="no measurement of its own: LitGPT's generate is an eager PyTorch loop like "
    "Transformers generate(), so its host and attention figures are used; it writes each new "
    "token into a preallocated cache (KVCache.index_copy_) instead of concatenating",
)
DECODE_SPEED: dict[str, DecodeSpeed] = {
    "vllm": _VLLM,
    "tgi": replace(
        _VLLM,
        source="no measurement of its own: Text Generation Inference runs the same kernels "
        "(paged attention, flash-attention, CUDA graphs) and continuous batching, so vLLM's "
        "figures are used",
    ),
    "transformers": _EAGER,
    "litgpt": _LITGPT,
}


def decode_speed(framework: str) -> DecodeSpeed:
    """The library's decoding speed; an unknown key gets the eager Transformers figure."""
    return DECODE_SPEED.get(framework, DECODE_SPEED["transformers"])
