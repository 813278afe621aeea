"""What CPU offload costs in time: ZeRO-3 with the optimizer and the parameters in host memory.

ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840 section 4) keeps the fp32 master weights and
Adam's moments in CPU memory and runs the update there (DeepSpeedCPUAdam); each step the 16-bit
gradients go down the GPU's host link and the updated 16-bit parameters come back. ZeRO-3 with
`offload_param` (DeepSpeed ZeRO-3 Offload docs, ZeRO-Infinity) also keeps the 16-bit parameters
on the CPU, so every forward and every backward pass of every micro-batch fetches them again.
Each data-parallel rank moves and updates only its 1/n shard, over its own PCIe link and with
its share of the node's cores.

The engine adds this time to the GPU compute of the step rather than assuming it hides behind
it: DeepSpeed overlaps the gradient copies with backward, but the CPU step itself sits between
two steps unless the one-step delayed update is turned on, and the parameter fetches are on the
critical path of every layer. This is the upper end of the cost; full activation
checkpointing (+1/3 of the FLOPs) is usually cheaper, and the recipe search compares them in
GPU hours.
"""

from __future__ import annotations

from advisor.engine.constants import Constant

HOST_LINK = Constant(
    "Host link bandwidth (CPU offload)",
    25e9,
    "bytes/s per GPU and direction",
    "PCIe 4.0 x16 is 32 GB/s per direction before protocol overhead; pinned-memory copies reach "
    "about 25 GB/s (DeepSpeed PR #5301 moved the offload copies to pinned memory for a 4-6x "
    "speed-up over pageable copies)",
    "offloaded gradients and parameters cross each GPU's PCIe link every step",
)
CPU_ADAM_PARAMS_PER_CORE = Constant(
    "DeepSpeedCPUAdam update rate",
    1.5e7,
    "parameters per second per CPU core",
    "DeepSpeed PR #7474: Qwen2.5-3B fine-tuned on 2 x A100-40GB with ZeRO offload on a "
    "128-core host takes 2.38 s per step with cores bound to ranks, most of it in CPUAdam: "
    "about 1.5e9 parameters per rank on 64 cores in at most ~1.6 s (2/3 of the step)",
    "the optimizer step runs on the CPU cores that serve each GPU",
)
CORES_PER_GPU_DEFAULT = Constant(
    "CPU cores per GPU (unknown node)",
    8,
    "cores",
    "a node type without a core count in the catalog: 8 per GPU, fewer than the 12-24 of the "
    "catalog's GPU nodes (the slower end for the CPU optimizer step)",
    "the CPU optimizer step shares the node's cores between its GPUs",
)
# Bytes per parameter that cross the host link: 16-bit gradients down and 16-bit parameters
# up once per step; with offloaded parameters, a 16-bit fetch for every forward and backward.
_STEP_BYTES = 2 + 2
_FETCH_BYTES_PER_MICRO_STEP = 2 * 2


def seconds_per_step(
    trainable_params: float,
    stored_params: float,
    data_parallel: int,
    accumulation: int,
    cores_per_gpu: float,
) -> float:
    """Seconds one step spends moving data over the host link and updating on the CPU,
    beyond the GPU's compute: each rank moves and updates its 1/data_parallel shard of the
    trainable parameters and fetches its shard of all `stored_params` for every forward and
    backward pass."""
    ranks = max(data_parallel, 1)
    trainable, stored = trainable_params / ranks, stored_params / ranks
    transfer = trainable * _STEP_BYTES + stored * _FETCH_BYTES_PER_MICRO_STEP * max(accumulation, 1)
    update = trainable / (CPU_ADAM_PARAMS_PER_CORE.value * max(cores_per_gpu, 1))
    return transfer / HOST_LINK.value + update


def cores_per_gpu(cpu_cores: int | None, gpus_per_node: int) -> float:
    if not cpu_cores:
        return CORES_PER_GPU_DEFAULT.value
    return cpu_cores / max(gpus_per_node, 1)


def host_bytes_per_node(offloaded: float, gpus: int, gpus_per_node: int) -> float:
    """Host memory one node needs for the offloaded states: the whole model's `offloaded`
    bytes (16-bit parameters, gradients, optimizer states and master weights; ZeRO-Offload
    section 4 keeps all of them in CPU memory) split over the job's GPUs, as many shards per
    node as the node serves."""
    gpus = max(gpus, 1)
    return offloaded * min(gpus, max(gpus_per_node, 1)) / gpus
