"""What the parallel layout costs at scale: communication and pipeline time per optimizer step.

The utilisation in speed.py is what one GPU reaches on its own work (the catalog's
measurements come from single-node or well-overlapped runs). Spreading a job over N GPUs adds
time that no single-GPU figure contains; this module puts a number on it per optimizer step and
returns the fraction of the step the GPUs compute (`LayoutCost.efficiency`):

- **Data-parallel gradient exchange.** A ring all-reduce moves 2(N-1)/N x the gradient bytes
  through every GPU (NCCL's bus bandwidth, nccl-tests doc/PERFORMANCE.md); ZeRO-3 / FSDP
  all-gathers the 16-bit parameters for the forward and again for the backward pass and
  reduce-scatters the gradients, 3 x (N-1)/N x the bytes (Rajbhandari et al. 2020, ZeRO,
  arXiv:1910.02054 section 7.2.2: 1.5x the traffic of data parallelism), once per micro-batch.
  Across nodes NCCL runs one ring per NIC, so the time is set by the node's aggregate link
  (`inter_node_gbit_s` in the catalog is per node) and within a node by NVLink or PCIe;
  chunks are pipelined through both, so the slower of the two sets the time.
- **Overlap.** PyTorch DDP launches each gradient bucket's all-reduce as soon as backward has
  produced it (PyTorch 'Distributed Data Parallel' design note; Li et al. 2020, VLDB,
  arXiv:2006.15704), so the exchange hides behind the backward pass and only the part longer
  than backward is exposed; ZeRO-3 / FSDP prefetch the next layer's parameters during the
  forward pass as well, so their window is the whole micro-batch.
- **DeepSpeed ZeRO-2** keeps only its partition of the gradients, so it reduces every
  micro-batch's gradients, not only the last one's ("ZeRO stage 2 communicates during non
  gradient accumulation boundaries as well", deepspeed/runtime/engine.py
  allreduce_gradients), as all-reduces of its gradient buckets from which each rank keeps its
  part (stage_1_and_2.py average_tensor: allreduce_and_scatter with
  use_multi_rank_bucket_allreduce, on by default), and all-gathers the updated 16-bit
  parameters "at the end of each step" (zero_optimization.allgather_partitions, DeepSpeed
  config docs), after the optimizer step. Below stage 3 `overlap_comm` is off unless the
  config turns it on (deepspeed/runtime/zero/config.py overlap_comm_valid) and the reduction
  then runs on the compute stream: the starter script's config (zero_optimization.stage = 2,
  LLaMA-Factory's ds_z2_config.json too) leaves it off, so none of it is hidden.
- **Tensor parallelism** (within a node): Megatron-LM all-reduces the activations twice in the
  forward and twice in the backward pass of every layer (Shoeybi et al. 2019,
  arXiv:1909.08053 section 3), b x s x h 16-bit values each, on the critical path.
- **Pipeline parallelism**: a bubble of (p-1)/m of the compute with p stages and m
  micro-batches per step (Narayanan et al. 2021, arXiv:2104.04473 section 2.2.1).

The compute per step follows from the GLOBAL batch (request `batch_size`, in sequences):
global batch x sequence length x FLOPs per token / (N x achieved FLOP/s per GPU).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from advisor.engine.models import Assumption, NodeTypeSpec

# Line rates per GPU and direction, GB/s. NVLink: NVIDIA V100, A100 and H100 datasheets (300,
# 600 and 900 GB/s both directions together); PCIe 4.0 x16: 32 GB/s per direction (PCI-SIG).
NVLINK_GB_S = {"volta": 150.0, "ampere": 300.0, "hopper": 450.0}
NVLINK_DEFAULT_GB_S = 300.0  # a chip the table does not name: the A100's NVLink 3
PCIE_GB_S = 32.0
# Inter-node link per node when the catalog gives no rate: one port of the link's common
# generation (HDR InfiniBand 200 Gbit/s, Omni-Path 100 Gbit/s, 25 GbE, 10 GbE without a fabric).
INTER_NODE_DEFAULT_GBIT_S = {
    "infiniband": 200.0,
    "omnipath": 100.0,
    "ethernet": 25.0,
    "slingshot": 200.0,
    "none": 10.0,
}
# Fraction of a link's line rate a large NCCL transfer reaches: 195 GB/s of 300 on eight A100s
# over NVLink (nccl-tests sendrecv_perf, 1 GiB messages; li-plus/playground cuda/nccl.md).
LINK_EFFICIENCY = 0.65
SHARDED = ("zero3", "fsdp", "zero3_offload")

# Waiting for the slowest rank. Every optimizer step ends in a collective that waits for the
# slowest of the N ranks; with per-rank step times spread by a fraction sigma of the step, the
# expected slowest of N is about (1 + sigma x sqrt(2 ln N)) x the mean (the extreme-value bound
# for N normal variables). sigma is fitted on llm-foundry's own scaling: five pairs of its
# throughput rows, one model on few and on many GPUs (MPT-3B 8 -> 64, 7B 8 -> 128, 13B 8 -> 64,
# 30B 8 -> 128, 70B 64 -> 128), four of which also move from the A100 80GB to the 40GB card;
# fitted jointly with a free factor for that card change, least squares on log MFU
# (scripts/fit_scale_sync.py: sigma 0.0049, card factor 0.95, residuals within 4 %). Fitted
# on sigma alone, the card change would be read as scale (0.051); the one same-card pair (MPT-7B
# on 8 and 128 A100 40GB, 50.9 % and 50.1 % MFU) alone gives 0.015. No run-total point was used.
SYNC_SPREAD = 0.0049
# Interruptions and restarts: Llama 3 (arXiv:2407.21783 section 3.3.4) had 466 job
# interruptions in a 54-day snapshot of pre-training on 16,384 H100s, with more than 90 %
# effective training time: a rate of 466 / (54 x 24 h x 16,384) per GPU-hour, and at most
# 10 % of 54 days over 466 interruptions, 0.28 h, lost per interruption (restart, lost steps).
INTERRUPTIONS_PER_GPU_HOUR = 466 / (54 * 24 * 16384)
HOURS_LOST_PER_INTERRUPTION = 0.1 * 54 * 24 / 466
SCALE_SOURCES = (
    "waiting for the slowest rank, (1 + s sqrt(2 ln N)) x the step, s = 0.0049 fitted on five "
    "pairs of llm-foundry's throughput rows (one model on 8-64 and 64-128 A100s; "
    "scripts/fit_scale_sync.py); interruptions at Llama 3's rate (466 in 54 days on 16,384 "
    "H100s, arXiv:2407.21783 section 3.3.4) costing 0.28 h each (>90 % effective time)"
)

SOURCES = (
    "ring all-reduce 2(N-1)/N x bytes (nccl-tests doc/PERFORMANCE.md); ZeRO-3/FSDP 3 x (N-1)/N "
    "x the 16-bit parameters per micro-batch (ZeRO, arXiv:1910.02054 section 7.2.2); DeepSpeed "
    "ZeRO-2 all-reduces each micro-batch's gradient buckets and all-gathers the parameters at "
    "the end of each step, on the compute stream without overlap_comm (deepspeed/runtime/"
    "engine.py allreduce_gradients, zero/stage_1_and_2.py average_tensor, zero/config.py); "
    "overlap with backward (PyTorch DDP design note; Li et al. 2020, arXiv:2006.15704); tensor "
    "parallelism 4 activation all-reduces per layer (Megatron-LM, arXiv:1909.08053 section 3); "
    "pipeline bubble (p-1)/m (arXiv:2104.04473 section 2.2.1); NVLink and PCIe line rates from "
    "the NVIDIA datasheets and PCI-SIG, at 65 % of the line rate (nccl-tests on eight A100s: "
    "195 of 300 GB/s)"
)


@dataclass(frozen=True, slots=True)
class Links:
    intra_gb_s: float  # per GPU and direction, achieved
    inter_node_gb_s: float  # per node and direction, achieved


def links(node: NodeTypeSpec, accelerator: str) -> Links:
    """The achieved bandwidths of a node type, from the catalog's interconnect data."""
    return _links(
        node.intra_node_interconnect,
        node.inter_node_interconnect,
        node.inter_node_gbit_s,
        accelerator.lower(),
    )


@functools.lru_cache(maxsize=256)
def _links(intra_link: str, inter_link: str, gbit: float | None, name: str) -> Links:
    if intra_link == "nvlink":
        family = next(
            (
                fam
                for fam, keys in (
                    ("hopper", ("h100", "h200", "gh200")),
                    ("ampere", ("a100", "a800")),
                    ("volta", ("v100",)),
                )
                if any(k in name for k in keys)
            ),
            None,
        )
        intra = NVLINK_GB_S.get(family, NVLINK_DEFAULT_GB_S) if family else NVLINK_DEFAULT_GB_S
    else:
        # PCIe, and fabrics the catalog gives no rate for (Xe Link, Infinity Fabric): PCIe
        # 4.0 x16, the slowest path two GPUs of a node share.
        intra = PCIE_GB_S
    gbit = gbit or INTER_NODE_DEFAULT_GBIT_S.get(inter_link, 10.0)
    return Links(intra * LINK_EFFICIENCY, gbit / 8 * LINK_EFFICIENCY)


def collective_seconds(volume: float, nbytes: float, n: int, per_node: int, link: Links) -> float:
    """Time for a ring collective that moves `volume` x (n-1)/n x `nbytes` through each GPU
    (2 for an all-reduce, 1 for an all-gather or a reduce-scatter)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    gpn = max(min(per_node, n), 1)
    within = volume * (gpn - 1) / gpn * nbytes / link.intra_gb_s / 1e9 if gpn > 1 else 0.0
    nodes = -(-n // gpn)
    if nodes <= 1:
        return within
    # Each node sends its share of the bytes across: the ring per NIC shares the node's link.
    across = volume * (nodes - 1) / nodes * nbytes / link.inter_node_gb_s / 1e9
    return max(within, across)


def straggler_wait(n: int) -> float:
    """Expected wait for the slowest of `n` ranks, as a fraction of the mean step."""
    return SYNC_SPREAD * math.sqrt(2 * math.log(n)) if n > 1 else 0.0


def interruption_goodput(n: int) -> float:
    """Share of the wall time an `n`-GPU job trains between interruptions and restarts."""
    return 1 / (1 + INTERRUPTIONS_PER_GPU_HOUR * n * HOURS_LOST_PER_INTERRUPTION)


def scale_efficiency(n: int, measured_n: int) -> float:
    """Share of the measured speed an `n`-GPU job keeps: the measurement on `measured_n` GPUs
    already waited for its own slowest rank, so only the extra wait of more ranks is charged
    (a job on fewer GPUs is not credited beyond the measurement); interruptions are charged
    in full, a throughput measurement contains none. 512 GPUs against one node: about 0.7 %
    and 0.3 %; 16,384: 1.1 % and 9 %."""
    sync = (1 + straggler_wait(max(measured_n, 1))) / (1 + straggler_wait(max(n, 1)))
    return min(sync, 1.0) * interruption_goodput(n)


def pipeline_bubble(stages: int, micro_batches: int) -> float:
    """Idle fraction of the compute time with a 1F1B schedule: (p-1)/m."""
    if stages <= 1:
        return 0.0
    return (stages - 1) / max(micro_batches, 1)


def tensor_parallel_seconds(
    tp: int, layers: int, micro: int, seq_len: int, hidden: int, link: Links, recompute: bool
) -> float:
    """Activation all-reduces of one micro-batch: 2 forward + 2 backward per layer (and 2 more
    when the forward pass is recomputed), each of micro x seq x hidden 16-bit values."""
    if tp <= 1:
        return 0.0
    count = (6 if recompute else 4) * layers
    one = collective_seconds(2, micro * seq_len * hidden * 2, tp, tp, link)
    return count * one


@dataclass(frozen=True, slots=True)
class LayoutCost:
    compute_s: float  # per optimizer step, per GPU
    exchange_s: float  # data-parallel gradient / parameter traffic per step
    exposed_s: float  # the part of it not hidden behind compute
    tensor_parallel_s: float
    bubble_s: float

    @property
    def efficiency(self) -> float:
        total = self.compute_s + self.exposed_s + self.tensor_parallel_s + self.bubble_s
        return self.compute_s / total if total > 0 else 1.0


def training_layout_cost(
    *,
    params: float,
    grad_bytes_per_param: float,
    weight_bytes: float | None = None,
    strategy: str,
    n: int,
    node: NodeTypeSpec,
    accelerator: str,
    global_batch: int,
    micro: int,
    seq_len: int,
    flops_per_token: float,
    achieved_flops: float,
    layers: int,
    hidden: int,
    recompute: bool,
    tp: int = 1,
    pp: int = 1,
    tp_collectives: bool = True,
) -> LayoutCost:
    """Time per optimizer step of one layout (see the module docstring). `params` are the
    trainable parameters (what the gradient exchange moves); `weight_bytes` what ZeRO-3 / FSDP
    gathers (every stored weight, frozen ones too; None: 2 bytes per trainable parameter);
    `achieved_flops` per GPU. `tp_collectives` False: the tensor-parallel all-reduces are
    priced elsewhere (the training options use tensor_parallel.py's model)."""
    link = links(node, accelerator)
    dp = max(n // max(tp * pp, 1), 1)
    compute = global_batch * seq_len * flops_per_token / (max(n, 1) * max(achieved_flops, 1.0))
    micro_batches = max(global_batch // max(micro * dp, 1), 1)
    exchange = exposed = 0.0
    if dp > 1 and strategy != "tensor_parallel":
        per_node = max(node.gpus_per_node // max(tp, 1), 1)
        shard = params / max(tp * pp, 1)
        gathered = None if weight_bytes is None else weight_bytes / max(tp * pp, 1)
        unit = exchange_seconds(strategy, shard, grad_bytes_per_param, gathered, dp, per_node, link)
        exchange, exposed = exchange_and_exposed(strategy, unit, compute, micro_batches, recompute)
    tensor = 0.0
    if tp > 1 and tp_collectives:
        per_micro_tp = tensor_parallel_seconds(tp, layers // max(pp, 1), micro, seq_len, hidden,
                                               link, recompute)  # fmt: skip
        tensor = per_micro_tp * micro_batches
    bubble = compute * pipeline_bubble(pp, micro_batches)
    return LayoutCost(compute, exchange, exposed, tensor, bubble)


def exchange_seconds(
    strategy: str,
    params: float,
    grad_bytes_per_param: float,
    gathered_bytes: float | None,
    dp: int,
    per_node: int,
    link: Links,
) -> tuple[float, float]:
    """Data-parallel traffic as (seconds per micro-batch, seconds per optimizer step): ZeRO-3 /
    FSDP gather the weights twice and reduce-scatter the gradients every micro-batch; DeepSpeed
    ZeRO-2 all-reduces every micro-batch's gradients and all-gathers the parameters (in the
    gradients' type) once a step; DDP and a tensor-parallel layout's ZeRO-1 all-reduce the
    gradients once a step."""
    grads = params * grad_bytes_per_param
    if strategy in SHARDED:
        gathered = params * 2 if gathered_bytes is None else gathered_bytes
        micro = collective_seconds(2, gathered, dp, per_node, link) + collective_seconds(
            1, grads, dp, per_node, link
        )
        return micro, 0.0
    all_reduce = collective_seconds(2, grads, dp, per_node, link)
    if strategy == "zero2":
        return all_reduce, collective_seconds(1, grads, dp, per_node, link)
    return 0.0, all_reduce


def exchange_and_exposed(
    strategy: str,
    unit: tuple[float, float],
    compute: float,
    micro_batches: int,
    recompute: bool,
) -> tuple[float, float]:
    """(exchange per step, the part of it no computation hides)."""
    per_micro, per_step = unit
    if strategy in SHARDED:
        # Prefetched during the whole micro-batch, forward and backward.
        exchange = per_micro * micro_batches
        return exchange, max(per_micro - compute / micro_batches, 0.0) * micro_batches
    if strategy == "zero2":
        # On the compute stream (overlap_comm off): every byte waits (module docstring).
        exchange = per_micro * micro_batches + per_step
        return exchange, exchange
    # The backward pass is 2/3 of the step's matmul FLOPs (4N of 6N; 6N of 8N with the forward
    # recomputed); only the last micro-batch's backward overlaps (DDP no_sync before it).
    backward = compute * (0.75 if recompute else 2 / 3)
    return per_step, max(per_step - backward / micro_batches, 0.0)


class StepModel:
    """Per estimate: `efficiency` of many options in a few operations, the bandwidth terms
    worked out once per node shape, GPU count and strategy. The same figures as
    `training_layout_cost` (a test compares them), without the parts."""

    __slots__ = ("params", "grad_bytes", "ddp_grad_bytes", "split_grad_bytes", "weight_bytes",
                 "seq_len", "layers", "hidden", "units")  # fmt: skip

    def __init__(
        self,
        *,
        params: float,
        grad_bytes: float,
        ddp_grad_bytes: float,
        weight_bytes: float | None,
        seq_len: int,
        layers: int,
        hidden: int,
        split_grad_bytes: float | None = None,
    ) -> None:
        self.params, self.grad_bytes, self.ddp_grad_bytes = params, grad_bytes, ddp_grad_bytes
        self.split_grad_bytes = grad_bytes if split_grad_bytes is None else split_grad_bytes
        self.weight_bytes, self.seq_len = weight_bytes, seq_len
        self.layers, self.hidden = layers, hidden
        self.units: dict[tuple, tuple[float, float]] = {}

    def grad_bytes_for(self, strategy: str, tp: int = 1) -> float:
        """Bytes per parameter the data-parallel exchange reduces: a tensor-parallel layout's
        (Megatron's main_grad), else the strategy's."""
        if tp > 1:
            return self.split_grad_bytes
        return self.ddp_grad_bytes if strategy == "ddp" else self.grad_bytes

    def efficiency(
        self,
        node: NodeTypeSpec,
        accelerator: str,
        n: int,
        strategy: str,
        *,
        global_batch: int,
        micro: int,
        flops_per_token: float,
        achieved_flops: float,
        recompute: bool,
        tp: int = 1,
    ) -> float:
        """Share of the step the GPUs compute, the data-parallel exchange waited for; with `tp`
        the exchange runs over n / tp ranks, each holding 1 / tp of the parameters."""
        dp = n // max(tp, 1)
        if dp <= 1:
            return 1.0
        # Node types are frozen and outlive the estimate this model belongs to: their identity
        # names their links.
        key = (id(node), accelerator, n, strategy, tp)
        unit = self.units.get(key)
        if unit is None:
            gathered = None if self.weight_bytes is None else self.weight_bytes / tp
            unit = self.units[key] = exchange_seconds(
                strategy,
                self.params / tp,
                self.grad_bytes_for(strategy, tp),
                gathered,
                dp,
                max(node.gpus_per_node // tp, 1),
                links(node, accelerator),
            )
        compute = global_batch * self.seq_len * flops_per_token / (n * max(achieved_flops, 1.0))
        micro_batches = max(global_batch // max(micro * dp, 1), 1)
        waited = exchange_and_exposed(strategy, unit, compute, micro_batches, recompute)[1]
        return compute / (compute + waited) if compute + waited > 0 else 1.0


def describe(cost: LayoutCost, strategy: str, n: int) -> str:
    """One line for the result: what the layout costs per step."""
    if n <= 1:
        return "one GPU: no communication"
    parts = [f"compute {cost.compute_s:.2f} s per optimizer step"]
    if cost.exchange_s:
        hidden = cost.exchange_s - cost.exposed_s
        parts.append(
            f"{'parameter and gradient' if strategy in (*SHARDED, 'zero2') else 'gradient'} "
            f"exchange {cost.exchange_s:.2f} s, {hidden:.2f} s of it hidden behind compute"
        )
    if cost.tensor_parallel_s:
        parts.append(f"tensor-parallel all-reduces {cost.tensor_parallel_s:.2f} s")
    if cost.bubble_s:
        parts.append(f"pipeline bubble {cost.bubble_s:.2f} s")
    return "; ".join(parts) + f": {cost.efficiency:.0%} of the time computing"


def describe_scale(n: int, measured_n: int) -> str:
    """The wait for the slowest rank and the interruptions, for the result's line."""
    lost = 1 - scale_efficiency(n, measured_n)
    if n <= 1 or lost < 0.0005:
        return ""
    return (
        f"; waiting for the slowest of {n} ranks (the measurement ran on {measured_n}) and "
        f"restarts after interruptions add {lost / (1 - lost):.1%}"
    )


def assumption(detail: str = "") -> Assumption:
    value = (
        "data-parallel exchange against the compute of each optimizer step (global batch), "
        "hidden behind the backward pass where it fits (DeepSpeed ZeRO-2: every micro-batch's "
        "gradients and the step's parameter gather, none of it hidden: overlap_comm off, "
        "DeepSpeed's default below stage 3); tensor-parallel all-reduces and the "
        "pipeline bubble on top, with the measurement's own tensor-parallel all-reduces "
        "removed when it ran under tensor parallelism; then the wait for the slowest rank "
        "beyond the measurement's GPU count and interruptions with restarts"
    )
    if detail:
        value += f"; recommended option: {detail}"
    return Assumption.model_construct(
        name="Parallel layout", value=value, source=f"{SOURCES}; {SCALE_SOURCES}"
    )
