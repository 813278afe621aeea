"""Where a job may run: the GPU counts, strategies and partitions tried for each node type, and
the system-level reasons an option is ruled out. The ranking (recommend.py) generates its
candidates from these."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine.frameworks import Framework
from advisor.engine.memory import Workload
from advisor.engine.models import EstimateRequest, NodeTypeSpec, PartitionSpec, SystemSpec
from advisor.engine.words import STRATEGY_NAMES

TRAINING_STRATEGIES = ("single", "ddp", "zero2", "zero3", "zero3_offload")
# Tensor x data parallel, for libraries that train with tensor parallelism: tried before
# offload, which is tried only when nothing on the GPUs fits (recommend.node_options).
WITH_TENSOR_PARALLEL = ("single", "ddp", "zero2", "zero3", "tensor_parallel", "zero3_offload")

# How much a researcher must set up and debug for each strategy; breaks ties in the ranking.
STRATEGY_COMPLEXITY = {
    "single": 0,
    "ddp": 1,
    "zero1": 2,
    "zero2": 3,
    "fsdp": 4,
    "zero3": 4,
    "tensor_parallel": 5,
    "pipeline_parallel": 6,
    "zero3_offload": 6,
}


def counts_for(node: NodeTypeSpec, partition: PartitionSpec | None, limit: int | None) -> list[int]:
    """GPU counts a job may ask for: powers of two within a node, then whole nodes."""
    gpn = max(node.gpus_per_node, 1)
    # A cloud VM size with count 0 is on demand: as many nodes as the job limits allow.
    max_nodes = node.count if node.count > 0 else c.MAX_GPUS_SEARCHED
    max_gpus = c.MAX_GPUS_SEARCHED
    if partition is not None:
        if partition.max_nodes_per_job:
            max_nodes = min(max_nodes, partition.max_nodes_per_job)
        if partition.max_gpus_per_job:
            max_gpus = min(max_gpus, partition.max_gpus_per_job)
    if limit is not None:
        max_gpus = min(max_gpus, limit)
    counts = []
    n = 1
    while n < gpn:
        counts.append(n)
        n *= 2
    counts.append(gpn)
    nodes = 2
    while nodes <= max_nodes and nodes * gpn <= max_gpus:
        counts.append(nodes * gpn)
        nodes = nodes * 2 if nodes >= 4 else nodes + 1
    return [k for k in counts if k <= max_gpus] or [1]


def strategies_for(
    request: EstimateRequest,
    wl: Workload,
    system: SystemSpec,
    tensor_parallel: bool = False,
    library: Framework | None = None,
) -> list[tuple[str, str | None]]:
    """(strategy, why it is unavailable or None). `tensor_parallel`: the library trains with
    tensor parallelism and the researcher did not rule it out. `library`: the training
    library; one without ZeRO / FSDP (Megatron-LM, `Framework.data_parallel`) is not offered
    them, and says so when one is asked for."""
    if wl.task == "inference":
        # vLLM also splits a model into pipeline stages within a node: where its GPUs talk over
        # PCIe that skips the all-reduces (serving_options.py; node_options tries it there).
        if request.framework == "vllm":
            return [("single", None), ("tensor_parallel", None), ("pipeline_parallel", None)]
        return [("single", None), ("tensor_parallel", None)]
    tooling = system.tooling
    deepspeed = tooling.get("deepspeed", tooling.get("DeepSpeed"))
    fsdp = tooling.get("fsdp", tooling.get("FSDP"))
    if (request.tensor_parallel or 1) > 1 or (request.pipeline_parallel or 1) > 1:
        wanted = ["tensor_parallel"]  # a pinned degree: tensor x data parallel only
    elif request.strategy is not None:
        wanted = [request.strategy]
        if request.num_gpus in (None, 1):
            wanted = ["single", *wanted]
    else:
        wanted = list(WITH_TENSOR_PARALLEL if tensor_parallel else TRAINING_STRATEGIES)
        if deepspeed is False and fsdp is not False:
            wanted = [("fsdp" if s == "zero3" else s) for s in wanted if s != "zero3_offload"]
        if request.num_gpus not in (None, 1):
            # A pinned multi-GPU count rules out a one-GPU job (as a pinned strategy does).
            wanted = [s for s in wanted if s != "single"]
    offered = None if library is None else library.data_parallel
    if offered is not None and request.strategy is None:
        if "fsdp" in offered and "zero3" not in offered:
            # A library that shards with FSDP only (torchtune): its full sharding in ZeRO-3's
            # place.
            wanted = ["fsdp" if s == "zero3" else s for s in wanted]
        wanted = [s for s in wanted if s in offered or s == "tensor_parallel"]
    out = []
    for strategy in wanted:
        why = None
        if offered is not None and strategy not in offered and strategy != "tensor_parallel":
            why = f"{library.name} has no {STRATEGY_NAMES.get(strategy, strategy)}"
            why += f" ({library.shards_instead})"
        if strategy.startswith("zero") and deepspeed is False:
            why = f"DeepSpeed is not supported on {system.display_name}"
        if strategy == "fsdp" and fsdp is False:
            why = f"FSDP is not supported on {system.display_name}"
        if wl.reference_precomputed and strategy in ("zero3", "zero3_offload"):
            # DPOTrainer: "You cannot use `precompute_ref_log_probs=True` with Deepspeed ZeRO-3".
            why = "the reference log-probabilities cannot be precomputed under DeepSpeed ZeRO-3"
        out.append((strategy, why))
    return out


def partitions_by_node(system: SystemSpec) -> dict[str, PartitionSpec]:
    """Node type name -> the partition with the longest wall time (then the most GPUs per job)
    that has it; on a tie the first listed. One pass over the partitions."""
    best: dict[str, PartitionSpec] = {}
    keys: dict[str, tuple[float, int]] = {}
    for part in system.partitions:
        key = (part.max_wall_hours or 0, part.max_gpus_per_job or 0)
        for name in part.node_types:
            if name not in keys or key > keys[name]:
                best[name], keys[name] = part, key
    return best


def system_rejections(request: EstimateRequest, system: SystemSpec) -> list[str]:
    cons = request.constraints
    reasons = []
    if system.status == "retired":
        first = system.status_note.split(". ")[0].rstrip(".")
        note = f" ({first})" if first else ""
        reasons.append(f"{system.display_name} is retired{note}.")
    if cons.data_sensitivity not in system.data_sensitivity:
        reasons.append(
            f"{system.display_name} is not approved for {cons.data_sensitivity} data "
            f"(allowed: {', '.join(system.data_sensitivity)})."
        )
    if cons.needs_notebooks and not system.notebooks:
        reasons.append(f"{system.display_name} has no notebooks (batch only).")
    if cons.needs_cloud is True and system.kind != "cloud":
        reasons.append(f"{system.display_name} is not a cloud service.")
    if cons.needs_cloud is False and system.kind == "cloud":
        reasons.append(f"{system.display_name} is cloud, and cloud was ruled out.")
    if cons.systems is not None and system.name not in cons.systems:
        reasons.append(f"{system.display_name} is not among the systems you can use.")
    if request.system is not None and system.name != request.system:
        reasons.append(f"You asked for {request.system}.")
    return reasons


def pipeline_stages(node: NodeTypeSpec, n: int, strategy: str) -> int:
    """Pipeline stages of an inference replica over `n` GPUs: one per whole node when it spans
    nodes (vLLM's tensor parallel within a node, pipeline parallel across), one per GPU under
    "pipeline_parallel" (vLLM within a node whose GPUs talk over PCIe), else 1."""
    if strategy == "pipeline_parallel":
        return n
    per_node = node.gpus_per_node
    if strategy == "tensor_parallel" and n > per_node and n % per_node == 0:
        return n // per_node
    return 1
