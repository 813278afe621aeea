"""Try every active system / accelerator / strategy in the catalog and rank what fits.

For each node type the search finds the smallest GPU count that fits with headroom under each
strategy; memory per GPU never grows with more GPUs, so a binary search over the allowed
counts is enough. Rejections keep their numbers and say why in plain words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from operator import attrgetter

from pydantic import BaseModel

from advisor.engine import constants as c
from advisor.engine import ranking, software
from advisor.engine.compute import (
    compute_dtype_for,
    inference_gpu_hours,
    peak_tflops,
    scaling_efficiency,
    training_gpu_hours,
)
from advisor.engine.frameworks import cuda_context_bytes, framework_for
from advisor.engine.memory import MemoryModel, Workload
from advisor.engine.models import (
    AcceleratorSpec,
    Charge,
    EstimateRequest,
    MemoryBreakdown,
    NodeTypeSpec,
    Option,
    PartitionSpec,
    RankingPolicySpec,
    Recipe,
    SystemSpec,
)
from advisor.engine.recipe import Choice, RecipeSearch
from advisor.engine.shape import ModelShape
from advisor.engine.speed import Utilisation, generation, job_distances, training_utilisation
from advisor.engine.words import STRATEGY_NAMES, plural, strategy_words

TRAINING_STRATEGIES = ("single", "ddp", "zero2", "zero3", "zero3_offload")
SENSITIVITY_ORDER = ("public", "internal", "confidential", "restricted")


def trusted(cls, values: dict):
    """Build a pydantic model from values the engine computed itself, every field present.

    Equivalent to `cls.model_construct(**values)` without its per-field default lookup: the
    ranking builds a hundred of these per estimate, and validation would only re-check our own
    arithmetic. Results still round-trip through `model_validate_json` (tested).
    """
    obj = _new(cls)  # BaseModel has no __new__ of its own
    _set_dict(obj, "__dict__", values)
    _set_fields_set(obj, set(values))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


# Frozen models refuse their own __setattr__; BaseModel's slots are set through their
# descriptors directly, which is about twice as fast as object.__setattr__ by name.
_new = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"


@dataclass(slots=True)
class Candidate:
    fields: dict  # Option's fields; the Option itself is built once ranked
    eligible: bool
    headroom: bool
    partition: PartitionSpec | None
    system: SystemSpec
    node: NodeTypeSpec
    accelerator: AcceleratorSpec
    compute_dtype: str | None
    sort_key: tuple  # ranking.RankKey flattened; rank() sorts by it
    option: Option | None = None
    utilisation: Utilisation | None = None  # with its full source, for the assumptions


_sort_key = attrgetter("sort_key")

# How much a researcher must set up and debug for each strategy; breaks ties in the ranking.
STRATEGY_COMPLEXITY = {
    "single": 0,
    "ddp": 1,
    "zero1": 2,
    "zero2": 3,
    "fsdp": 4,
    "zero3": 4,
    "tensor_parallel": 5,
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


def evaluate(
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    systems: list[SystemSpec],
    accelerators: dict[str, AcceleratorSpec],
    measured: tuple,
    policy: RankingPolicySpec | None = None,
) -> list[Candidate]:
    """Every system / node type / strategy sized for `request`, unranked.

    The loop body runs for every option of every estimate (about 70 over the default catalog;
    the goal is a thousand estimates a second), so it is one flat loop with the per-option
    work kept to lookups, arithmetic and the reasons it has to write. What depends only on the
    request, the system, the accelerator or the node type's shape is worked out once for each;
    memory per GPU once per (strategy, GPU count); the sizing scan once per (strategy, allowed
    counts, capacity); inference GPU hours once per (accelerator, GPU count, scaling
    efficiency). The caches live for this call only, so nothing carries over to the next
    estimate (tests/engine/test_ranking_caches.py).
    """
    training = wl.training
    policy = policy or RankingPolicySpec()
    pick_ties = ranking.tie_picker(ranking.order(policy))
    staff_rates = {
        r.accelerator: (r.rate_per_gpu_hour, r.currency, r.source) for r in policy.charge_rates
    }
    generations = {name: generation(acc) for name, acc in accelerators.items()}
    distances = (
        job_distances(
            measured,
            task=wl.task,
            precision=request.precision,
            params=shape.params_total,
            seq_len=wl.seq_len,
            batch=wl.batch_size,
        )
        if training
        else []
    )
    tools_needed = software.needs(
        task=wl.task,
        weight_format=wl.weight_format,
        optimizer=request.optimizer,
        flash_attention=wl.flash_attention,
        training=training,
        framework=request.framework,
    )
    tokens = None
    if request.tokens is not None:
        tokens = request.tokens * (request.epochs if training else 1)
    limit = request.constraints.max_gpus
    if request.num_gpus is not None:
        limit = request.num_gpus if limit is None else min(limit, request.num_gpus)
    margin = c.MEMORY_MARGIN.value
    margin_pct = f"{margin:.0%}"
    contingency_rate = c.CONTINGENCY.value
    with_contingency = 1 + contingency_rate
    max_wall = request.constraints.max_wall_hours
    target = max_wall / with_contingency if max_wall else c.TARGET_WALL_HOURS.value
    splits_heads = wl.task == "inference"  # tensor parallelism must split the heads evenly
    free_choice = request.strategy is None
    framework, _ = framework_for(request.framework, training)
    # One recipe search for the estimate. Pre-Ampere NVIDIA GPUs carry the larger CUDA context
    # of their era's stack (frameworks.cuda_context_bytes): a constant more per GPU, so their
    # options search the same recipes against a capacity that much smaller.
    context = cuda_context_bytes(framework, False)
    legacy_extra = cuda_context_bytes(framework, True) - context
    search = RecipeSearch(shape, wl, request, framework, MemoryModel(shape, wl, context))
    # Those stacks are PyTorch 1.x, whose zero_grad() zeroed gradients in place instead of
    # freeing them: gradients coexist with activations (memory.py), a second search for
    # training on pre-Ampere GPUs only.
    searches = {0.0: search}

    def search_for(extra: float) -> RecipeSearch:
        found = searches.get(extra)
        if found is None:
            if not training or wl.keeps_gradients:
                found = search
            else:
                old = replace(wl, keeps_gradients=True)
                model = MemoryModel(shape, old, context, like=search.model)
                found = RecipeSearch(shape, old, request, framework, model)
            searches[extra] = found
        return found

    # (strategy, GPU count, recipe) -> (breakdown, recipe, its reasons). Recipes are cached
    # objects within an estimate, so their identity names them.
    breakdowns: dict[tuple, tuple] = {}
    # (stack, strategy, allowed counts, capacity) -> (smallest count that fits, smallest with
    # headroom, the count used, its recipe)
    sized: dict[tuple, tuple[int | None, int | None]] = {}
    # accelerator -> what the node types that have it share (see `on_accelerator`).
    per_accelerator: dict[str, tuple] = {}
    # Inference: (accelerator, GPU count, scaling efficiency) -> GPU hours; peak and
    # utilisation follow from the accelerator, so node types that share one share their hours.
    hours_memo: dict[tuple[str, int, float], float] = {}
    # (GPUs per node, nodes, partition's job limits) -> what `layout` returns.
    layouts: dict[tuple, tuple] = {}

    def breakdown_for(key: tuple, choice: Choice) -> tuple:
        """(memory breakdown, recipe, the recipe's reasons) for one layout on one stack;
        the options with that layout share them."""
        strategy, n, _, extra = key
        search = search_for(extra)
        parts = search.parts(strategy, n, choice)
        if extra:
            parts["cuda_context"] += int(extra)
            parts["total_bytes"] += int(extra)
        why = search.reasons(choice, strategy, n, extra)
        found = breakdowns[key] = (
            trusted(MemoryBreakdown, parts),
            trusted(Recipe, search.recipe_fields(choice, strategy, n, why)),
            why,
        )
        return found

    def on_accelerator(acc: AcceleratorSpec) -> tuple:
        """What every node type with `acc` shares: (compute dtype, why it has none, capacity,
        the limit for headroom, capacity in words, utilisation, peak, whether GPU hours can
        be estimated, the calibrated-utilisation reason)."""
        dtype = compute_dtype_for(acc, wl)
        no_dtype = None
        if dtype is None:
            no_dtype = f"no {wl.compute_dtype} on {acc.display_name}" + (
                " (use fp16)." if wl.compute_dtype == "bf16" else "."
            )
        capacity = int(acc.memory_gb * 1e9)
        legacy = acc.vendor.lower() == "nvidia" and not acc.bf16_supported
        extra = legacy_extra if legacy else 0.0
        if training:
            util = training_utilisation(
                acc,
                shape,
                flash_attention=wl.flash_attention,
                adapters=wl.adapters,
                distances=distances,
            )
        else:
            util = Utilisation(
                c.MFU_PREFILL.value, label="default for prefill", fixed_source=c.MFU_PREFILL.source
            )
        peak = peak_tflops(acc, dtype) if dtype else 0.0
        timed = bool(tokens is not None and peak)
        assumes = None
        if timed and util.calibrated:
            # The full citation is in the result's assumptions; the option names its source.
            assumes = f"assumes {util.value:.0%} of the {dtype} dense peak ({util.label})."
        found = per_accelerator[acc.name] = (
            dtype,
            no_dtype,
            capacity,
            capacity / (1 + margin),
            gb(capacity),
            util,
            peak,
            timed,
            assumes,
            extra,
        )
        return found

    def hours(
        node: NodeTypeSpec,
        acc: AcceleratorSpec,
        peak: float,
        util: Utilisation,
        k: int,
        strategy: str,
        choice: Choice,
    ) -> float:
        eff = scaling_efficiency(node, k, strategy)
        if training:
            # The recipe's recomputation and micro-batch size set the FLOPs and utilisation.
            value = util.for_recipe(choice.level) * choice.efficiency
            return training_gpu_hours(shape, wl, tokens, peak, value, eff, choice.flops_per_token)
        key = (acc.name, k, eff)
        found = hours_memo.get(key)
        if found is None:
            found = hours_memo[key] = inference_gpu_hours(
                shape, wl, acc, tokens, peak, util.value, k, eff
            )
        return found

    def layout(node: NodeTypeSpec, partition: PartitionSpec | None) -> tuple:
        """(GPU counts, those a single-GPU job may use, tensor parallelism within the node,
        multi-GPU data parallelism) for the node type in its partition; node types of the
        same shape share them."""
        key = (
            node.gpus_per_node,
            node.count,
            partition.max_nodes_per_job if partition is not None else None,
            partition.max_gpus_per_job if partition is not None else None,
        )
        found = layouts.get(key)
        if found is None:
            counts = counts_for(node, partition, limit)
            if request.num_gpus is not None:
                counts = [k for k in counts if k == request.num_gpus] or [request.num_gpus]
            gpn = node.gpus_per_node
            found = layouts[key] = (
                counts,
                (1,) if 1 in counts else (),
                tuple(k for k in counts if 1 < k <= gpn),
                tuple(k for k in counts if k > 1),
            )
        return found

    candidates: list[Candidate] = []
    append = candidates.append
    for system in systems:
        sys_reasons = system_rejections(request, system)
        strategies = strategies_for(request, wl, system)
        cloud = system.kind == "cloud"
        queue = system.typical_queue_wait_hours
        if queue is None:
            queue = 24
        limited = None
        if system.status == "limited":
            note = system.status_note.split(". ")[0].rstrip(".")
            limited = f"{system.display_name} has limited availability" + (
                f" ({note})." if note else "."
            )
        trial = system.trial_gpu_hours
        partitions = partitions_by_node(system) if system.partitions else {}
        for node in system.node_types:
            acc = accelerators.get(node.accelerator)
            if acc is None:
                continue
            node_reasons = list(sys_reasons)
            if node.status == "retired":
                node_reasons.append(f"{node.name} on {system.display_name} is retired.")
            if request.accelerator is not None and acc.name != request.accelerator:
                node_reasons.append(f"You asked for {request.accelerator}.")
            gen = generations[acc.name]
            supported, software_reasons = software.check(
                system, acc, gen, tools_needed, weight_format=wl.weight_format
            )
            node_reasons.extend(software_reasons)
            changes = software.PLATFORM_CHANGES.get(gen.platform)
            rate = ranking.charge_rate(system, node, acc, staff_rates, policy.currency)
            gpu_mem, gpu_peak = acc.memory_gb, acc.bf16_tflops or acc.fp16_tflops or 0.0
            shared = per_accelerator.get(acc.name) or on_accelerator(acc)
            (
                dtype,
                no_dtype,
                capacity,
                headroom_limit,
                capacity_gb,
                util,
                peak,
                timed,
                assumes,
                extra,
            ) = shared
            # The recipe search sees what is left after the stack's extra context.
            search_capacity, search_headroom = capacity - extra, headroom_limit - extra
            if no_dtype is not None:
                node_reasons.append(no_dtype)
            partition = partitions.get(node.name)
            counts, one, within_node, several = layout(node, partition)
            gpn = node.gpus_per_node
            per_node = max(gpn, 1)
            price = node.price_per_gpu_hour or system.price_per_gpu_hour
            part_name = partition.name if partition is not None else None
            part_wall = partition.max_wall_hours if partition is not None else None
            single_fits = fits_elsewhere = False
            for strategy, unavailable in strategies:
                if strategy == "single":
                    allowed = one
                elif strategy == "tensor_parallel":
                    allowed = within_node
                else:
                    allowed = several
                if not allowed and strategy != "single":
                    continue  # e.g. multi-GPU strategies where a job gets one GPU: not tried
                # Tensor parallelism when one GPU is enough, and CPU offload when an on-GPU
                # strategy fits, would never rank first: not tried unless asked for.
                if free_choice and (
                    (strategy == "tensor_parallel" and single_fits)
                    or (strategy == "zero3_offload" and fits_elsewhere)
                ):
                    continue
                reasons = list(node_reasons)
                if unavailable:
                    reasons.append(unavailable + ".")
                hard = bool(reasons)  # system/accelerator-level rejections
                if changes is not None and not hard:
                    reasons.append(changes + ".")
                if not allowed:
                    allowed = (counts[-1],)
                    hard = True
                    reasons.append(
                        f"{STRATEGY_NAMES.get(strategy, strategy)} needs more than the "
                        f"{plural(counts[-1], 'GPU')} allowed here."
                    )
                size_key = (strategy, allowed, search_capacity, extra)
                found = sized.get(size_key)
                if found is None:
                    found = sized[size_key] = search_for(extra).plan(
                        strategy, allowed, search_capacity, search_headroom
                    )
                n_fit, n_head, n, choice = found
                gpu_hours = None
                if assumes is not None:
                    reasons.append(assumes)
                if timed:
                    gpu_hours = hours(node, acc, peak, util, n, strategy, choice)
                    if gpu_hours / n > target and (n_fit is not None):
                        # Widen to more GPUs (memory per GPU only falls) until the run fits
                        # the target.
                        # The recipe at n fits on more GPUs too; the final count gets its own.
                        first = choice
                        for k in allowed:
                            if k > n:
                                n = k
                                gpu_hours = hours(node, acc, peak, util, k, strategy, first)
                                if gpu_hours / k <= target:
                                    break
                        choice = search_for(extra).at(strategy, n, search_capacity, search_headroom)
                        if choice is not first:
                            gpu_hours = hours(node, acc, peak, util, n, strategy, choice)
                        reasons.append(
                            f"uses {n} GPUs to bring the wall time to about "
                            f"{gpu_hours / n:,.0f} h (target {target:g} h)."
                        )
                memory_key = (strategy, n, id(choice), extra)
                found = breakdowns.get(memory_key) or breakdown_for(memory_key, choice)
                breakdown, recipe, recipe_reasons = found
                need = breakdown.total_bytes
                reasons.extend(recipe_reasons)
                fits = need <= capacity
                headroom = need <= headroom_limit
                if not fits:
                    reasons.append(
                        f"needs {gb(need)} per GPU even on {plural(n, 'GPU')} "
                        f"{strategy_words(strategy)}"
                        + (
                            f", micro-batch {choice.micro} and {choice.level} checkpointing"
                            if training
                            else ""
                        )
                        + f"; {acc.display_name} has {capacity_gb}."
                    )
                elif not headroom:
                    reasons.append(
                        f"{gb(need)} per GPU is within {margin_pct} of the "
                        f"{capacity_gb} of {acc.display_name}: it may run out of memory."
                    )
                elif n_fit is not None and n_head is not None and n_head > n_fit:
                    reasons.append(
                        f"{plural(n_fit, 'GPU')} would be within {margin_pct} of capacity; "
                        f"{n_head} recommended for headroom."
                    )
                if (
                    splits_heads
                    and strategy == "tensor_parallel"
                    and (
                        shape.num_attention_heads % n
                        or shape.num_kv_heads % n
                        and shape.num_kv_heads > n
                    )
                ):
                    hard = True
                    reasons.append(
                        f"{shape.num_attention_heads} attention heads do not split over {n} GPUs."
                    )
                nodes = -(-n // per_node)
                wall = contingency = requested = cost = charged = None
                if gpu_hours is not None:
                    contingency = gpu_hours * contingency_rate
                    requested = gpu_hours + contingency
                    wall = gpu_hours / n
                    billed = n
                    if cloud:
                        # A cloud VM is rented whole: a 2-GPU job on an 8-GPU size pays for 8.
                        billed = nodes * gpn
                        if billed > n and price is not None:
                            reasons.append(
                                f"billed for the whole {node.name} ({billed} GPUs) while using {n}."
                            )
                    if price is not None:
                        cost = round(requested / n * billed * price, 2)
                    if rate.value is not None:
                        charged = round(requested / n * billed * rate.value, 2)
                eligible = not hard
                if wall is not None and max_wall is not None and wall * with_contingency > max_wall:
                    reasons.append(
                        f"needs about {wall:.1f} h of wall time; your limit is {max_wall:g} h."
                    )
                    eligible = False
                if wall is not None and part_wall and wall > part_wall:
                    reasons.append(
                        f"about {wall:.0f} h of wall time exceeds the {part_name} limit of "
                        f"{part_wall:g} h: run {math.ceil(wall / part_wall)} chained jobs that "
                        "resume from checkpoints."
                    )
                if limited is not None:
                    reasons.append(limited)
                if requested is not None and trial and requested <= trial:
                    reasons.append(
                        f"{requested:.0f} GPU hours fit within {system.display_name}'s trial "
                        f"access ({trial:g} GPU hours)."
                    )
                eligible = eligible and fits
                slow = wall is not None and wall > target
                wall_shown = None if wall is None else round(wall, 2)
                cand = Candidate(
                    {
                        "system": system.name,
                        "accelerator": acc.name,
                        "num_gpus": n,
                        "nodes": nodes,
                        "strategy": strategy,
                        "memory_per_gpu_bytes": need,
                        "memory": breakdown,
                        "capacity_bytes": capacity,
                        "fits": fits,
                        "gpu_hours": None if gpu_hours is None else round(gpu_hours, 2),
                        "contingency_gpu_hours": (
                            None if contingency is None else round(contingency, 2)
                        ),
                        "requested_gpu_hours": None if requested is None else round(requested, 2),
                        "wall_hours": wall_shown,
                        "cost": cost,
                        "currency": system.currency if cost is not None else "",
                        "reasons": reasons,
                        "rank": None,
                        "eligible": eligible,
                        "headroom": headroom,
                        "partition": part_name,
                        "compute_dtype": dtype,
                        "utilisation": util.value,
                        "utilisation_source": util.label,
                        "charge": trusted(
                            Charge,
                            {
                                "rate_per_gpu_hour": rate.value,
                                "currency": rate.currency if rate.value is not None else "",
                                "total": charged,
                                "source": rate.source,
                            },
                        ),
                        "supported": supported,
                        "software_reasons": software_reasons,
                        "recipe": recipe,
                    },
                    eligible,
                    headroom,
                    partition,
                    system,
                    node,
                    acc,
                    dtype,
                    # The ranking (ranking.RankKey, flattened): see rank().
                    (
                        not eligible,
                        limited is not None,
                        not headroom,
                        # CPU offload trades much speed for memory: only when nothing else fits.
                        strategy == "zero3_offload",
                        *pick_ties(
                            (
                                slow,
                                charged is None,
                                charged or 0.0,
                                gpu_mem,
                                gpu_peak,
                                queue,
                                n,
                                nodes,
                            )
                        ),
                        STRATEGY_COMPLEXITY[strategy],
                        need,
                        system.name,
                        acc.name,
                    ),
                    None,
                    util,
                )
                append(cand)
                fits_elsewhere = fits_elsewhere or fits
                single_fits = single_fits or (strategy == "single" and headroom)
                if node_reasons and headroom:
                    # Ruled out whatever the strategy (retired, a constraint, no bf16): one
                    # option with its numbers says why; the other strategies add nothing.
                    break
    return candidates


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """The order of each candidate's `sort_key` (ranking.RankKey, flattened; built in
    evaluate): feasible and supported, available, headroom, no offload, then the profile's
    tie-breakers (by default deadline, charged cost, GPU class, queue, GPUs)."""
    ordered = sorted(candidates, key=_sort_key)
    position = 0
    for cand in ordered:
        fields = cand.fields
        if cand.eligible:
            position += 1
            fields["rank"] = position
        cand.option = trusted(Option, fields)
    return ordered
