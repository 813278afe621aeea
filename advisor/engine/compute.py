"""FLOPs, achieved throughput and time.

Achieved throughput = dense peak for the compute precision (never the sparse figure, never a
precision the accelerator lacks) x utilisation (from the catalog's benchmarks where it has some,
documented defaults otherwise) x scaling efficiency of the interconnect.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from advisor.engine import constants as c
from advisor.engine.memory import Workload, base_weight_bytes, kv_cache_bytes
from advisor.engine.models import AcceleratorSpec, BenchmarkSpec, NodeTypeSpec
from advisor.engine.shape import ModelShape


def peak_tflops(acc: AcceleratorSpec, dtype: str) -> float | None:
    """Dense tensor peak for `dtype`; None where the hardware does not have it."""
    if dtype == "bf16":
        return acc.bf16_tflops if acc.bf16_supported and acc.bf16_tflops else None
    if dtype == "fp16":
        return acc.fp16_tflops or acc.fp16_nontensor_tflops
    if dtype == "fp32":
        # PyTorch leaves TF32 matmuls off by default (torch.backends.cuda.matmul.allow_tf32).
        return acc.fp32_tflops
    return None


def compute_dtype_for(acc: AcceleratorSpec, wl: Workload) -> str | None:
    """The dtype the matmuls run in on `acc`; None when the request's precision is missing."""
    if wl.compute_dtype == "bf16" and not (acc.bf16_supported and acc.bf16_tflops):
        # Quantised weights compute in whatever 16-bit type the GPU has; an explicit bf16
        # request cannot silently become fp16 (different numerics, loss scaling).
        if wl.precision in ("int8", "int4") or wl.task == "qlora" and wl.precision == "int4":
            return "fp16" if peak_tflops(acc, "fp16") else None
        return None
    return wl.compute_dtype if peak_tflops(acc, wl.compute_dtype) else None


@dataclass(frozen=True, slots=True)
class Utilisation:
    value: float
    source: str
    calibrated: bool = False  # from the catalog's benchmarks rather than a documented default


def benchmark_mfu(bench: BenchmarkSpec, accelerators: dict[str, AcceleratorSpec]) -> float | None:
    """The benchmark's MFU: as stated, else 6 N x tokens/s / (GPUs x dense peak) for a completed
    full-training run (Kaplan et al.'s 6N; PaLM's MFU definition, arXiv:2204.02311 appendix B)."""
    if bench.mfu is not None:
        return bench.mfu
    acc = accelerators.get(bench.accelerator)
    if (
        acc is None
        or bench.outcome != "completed"
        or bench.task not in ("pretrain", "full_finetune")
        or not bench.tokens_per_second
        or not bench.params
        or bench.num_gpus < 1
    ):
        return None
    peak = peak_tflops(acc, bench.precision if bench.precision in ("fp16", "bf16") else "bf16")
    peak = peak or peak_tflops(acc, "fp16")
    if not peak:
        return None
    return 6 * bench.params * bench.tokens_per_second / (bench.num_gpus * peak * 1e12)


def utilisation_table(
    benchmarks: list[BenchmarkSpec], accelerators: dict[str, AcceleratorSpec] | None = None
) -> dict[tuple[str, bool], Utilisation]:
    """Median measured MFU per (accelerator, training?) from the catalog's benchmarks: stated,
    or derived from completed runs' tokens per second; implausible values are left out."""
    low, high = c.BENCHMARK_MFU_BOUNDS
    found: dict[tuple[str, bool], list[tuple[float, str]]] = {}
    for bench in benchmarks:
        mfu = benchmark_mfu(bench, accelerators or {})
        if mfu is None or not low <= mfu <= high:
            continue
        training = bench.task not in (None, "inference")
        how = "" if bench.mfu is not None else " (from tokens/s)"
        found.setdefault((bench.accelerator, training), []).append((mfu, bench.source + how))
    table = {}
    for key, rows in found.items():
        value = statistics.median(v for v, _ in rows)
        sources = "; ".join(sorted({s for _, s in rows}))
        table[key] = Utilisation(
            value, f"median of {len(rows)} catalog benchmark(s): {sources}", calibrated=True
        )
    return table


def default_training_utilisation(
    acc: AcceleratorSpec | None, flash_attention: bool = False
) -> c.Constant:
    """The documented default for the accelerator's class (its dense 16-bit peak) and, on
    A100-class NVIDIA GPUs, for the attention kernel: the Hopper and V100 figures were measured
    with the attention their era had, so only the A100 class has one of each."""
    peak = (acc.bf16_tflops or acc.fp16_tflops or 0) if acc is not None else 0
    if peak >= c.HOPPER_CLASS_TFLOPS:
        return c.MFU_TRAINING_HOPPER
    if peak and peak < c.OLDER_CLASS_TFLOPS:
        return c.MFU_TRAINING_OLDER
    if (
        flash_attention
        and acc is not None
        and acc.vendor.lower() == "nvidia"
        and acc.memory_bandwidth_gb_s >= c.FLASH_MFU_MIN_BANDWIDTH_GB_S
    ):
        return c.MFU_TRAINING_FLASH
    return c.MFU_TRAINING


def default_utilisation(wl: Workload, acc: AcceleratorSpec | None = None) -> Utilisation:
    if wl.task == "inference":
        return Utilisation(c.MFU_PREFILL.value, c.MFU_PREFILL.source)
    if wl.adapters:
        return Utilisation(c.MFU_LORA.value, c.MFU_LORA.source)
    const = default_training_utilisation(acc, wl.flash_attention)
    return Utilisation(const.value, const.source)


def scaling_efficiency(node: NodeTypeSpec, n: int, strategy: str) -> float:
    if n <= 1:
        return 1.0
    eff = c.SCALING_EFFICIENCY.get(node.intra_node_interconnect, 0.88)
    nodes = math.ceil(n / node.gpus_per_node)
    if nodes > 1:
        link = node.inter_node_interconnect
        inter = 0.5 if link == "none" else c.SCALING_EFFICIENCY.get(link, 0.63)
        if inter < 1.0:
            # Links slower than the reference lose a little more with every doubling of nodes.
            inter *= max(0.5, 1 - 0.01 * math.log2(nodes))
        eff *= inter
    if strategy in ("zero3", "fsdp", "zero3_offload"):
        eff *= c.ZERO3_COMM_FACTOR.value
    if strategy == "zero3_offload":
        eff *= c.OFFLOAD_SLOWDOWN.value
    return eff


def training_flops_per_token(shape: ModelShape, wl: Workload) -> float:
    n = shape.flop_params
    attention = 12 * shape.total_layers * shape.attn_dim * wl.seq_len
    per_param = c.LORA_FLOPS_PER_PARAM.value if wl.adapters else c.TRAIN_FLOPS_PER_PARAM.value
    flops = per_param * n + attention
    if wl.gradient_checkpointing:
        flops += c.RECOMPUTE_FLOPS_PER_PARAM.value * n + attention / 3
    return flops


def training_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    tokens: float,
    peak: float,
    util: float,
    eff: float,
    flops_per_token: float | None = None,
) -> float:
    per_token = flops_per_token or training_flops_per_token(shape, wl)
    seconds = tokens * per_token / (peak * 1e12 * util * eff)
    return seconds / 3600


def inference_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    acc: AcceleratorSpec,
    tokens: float,
    peak: float,
    util: float,
    n: int,
    eff: float,
) -> float:
    """Prefill is compute-bound; each decoding step reads all weights and the KV cache."""
    per_request = wl.seq_len + wl.new_tokens
    requests = max(tokens / per_request, 1)
    batches = math.ceil(requests / wl.batch_size)
    rate = peak * 1e12 * util * n * eff
    n_flop = shape.flop_params
    prefill_flops = (
        wl.batch_size
        * wl.seq_len
        * (2 * n_flop + 4 * shape.num_layers * shape.attn_dim * wl.seq_len)
    )
    prefill = prefill_flops / rate
    decode = 0.0
    if wl.new_tokens:
        weights, _ = base_weight_bytes(shape, wl.weight_format)
        mid = Workload(**{**_fields(wl), "seq_len": wl.seq_len, "new_tokens": wl.new_tokens // 2})
        kv = kv_cache_bytes(shape, mid)
        bandwidth = acc.memory_bandwidth_gb_s * 1e9 * c.BANDWIDTH_UTILISATION.value * n * eff
        step_memory = (weights + kv) / bandwidth
        step_compute = 2 * n_flop * wl.batch_size / rate
        decode = wl.new_tokens * max(step_memory, step_compute)
    return batches * (prefill + decode) * n / 3600


def _fields(wl: Workload) -> dict:
    return {name: getattr(wl, name) for name in wl.__slots__}
