"""Try every active system / accelerator / strategy in the catalog and rank what fits.

For each node type the search finds the smallest GPU count that fits with headroom under each
strategy; memory per GPU never grows with more GPUs, so a binary search over the allowed
counts is enough. Rejections keep their numbers and say why in plain words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.engine import constants as c
from advisor.engine.compute import (
    Utilisation,
    compute_dtype_for,
    default_utilisation,
    inference_gpu_hours,
    peak_tflops,
    scaling_efficiency,
    training_flops_per_token,
    training_gpu_hours,
)
from advisor.engine.memory import MemoryModel, Workload
from advisor.engine.models import (
    AcceleratorSpec,
    EstimateRequest,
    MemoryBreakdown,
    NodeTypeSpec,
    Option,
    PartitionSpec,
    SystemSpec,
)
from advisor.engine.shape import ModelShape

TRAINING_STRATEGIES = ("single", "ddp", "zero2", "zero3", "zero3_offload")
SENSITIVITY_ORDER = ("public", "internal", "confidential", "restricted")


def trusted(cls, values: dict):
    """Build a pydantic model from values the engine computed itself, every field present.

    Equivalent to `cls.model_construct(**values)` without its per-field default lookup: the
    ranking builds a hundred of these per estimate, and validation would only re-check our own
    arithmetic. Results still round-trip through `model_validate_json` (tested).
    """
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"


@dataclass(slots=True)
class Candidate:
    fields: dict  # Option's fields; the Option itself is built once ranked
    eligible: bool
    headroom: bool
    queue: float
    sort_cost: float
    partition: PartitionSpec | None
    system: SystemSpec
    node: NodeTypeSpec
    accelerator: AcceleratorSpec
    compute_dtype: str | None
    slow: bool = False  # wall time beyond the target even on the most GPUs tried
    notes: list[str] = field(default_factory=list)
    option: Option | None = None


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
    request: EstimateRequest, wl: Workload, system: SystemSpec
) -> list[tuple[str, str | None]]:
    """(strategy, why it is unavailable or None)."""
    if wl.task == "inference":
        return [("single", None), ("tensor_parallel", None)]
    tooling = system.tooling
    deepspeed = tooling.get("deepspeed", tooling.get("DeepSpeed"))
    fsdp = tooling.get("fsdp", tooling.get("FSDP"))
    if request.strategy is not None:
        wanted = [request.strategy]
        if request.num_gpus in (None, 1):
            wanted = ["single", *wanted]
    else:
        wanted = list(TRAINING_STRATEGIES)
        if deepspeed is False and fsdp is not False:
            wanted = [("fsdp" if s == "zero3" else s) for s in wanted if s != "zero3_offload"]
    out = []
    for strategy in wanted:
        why = None
        if strategy.startswith("zero") and deepspeed is False:
            why = f"DeepSpeed is not supported on {system.display_name}"
        if strategy == "fsdp" and fsdp is False:
            why = f"FSDP is not supported on {system.display_name}"
        out.append((strategy, why))
    return out


def partition_for(system: SystemSpec, node: NodeTypeSpec) -> PartitionSpec | None:
    matches = [p for p in system.partitions if node.name in p.node_types]
    if not matches:
        return None
    return max(matches, key=lambda p: (p.max_wall_hours or 0, p.max_gpus_per_job or 0))


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


def evaluate(
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    systems: list[SystemSpec],
    accelerators: dict[str, AcceleratorSpec],
    utilisation: dict[tuple[str, bool], Utilisation],
) -> list[Candidate]:
    tokens = None
    if request.tokens is not None:
        tokens = request.tokens * (request.epochs if wl.training else 1)
    limit = request.constraints.max_gpus
    if request.num_gpus is not None:
        limit = request.num_gpus if limit is None else min(limit, request.num_gpus)
    candidates: list[Candidate] = []
    # Memory per GPU depends on the strategy and the GPU count only, not on the system.
    cache: dict[tuple[str, int], tuple[dict[str, int], MemoryBreakdown]] = {}
    model = MemoryModel(shape, wl)

    def memory(strategy: str, n: int) -> tuple[dict[str, int], MemoryBreakdown]:
        key = (strategy, n)
        found = cache.get(key)
        if found is None:
            parts = model.per_gpu(strategy, n)
            found = cache[key] = (parts, trusted(MemoryBreakdown, dict(parts)))
        return found

    totals: dict[tuple[str, int], int] = {}
    sized: dict[tuple[str, tuple[int, ...], int], tuple[int | None, int | None]] = {}

    def sizing(strategy: str, allowed: tuple[int, ...], capacity: int):
        """(smallest count that fits, smallest that fits with the margin to spare).

        Memory per GPU never grows with the count, so the scan stops at the first count with
        the margin to spare.
        """
        key = (strategy, allowed, capacity)
        found = sized.get(key)
        if found is not None:
            return found
        limit = capacity / (1 + c.MEMORY_MARGIN.value)
        n_fit = n_head = None
        for k in allowed:
            total = totals.get((strategy, k))
            if total is None:
                total = totals[(strategy, k)] = memory(strategy, k)[0]["total_bytes"]
            if n_fit is None and total <= capacity:
                n_fit = k
            if total <= limit:
                n_head = k
                break
        sized[key] = (n_fit, n_head)
        return n_fit, n_head

    sizing.peaks = {}
    sizing.flops_per_token = training_flops_per_token(shape, wl) if wl.training else None
    max_wall = request.constraints.max_wall_hours
    sizing.target_wall_hours = (
        max_wall / (1 + c.CONTINGENCY.value) if max_wall else c.TARGET_WALL_HOURS.value
    )

    for system in systems:
        sys_reasons = system_rejections(request, system)
        for node in system.node_types:
            acc = accelerators.get(node.accelerator)
            if acc is None:
                continue
            node_reasons = list(sys_reasons)
            if node.status == "retired":
                node_reasons.append(f"{node.name} on {system.display_name} is retired.")
            if request.accelerator is not None and acc.name != request.accelerator:
                node_reasons.append(f"You asked for {request.accelerator}.")
            dtype = compute_dtype_for(acc, wl)
            if dtype is None:
                node_reasons.append(
                    f"no {wl.compute_dtype} on {acc.display_name}"
                    + (" (use fp16)." if wl.compute_dtype == "bf16" else ".")
                )
            partition = partition_for(system, node)
            counts = counts_for(node, partition, limit)
            if request.num_gpus is not None:
                counts = [k for k in counts if k == request.num_gpus] or [request.num_gpus]
            capacity = int(acc.memory_gb * 1e9)
            util = utilisation.get((acc.name, wl.training)) or default_utilisation(wl, acc)
            single_fits = fits_elsewhere = False
            for strategy, unavailable in strategies_for(request, wl, system):
                allowed = _allowed(strategy, counts, node)
                if not allowed and strategy != "single":
                    continue  # e.g. multi-GPU strategies where a job gets one GPU: not tried
                # Tensor parallelism when one GPU is enough, and CPU offload when an on-GPU
                # strategy fits, would never rank first: not tried unless asked for.
                if request.strategy is None and (
                    (strategy == "tensor_parallel" and single_fits)
                    or (strategy == "zero3_offload" and fits_elsewhere)
                ):
                    continue
                reasons = list(node_reasons)
                if unavailable:
                    reasons.append(unavailable + ".")
                cand = _size(
                    request, shape, wl, system, node, acc, partition, strategy, counts,
                    capacity, dtype, util, tokens, reasons, memory, sizing, allowed,
                )
                candidates.append(cand)
                fits = cand.fields["fits"]
                fits_elsewhere = fits_elsewhere or fits
                single_fits = single_fits or (strategy == "single" and cand.headroom)
                if node_reasons and cand.headroom:
                    # Ruled out whatever the strategy (retired, a constraint, no bf16): one
                    # option with its numbers says why; the other strategies add nothing.
                    break
    return candidates


def _allowed(strategy: str, counts: list[int], node: NodeTypeSpec) -> tuple[int, ...]:
    if strategy == "single":
        return (1,) if 1 in counts else ()
    if strategy == "tensor_parallel":
        return tuple(k for k in counts if 1 < k <= node.gpus_per_node)
    return tuple(k for k in counts if k > 1)


def _size(
    request, shape, wl, system, node, acc, partition, strategy, counts, capacity, dtype, util,
    tokens, reasons, memory, sizing, allowed,
) -> Candidate:
    hard = bool(reasons)  # system/accelerator-level rejections
    if not allowed:
        allowed = (counts[-1],)
        hard = True
        reasons.append(f"{strategy} needs more than the {counts[-1]} GPU(s) allowed here.")
    headroom_limit = capacity / (1 + c.MEMORY_MARGIN.value)
    n_fit, n_head = sizing(strategy, allowed, capacity)
    n = n_head or n_fit or allowed[-1]
    peak = sizing.peaks.get((acc.name, dtype))
    if peak is None:
        peak = sizing.peaks[(acc.name, dtype)] = (peak_tflops(acc, dtype) if dtype else 0.0)

    def hours(k: int) -> float:
        eff = scaling_efficiency(node, k, strategy)
        if wl.training:
            return training_gpu_hours(
                shape, wl, tokens, peak, util.value, eff, sizing.flops_per_token
            )
        return inference_gpu_hours(shape, wl, acc, tokens, peak, util.value, k, eff)

    target = sizing.target_wall_hours
    gpu_hours = None
    if tokens is not None and peak and util.calibrated:
        reasons.append(
            f"assumes {util.value:.0%} of the {dtype} dense peak, the {util.source}."
        )
    if tokens is not None and peak:
        gpu_hours = hours(n)
        if gpu_hours / n > target and (n_fit is not None):
            # Widen to more GPUs (memory per GPU only falls) until the run fits the target.
            for k in allowed:
                if k > n:
                    n, gpu_hours = k, hours(k)
                    if gpu_hours / k <= target:
                        break
            reasons.append(
                f"uses {n} GPUs to bring the wall time to about {gpu_hours / n:,.0f} h "
                f"(target {target:g} h)."
            )
    mem, breakdown = memory(strategy, n)
    need = mem["total_bytes"]
    fits = need <= capacity
    headroom = need <= headroom_limit
    if not fits:
        reasons.append(
            f"needs {gb(need)} per GPU even on {n} GPU(s) with {strategy}; "
            f"{acc.display_name} has {gb(capacity)}."
        )
    elif not headroom:
        reasons.append(
            f"{gb(need)} per GPU is within {c.MEMORY_MARGIN.value:.0%} of the "
            f"{gb(capacity)} of {acc.display_name}: it may run out of memory."
        )
    elif n_fit is not None and n_head is not None and n_head > n_fit:
        reasons.append(
            f"{n_fit} GPU(s) would be within {c.MEMORY_MARGIN.value:.0%} of capacity; "
            f"{n_head} recommended for headroom."
        )
    if wl.task == "inference" and strategy == "tensor_parallel" and (
        shape.num_attention_heads % n or shape.num_kv_heads % n and shape.num_kv_heads > n
    ):
        hard = True
        reasons.append(f"{shape.num_attention_heads} attention heads do not split over {n} GPUs.")

    nodes = math.ceil(n / max(node.gpus_per_node, 1))
    wall = contingency = requested = cost = None
    if gpu_hours is not None:
        contingency = gpu_hours * c.CONTINGENCY.value
        requested = gpu_hours + contingency
        wall = gpu_hours / n
        price = node.price_per_gpu_hour or system.price_per_gpu_hour
        if price is not None:
            billed = n
            if system.kind == "cloud":
                # A cloud VM is rented whole: a 2-GPU job on an 8-GPU size pays for 8.
                billed = nodes * node.gpus_per_node
                if billed > n:
                    reasons.append(
                        f"billed for the whole {node.name} ({billed} GPUs) while using {n}."
                    )
            cost = round(requested / n * billed * price, 2)
    eligible = not hard
    max_wall = request.constraints.max_wall_hours
    if wall is not None and max_wall is not None and wall * (1 + c.CONTINGENCY.value) > max_wall:
        reasons.append(f"needs about {wall:.1f} h of wall time; your limit is {max_wall:g} h.")
        eligible = False
    part_wall = partition.max_wall_hours if partition is not None else None
    if wall is not None and part_wall and wall > part_wall:
        reasons.append(
            f"about {wall:.0f} h of wall time exceeds the {partition.name} limit of "
            f"{part_wall:g} h: run {math.ceil(wall / part_wall)} chained jobs that resume from "
            "checkpoints."
        )
    if system.status == "limited":
        note = system.status_note.split(". ")[0].rstrip(".")
        reasons.append(
            f"{system.display_name} has limited availability" + (f" ({note})." if note else ".")
        )
    if requested is not None and system.trial_gpu_hours and requested <= system.trial_gpu_hours:
        reasons.append(
            f"{requested:.0f} GPU hours fit within {system.display_name}'s trial access "
            f"({system.trial_gpu_hours:g} GPU hours)."
        )
    fields = {
        "system": system.name,
        "accelerator": acc.name,
        "num_gpus": n,
        "nodes": nodes,
        "strategy": strategy,
        "memory_per_gpu_bytes": need,
        "memory": breakdown,
        "capacity_bytes": capacity,
        "fits": fits,
        "gpu_hours": _round(gpu_hours),
        "contingency_gpu_hours": _round(contingency),
        "requested_gpu_hours": _round(requested),
        "wall_hours": _round(wall),
        "cost": cost,
        "currency": system.currency if cost is not None else "",
        "reasons": reasons,
        "rank": None,
        "eligible": eligible and fits,
        "headroom": headroom,
        "partition": partition.name if partition else None,
        "compute_dtype": dtype,
        "utilisation": util.value,
    }
    queue = system.typical_queue_wait_hours if system.typical_queue_wait_hours is not None else 24
    return Candidate(
        slow=wall is not None and wall > sizing.target_wall_hours,
        fields=fields,
        eligible=eligible and fits,
        headroom=headroom,
        queue=queue,
        sort_cost=cost if cost is not None else 0.0,
        partition=partition,
        system=system,
        node=node,
        accelerator=acc,
        compute_dtype=dtype,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Fits with headroom, fewest GPUs, fastest, shortest expected queue, cheapest."""

    def key(cand: Candidate):
        opt = cand.fields
        wall = opt["wall_hours"]
        return (
            not cand.eligible,
            not cand.headroom,
            cand.slow,
            # CPU offload trades much speed for memory: only when nothing else fits.
            opt["strategy"] == "zero3_offload",
            opt["num_gpus"],
            opt["nodes"],
            # "Fastest" is time to result: expected queue wait + wall time (seed 002).
            (wall if wall is not None else 0) + cand.queue,
            cand.sort_cost,
            opt["memory_per_gpu_bytes"],
            opt["system"],
            opt["accelerator"],
        )

    ordered = sorted(candidates, key=key)
    position = 0
    for cand in ordered:
        if cand.eligible:
            position += 1
            cand.fields["rank"] = position
        cand.option = trusted(Option, cand.fields)
    return ordered
