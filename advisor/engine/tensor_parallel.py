"""Tensor parallelism within a node as a training recipe knob: the degrees tried, the layout
keys that the memory model and the recipe search share, and what its communication costs.

Megatron-style tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053 section 3) splits
every attention and MLP block over t GPUs of one node: weights, gradients and optimizer state
are 1/t per GPU, the embeddings and the LM head are split along the vocabulary
(vocab-parallel), and each layer does 2 all-reduces of the s*b*h activations in the forward
pass and 2 in the backward. With sequence parallelism (Korthikanti et al. 2022,
arXiv:2205.05198 section 4.2.2) the all-reduces become all-gather + reduce-scatter pairs that
move the same bytes, and the activations the norms and dropouts keep are split too: a layer
keeps s*b*h*(34 + 5*a*s/h)/t bytes instead of s*b*h*(10 + 24/t + 5*a*s/(h*t)) (their
equations 2 and 4; memory.training_activations_per_layer generalises both). The remaining
n/t GPUs are data parallel with the optimizer state and master weights sharded over them (the
distributed optimizer of Megatron, `--use-distributed-optimizer`; ZeRO stage 1).

Time: the collectives sit on the critical path (Megatron overlaps them with the GEMMs only with
Transformer Engine's `--tp-comm-overlap`, off by default), so each token costs every GPU of the
group the collective time on top of its share of the FLOPs. The link is the node's
`intra_node_interconnect`; the catalog has no bandwidth for it, so the measured all-reduce bus
bandwidth comes from the table below, per link kind and, for NVLink, per GPU generation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from advisor.engine.constants import Constant

if TYPE_CHECKING:
    from advisor.engine.memory import Workload
    from advisor.engine.models import AcceleratorSpec, NodeTypeSpec
    from advisor.engine.shape import ModelShape

STRATEGY = "tensor_parallel"
MAX_DEGREE = 8  # an NVLink/NVSwitch domain of today's nodes; beyond it TP crosses InfiniBand
# Deepest pipeline tried: Megatron-LM's published GPT-3 175B and 530B layouts use 8 to 35
# stages (Narayanan et al. 2021, arXiv:2104.04473 table 1); 16 covers 70B-class models, which
# fit on 80 GB GPUs with 2 to 8.
MAX_STAGES = 16
LAYOUT_PREFIX = STRATEGY + "/"

# Measured NCCL all-reduce bus bandwidth per GPU (nccl-tests' busbw: the per-GPU link rate a
# ring all-reduce reaches for large messages), bytes/s.
NVLINK_BUS_BANDWIDTH = {
    # 8 x A100-SXM4 (NVLink 3, 600 GB/s per GPU both ways): all_reduce_perf busbw ~200 GB/s
    # (github.com/NVIDIA/nccl-tests/issues/149); 4-GPU HGX boards with direct links likewise
    # ~208 GB/s (nccl-tests/issues/178).
    "a100": 200e9,
    # H100 PCIe cards joined by NVLink bridges in pairs: busbw ~116 GB/s
    # (github.com/NVIDIA/nccl/issues/1161).
    "h100-80-pcie": 116e9,
    # H100/H200/GH200 SXM: NVLink 4 has 18 links per GPU against A100's 12 (900 vs 600 GB/s):
    # the A100 measurement scaled by the link count, no direct measurement in hand.
    "h100": 300e9,
    "h200": 300e9,
    "gh200": 300e9,
    # V100-SXM2: NVLink 2 has 6 links at 25 GB/s per direction, half of A100's 12 x 25:
    # the A100 measurement halved.
    "v100": 100e9,
}
SOURCE = (
    "Shoeybi et al. 2019 (arXiv:1909.08053) section 3: 2 all-reduces forward and 2 backward per "
    "layer; Korthikanti et al. 2022 (arXiv:2205.05198) equations 2 and 4 (sequence "
    "parallelism); NCCL all-reduce bus bandwidth measured with nccl-tests: 8 x A100-SXM4 "
    "~200 GB/s (github.com/NVIDIA/nccl-tests/issues/149), NVLink-bridged H100 PCIe ~116 GB/s "
    "(github.com/NVIDIA/nccl/issues/1161), across PCIe ~20 GB/s "
    "(github.com/NVIDIA/nccl-tests/issues/178); H100/H200 SXM and V100 scaled from A100 by "
    "their NVLink link counts"
)
_MEASURED = frozenset({"a100", "h100-80-pcie"})
NVLINK_DEFAULT = Constant(
    "NVLink all-reduce bandwidth (unmeasured GPU)",
    100e9,
    "bytes/s per GPU",
    "the V100 figure (the slowest NVLink generation in NVLINK_BUS_BANDWIDTH), for NVLink-class "
    "links without a measurement (Xe Link, Infinity Fabric)",
    "tensor parallelism's all-reduces are priced at the slowest measured NVLink",
)
PCIE_BUS_BANDWIDTH = Constant(
    "PCIe all-reduce bandwidth",
    20e9,
    "bytes/s per GPU",
    "nccl-tests all_reduce_perf between A100s whose traffic crosses PCIe host bridges: busbw "
    "drops from ~200 to ~20 GB/s (github.com/NVIDIA/nccl-tests/issues/178); PCIe 4.0 x16 is "
    "32 GB/s per direction before protocol overhead",
    "without NVLink every all-reduce goes through the PCIe switches and the CPU",
)


def layout_key(tp: int, pp: int = 1) -> str:
    """The name the memory model and the recipe search give `tp`-way TP x `pp` pipeline
    stages x data parallel ("tensor_parallel/8", "tensor_parallel/8x4")."""
    return f"{LAYOUT_PREFIX}{tp}" + (f"x{pp}" if pp > 1 else "")


def _degrees(strategy: str) -> tuple[int, int]:
    tp, _, pp = strategy[len(LAYOUT_PREFIX) :].partition("x")
    return int(tp), int(pp or 1)


def split(strategy: str, n: int) -> tuple[str, int, int]:
    """(strategy as options name it, tensor-parallel degree, data-parallel degree) of a layout
    key on `n` GPUs. Inference's plain "tensor_parallel" splits the model over all `n`."""
    if strategy.startswith(LAYOUT_PREFIX):
        tp, pp = _degrees(strategy)
        return STRATEGY, tp, max(n // (tp * pp), 1)
    if strategy == STRATEGY:
        return STRATEGY, n, 1
    return strategy, 1, (1 if strategy == "single" else n)


def stages(strategy: str) -> int:
    """Pipeline stages of a layout key (1: no pipeline)."""
    return _degrees(strategy)[1] if strategy.startswith(LAYOUT_PREFIX) else 1


def pipeline_depths(layers: int) -> tuple[int, ...]:
    """Pipeline stage counts worth trying: powers of two up to MAX_STAGES that split the
    layers evenly (Megatron-LM asserts num_layers % pipeline_model_parallel_size == 0 unless
    told how to split them unevenly)."""
    return tuple(p for p in (2, 4, 8, 16) if p <= MAX_STAGES and layers % p == 0)


def stage_share(params: float, embedding_params: float, pp: int) -> float:
    """Share of the model's parameters on the fullest pipeline stage: the transformer layers
    split evenly, the input embedding on the first stage and the LM head on the last
    (Megatron-LM places them so; tied embeddings keep a copy on both)."""
    if pp <= 1 or params <= 0:
        return 1.0
    body = max(params - 2 * embedding_params, 0.0)
    return min(1.0, (body / pp + embedding_params) / params)


def bubble(pp: int, micro_batches: int) -> float:
    """Idle time of a 1F1B pipeline schedule relative to its compute: (p - 1) / m with p
    stages and m micro-batches per pipeline per optimizer step (Narayanan et al. 2021,
    arXiv:2104.04473 section 2.2.1)."""
    if pp <= 1:
        return 0.0
    return (pp - 1) / max(micro_batches, 1)


def degrees(gpus_per_node: int, pinned: int | None = None) -> tuple[int, ...]:
    """Tensor-parallel degrees worth trying on a node: the divisors of its GPU count above 1,
    up to MAX_DEGREE (a pinned degree only, when it fits in the node)."""
    found = tuple(t for t in range(2, min(gpus_per_node, MAX_DEGREE) + 1) if gpus_per_node % t == 0)
    if pinned is not None:
        return (pinned,) if pinned in found else ()
    return found


def vllm_splits_heads(shape: ModelShape, tp: int) -> bool:
    """Whether vLLM can serve the model tensor parallel over `tp` GPUs: the query heads split
    evenly, and the key/value heads split evenly or, fewer than the GPUs, each is replicated
    on a whole number of them (vLLM's model config checks)."""
    heads, kv_heads = shape.num_attention_heads, max(shape.num_kv_heads, 1)
    return not heads % tp and (not kv_heads % tp if kv_heads >= tp else not tp % kv_heads)


def bus_bandwidth(node: NodeTypeSpec, acc: AcceleratorSpec) -> tuple[float, str]:
    """(all-reduce bytes/s per GPU within the node, where the figure comes from)."""
    link = node.intra_node_interconnect
    if link == "pcie":
        return PCIE_BUS_BANDWIDTH.value, "PCIe (nccl-tests/issues/178)"
    if link == "nvlink":
        for prefix in sorted(NVLINK_BUS_BANDWIDTH, key=len, reverse=True):
            if acc.name.startswith(prefix):
                how = "measured" if prefix in _MEASURED else "scaled from A100 by link count"
                return NVLINK_BUS_BANDWIDTH[prefix], f"NVLink, {prefix.upper()} {how}"
    return NVLINK_DEFAULT.value, f"{link}, priced as V100 NVLink (no measurement)"


def comm_seconds_per_token(
    shape: ModelShape, wl: Workload, tp: int, level: str, bandwidth: float
) -> float:
    """GPU-seconds of tensor-parallel collectives per trained token, summed over the t GPUs.

    Per layer 2 collectives forward and 2 backward, each of h activations per token; full
    recomputation runs the forward, and its 2 collectives, again, and so does every forward
    pass without gradients (a DPO or KTO reference's, KTO's KL pass: `forward_only_passes` per
    token trained). A ring all-reduce keeps each GPU busy for 2(t-1)/t x the message over the
    bus bandwidth (nccl-tests' definition of busbw), and all t GPUs of the group wait for it."""
    if tp <= 1:
        return 0.0
    collectives = (6 if level == "full" else 4) + 2 * wl.forward_only_passes
    message = shape.hidden_size * wl.act_bytes
    per_gpu = shape.total_layers * collectives * 2 * (tp - 1) / tp * message / bandwidth
    return per_gpu * tp


def efficiency(
    shape: ModelShape,
    wl: Workload,
    tp: int,
    level: str,
    flops_per_token: float,
    achieved_flops: float,
    bandwidth: float,
) -> float:
    """Share of the GPU time that is compute when `tp`-way tensor parallelism adds its
    collectives: compute / (compute + communication), per token."""
    compute = flops_per_token / achieved_flops
    comm = comm_seconds_per_token(shape, wl, tp, level, bandwidth)
    return compute / (compute + comm) if compute > 0 else 1.0


def without_measured_layout(job_efficiency: float, job_width: float, measured_width: float | None):
    """The job's tensor-parallel efficiency relative to the measurement's own, when the
    measurement (its utilisation) was itself taken under tensor parallelism: its figure already
    contains its collectives, so they are removed before the job's are added (otherwise they
    count twice). Per token the collectives move L x h activations against about 12 L h^2
    FLOPs (`comm_seconds_per_token`), so the communication-to-compute ratio scales as 1 / h
    at one degree and link: the measured model's is the job's x job width / measured width.
    Its degree is not published for most runs (LLaMA, Llama 3): taken as the job's. Never
    above 1: a job is not credited beyond the compute the measurement reached."""
    if measured_width is None or job_efficiency >= 1.0 or measured_width <= 0:
        return job_efficiency
    ratio = (1 / job_efficiency - 1) * job_width / measured_width
    return min(job_efficiency * (1 + ratio), 1.0)


# vLLM's own all-reduce for the small messages of generation (its custom all-reduce kernel,
# vllm/distributed/device_communicators/custom_all_reduce.py), measured on H100 SXM without
# CUDA graphs: microseconds per call by message bytes, for 2, 4 and 8 GPUs (sgl-project/sglang
# pull request 2904, its "vllm" table). Below 32 KB the time is latency alone (about 9 us);
# from 256 KB the bytes count.
VLLM_ALL_REDUCE_US = {
    2: ((512, 9.5), (4096, 8.8), (32768, 8.7), (262144, 12.9), (524288, 17.7), (1048576, 26.6)),
    4: ((512, 9.1), (4096, 8.5), (32768, 9.2), (262144, 20.6), (524288, 26.9), (1048576, 40.2)),
    8: ((512, 10.1), (4096, 9.3), (32768, 11.8), (262144, 24.1), (524288, 30.4), (1048576, 45.0)),
}
VLLM_ALL_REDUCE_SOURCE = (
    "vLLM's custom all-reduce on H100 SXM, 512 B to 1 MB at 2, 4 and 8 GPUs (sgl-project/sglang "
    "pull request 2904); larger messages add their bytes at the NCCL bus bandwidth"
)


def generation_all_reduce_seconds(
    tp: int, message_bytes: float, node: NodeTypeSpec, acc: AcceleratorSpec
) -> float:
    """One all-reduce of `message_bytes` over `tp` GPUs of the node during generation: the
    measured time of vLLM's kernel at that size (log-log between the measured sizes, the
    smallest's below them), and beyond 1 MB the rest at the node's bus bandwidth. On PCIe
    the bytes cross at PCIe's bus bandwidth whatever the size (vLLM's kernel needs NVLink for
    more than two GPUs and NCCL takes over)."""
    if tp <= 1:
        return 0.0
    rows = VLLM_ALL_REDUCE_US[min((d for d in VLLM_ALL_REDUCE_US if d >= tp), default=8)]
    bandwidth, _ = bus_bandwidth(node, acc)
    ring = 2 * (tp - 1) / tp
    size = max(message_bytes, rows[0][0])
    if size >= rows[-1][0]:
        measured = rows[-1][1] * 1e-6 + ring * (size - rows[-1][0]) / bandwidth
    else:
        for (low, low_us), (high, high_us) in zip(rows, rows[1:], strict=False):
            if size <= high:
                share = math.log(size / low) / math.log(high / low)
                measured = low_us * (high_us / low_us) ** share * 1e-6
                break
    if node.intra_node_interconnect == "pcie":
        return max(measured, rows[0][1] * 1e-6 + ring * message_bytes / bandwidth)
    return measured


def generation_collectives_seconds(
    shape: ModelShape,
    wl: Workload,
    tp: int,
    steps: int,
    node: NodeTypeSpec,
    acc: AcceleratorSpec,
    stages: int = 1,
) -> float:
    """Seconds a tensor-parallel group of `tp` GPUs waits in all-reduces while it serves one
    batch of `wl`: every forward pass all-reduces the hidden states twice per layer (after
    attention and after the MLP; Shoeybi et al. 2019), over the tokens of the pass: the
    prompts, in passes of the library's chunk where it chunks prefill (vLLM), then one token
    per sequence for each of the `steps` decoding steps (an encoder-decoder's encoder layers
    read the prompt, its decoder layers decode). Each GPU of a pipeline of `stages` holds, and
    all-reduces for, its stage's layers only."""
    if tp <= 1:
        return 0.0
    per_token = shape.hidden_size * wl.act_bytes
    share = 1 / max(stages, 1)
    # An encoder-decoder's encoder layers read the prompt; its decoder layers generate.
    prompt_layers = shape.encoder_layers if wl.encoder_len else shape.num_layers
    prompt = wl.batch_size * (wl.encoder_len or wl.seq_len)
    chunk = wl.prefill_chunk_tokens or prompt
    full, rest = divmod(prompt, chunk) if chunk else (0, 0)
    seconds = full * generation_all_reduce_seconds(tp, chunk * per_token, node, acc)
    if rest:
        seconds += generation_all_reduce_seconds(tp, rest * per_token, node, acc)
    step = generation_all_reduce_seconds(tp, wl.batch_size * per_token, node, acc)
    return 2 * share * (prompt_layers * seconds + shape.num_layers * steps * step)
