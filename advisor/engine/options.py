"""One option of the ranking: what it costs, the reasons a researcher reads, its fields and its
ranking key. `OptionWriting` is the part of recommend.Evaluation that writes an option once its
recipe and GPU count are chosen; Evaluation supplies the request and its terms (training,
margin_pct, contingency_rate, max_wall, with_contingency, target, pick_ties)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine import offload, ranking
from advisor.engine.layouts import STRATEGY_COMPLEXITY, pipeline_stages
from advisor.engine.models import (
    AcceleratorSpec,
    Charge,
    MemoryBreakdown,
    NodeTypeSpec,
    Option,
    PartitionSpec,
    Recipe,
    SystemSpec,
    trusted,
)
from advisor.engine.recipe import Choice
from advisor.engine.speed import Utilisation
from advisor.engine.words import plural, strategy_words

# The token count an estimate without one is timed at, only to order its options by cost per
# token (Costs.rank_cost); no figure the result shows comes from it.
RANKING_TOKENS = 1e9


class Costs(NamedTuple):
    """What an option costs: GPU hours and what follows from them (None where the hours
    cannot be estimated)."""

    nodes: int
    gpu_hours: float | None
    contingency: float | None
    requested: float | None  # GPU hours + contingency
    wall: float | None  # hours
    cost: float | None  # the price, where the system has one
    charged: float | None  # at the charge rate, in the rate's currency
    compared: float | None  # `charged` in the profile's charge currency; None: not compared
    # What the ranking compares: `compared`, or where no token count was given (no GPU hours),
    # the same charge for a nominal token count (RANKING_TOKENS): GPU hours grow in
    # proportion to the tokens, so the order of the options does not depend on how many.
    rank_cost: float | None = None


class Sized(NamedTuple):
    """An option's GPU count and recipe (recommend.Evaluation.plan)."""

    n: int  # GPUs the option uses
    choice: Choice  # its recipe
    gpu_hours: float | None  # None where they cannot be estimated
    n_fit: int | None  # the fewest GPUs that fit
    n_head: int | None  # the fewest that fit with the memory margin to spare


class Planned(NamedTuple):
    """An option sized under its parallel layout (parallel_options.plan_layout): `Sized`'s
    fields, then its memory and recipe."""

    n: int
    choice: Choice
    gpu_hours: float | None
    n_fit: int | None
    n_head: int | None
    breakdown: MemoryBreakdown
    recipe: Recipe | None  # None: a layout ruled out before any recipe
    recipe_reasons: list[str]
    ruled_out: bool  # no layout fits the node (the option says why)


# Why a limited system's option sits below the available ones (ranking.RankKey.limited).
LIMITED_RANKS_AFTER = (
    "Options on fully available systems are ranked before it; it is offered for when none of "
    "them can run the job."
)
# Why an option that enlarges the researcher's global batch sits below those that keep it
# (the deadline tie-breaker's second value, ranking.TIE_BREAKER_SIZE); written by `rank` only
# where some workable option keeps the batch.
LARGER_BATCH_RANKS_AFTER = (
    "Options that train the global batch you asked for within the same wall-time target are "
    "ranked before it: a larger batch changes the optimisation (learning rate and steps), so "
    "use it only if you retune for it."
)


def gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"


def nodes_for(node: NodeTypeSpec, n: int) -> int:
    """How many of the node type's nodes `n` GPUs occupy."""
    return -(-n // max(node.gpus_per_node, 1))


def wall_target(max_wall: float | None) -> float:
    """The wall time a job should finish in: the researcher's limit less the contingency,
    else the default target (a week)."""
    if max_wall:
        return max_wall / (1 + c.CONTINGENCY.value)
    return c.TARGET_WALL_HOURS.value


def inference_shards(wall: float | None, target: float, partition_wall: float | None) -> int:
    """Jobs an inference run's prompts are split into so each finishes within the target wall
    time and the partition's limit: requests are independent, so a Slurm job array of shards
    takes the same GPU hours in a fraction of the time. 1 when one job is short enough. Each
    job's wall time with the contingency must fit the partition (the sbatch asks for that)."""
    in_partition = partition_wall / (1 + c.CONTINGENCY.value) if partition_wall else None
    limit = min(t for t in (target, in_partition) if t)
    if wall is None or wall <= limit:
        return 1
    return math.ceil(wall / limit)


def spans_without_network(node: NodeTypeSpec, nodes: int) -> bool:
    """Whether a layout spans nodes the catalog lists with no cluster network between them
    (`inter_node_interconnect: none`). Such options are kept, marked and ranked after the
    others on systems of the same availability rather than rejected: the catalog also writes
    "none" where a fabric is not verified (Azure ND96isr_H200_v5: "InfiniBand: not
    verified"), and the engine prices "none" as front-end Ethernet
    (scale_cost.INTER_NODE_DEFAULT_GBIT_S), not as no connection."""
    return nodes > 1 and node.inter_node_interconnect == "none"


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
    flash: bool = True  # sized with a fused attention kernel (else eager: NodeFacts.stack)
    larger_batch: bool = False  # its recipe trains more than the stated global batch


class AcceleratorFacts(NamedTuple):
    """What every node type with one accelerator shares (recommend.Evaluation.on_accelerator)."""

    dtype: str | None  # the compute dtype; None: the request's precision is missing
    no_dtype: str | None  # why there is none, in words
    capacity: int  # bytes
    headroom_limit: float  # the most bytes that leave the memory margin free
    capacity_gb: str
    util: Utilisation
    peak: float
    timed: bool  # GPU hours can be estimated
    assumes: str | None  # the calibrated-utilisation reason
    extra: float  # bytes of CUDA context beyond the current stack's
    dtype_note: str | None = None  # fp16 chosen where the GPU has no bf16, and its caveat


class Stack(NamedTuple):
    """What a node's software stack offers the recipe search (recommend.search_for)."""

    # bitsandbytes' 8-bit optimizers run: the search may choose 8-bit AdamW.
    eight_bit: bool = True
    # A fused attention kernel runs: False sizes eager attention, which keeps each layer's
    # scores (software.FLASH is then not needed, node_facts.attention_fallback).
    flash: bool = True


FULL_STACK = Stack()  # every tool the recipe search may choose


@dataclass(slots=True)
class NodeFacts:
    """What every option on one node type of one system shares, worked out once per node."""

    system: SystemSpec
    node: NodeTypeSpec
    acc: AcceleratorSpec
    reasons: list[str]  # rule the node out whatever the strategy (system, software, dtype)
    supported: bool
    software_reasons: list[str]
    changes: str | None  # what a non-NVIDIA platform asks the researcher to change
    rate: ranking.Rate
    dtype: str | None
    capacity: int
    headroom_limit: float
    capacity_gb: str
    util: Utilisation
    peak: float
    timed: bool  # GPU hours can be estimated
    assumes: str | None
    extra: float  # bytes of CUDA context beyond the current stack's
    partition: PartitionSpec | None
    counts: list[int]
    one: tuple[int, ...]  # counts a single-GPU job may use
    within_node: tuple[int, ...]  # tensor parallelism
    several: tuple[int, ...]  # multi-GPU data parallelism
    price: float | None
    cloud: bool
    queue: float
    limited: str | None  # the limited-availability reason
    trial: float | None
    dtype_note: str | None = None
    # What the recipe search may use on this node's software stack.
    stack: Stack = FULL_STACK
    # Eager attention where the node has no fused kernel (node_facts.attention_fallback).
    attention_note: str | None = None

    @property
    def limits_for_recipe(self) -> tuple[float, float]:
        """(capacity, headroom limit) per GPU as the recipe search sized them: without the
        CUDA context beyond the current stack's, which the breakdown adds back."""
        return self.capacity - self.extra, self.headroom_limit - self.extra

    def whole_nodes(self) -> tuple[int, ...]:
        """Counts of two or more whole nodes: an inference replica over nodes (vLLM's tensor
        parallel within a node, a pipeline stage per node)."""
        per_node = self.node.gpus_per_node
        return tuple(k for k in self.several if k > per_node and k % per_node == 0)

    def allowed(self, strategy: str) -> tuple[int, ...]:
        if strategy == "single":
            return self.one
        if strategy == "tensor_parallel":
            return self.within_node
        if strategy == "zero3_offload":
            # Offload serves one GPU too: states that no GPU holds live in CPU memory
            # (ZeRO-Offload, arXiv:2101.06840: a 13B model on one V100).
            return self.one + self.several
        return self.several


class OptionWriting:
    """Mixin for recommend.Evaluation: the option's memory reasons, costs, wall-time reasons,
    fields and ranking key."""

    training: bool
    margin_pct: str
    contingency_rate: float
    max_wall: float | None
    with_contingency: float
    target: float
    pick_ties: object
    currency: str  # the profile's charge currency, in which charges are compared

    def memory_reasons(
        self,
        f: NodeFacts,
        strategy: str,
        n: int,
        choice: Choice,
        need: int,
        n_fit: int | None,
        n_head: int | None,
        reasons: list[str],
    ) -> tuple[bool, bool]:
        """(fits, fits with headroom), saying why not in `reasons`."""
        fits = need <= f.capacity
        headroom = need <= f.headroom_limit
        if strategy == "zero3_offload" and not self.host_holds_offload(f, n, choice, reasons):
            return False, False
        if not fits:
            # "on one GPU" alone: "even on 1 GPU on a single GPU" says it twice.
            layout = (
                "on one GPU"
                if strategy == "single"
                else (f"on {plural(n, 'GPU')} {strategy_words(strategy)}")
            )
            reasons.append(
                f"needs {gb(need)} per GPU even {layout}"
                + (
                    f", micro-batch {choice.micro} and "
                    + ("no" if choice.level == "none" else choice.level)
                    + " checkpointing"
                    if self.training
                    else ""
                )
                + f"; {f.acc.display_name} has {f.capacity_gb}."
            )
        elif not headroom:
            reasons.append(
                f"{gb(need)} per GPU is within {self.margin_pct} of the "
                f"{f.capacity_gb} of {f.acc.display_name}: it may run out of memory."
            )
        elif n_fit is not None and n_head is not None and n_head > n_fit:
            reasons.append(
                f"{plural(n_fit, 'GPU')} would be within {self.margin_pct} of capacity; "
                f"{n_head} recommended for headroom."
            )
        return fits, headroom

    def host_holds_offload(self, f: NodeFacts, n: int, choice: Choice, reasons: list[str]) -> bool:
        """Whether each node's CPU memory holds its share of the offloaded states; says why
        not. A node type without a memory figure in the catalog is not ruled out: the reason
        says what it would need."""
        host = self.host_bytes(f, n, choice)
        if not f.node.ram_gb:
            reasons.append(
                f"CPU offload on {plural(n, 'GPU')} keeps {gb(host)} in each node's memory; "
                f"the catalog does not say how much {f.node.name} has."
            )
            return True
        if host <= f.node.ram_gb * 1e9:
            return True
        reasons.append(
            f"CPU offload on {plural(n, 'GPU')} keeps {gb(host)} of weights, gradients and "
            f"optimizer states in each node's memory; {f.node.name} has {f.node.ram_gb:g} GB."
        )
        return False

    def host_bytes(self, f: NodeFacts, n: int, choice: Choice) -> float:
        """Host memory each node needs for CPU offload's states on `n` GPUs with the recipe
        `choice` (the host check and the offload sizing share it)."""
        offloaded = self.search_for(f.extra).model.offloaded_bytes(choice.optimizer)
        return offload.host_bytes_per_node(offloaded, n, f.node.gpus_per_node)

    def costs(
        self,
        f: NodeFacts,
        n: int,
        gpu_hours: float | None,
        reasons: list[str],
        rank_hours: float | None = None,
    ) -> Costs:
        """GPU hours, contingency, wall time, price and charge of `n` GPUs on the node.
        `rank_hours`: where no token count was given, the GPU hours of RANKING_TOKENS, which
        only the ranking reads (Costs.rank_cost)."""
        nodes = nodes_for(f.node, n)
        # A cloud VM is rented whole: a 2-GPU job on an 8-GPU size pays for 8.
        billed = nodes * f.node.gpus_per_node if f.cloud else n
        if gpu_hours is None:
            rank_cost = None
            if rank_hours is not None and f.rate.value is not None and f.rate.per_unit is not None:
                rank_cost = rank_hours / n * billed * f.rate.value * f.rate.per_unit
            return Costs(nodes, None, None, None, None, None, None, None, rank_cost)
        contingency = gpu_hours * self.contingency_rate
        requested = gpu_hours + contingency
        if billed > n and f.price is not None:
            reasons.append(f"billed for the whole {f.node.name} ({billed} GPUs) while using {n}.")
        cost = charged = compared = None
        if f.price is not None:
            cost = round(requested / n * billed * f.price, 2)
        rate = f.rate
        if rate.value is not None:
            charged = round(requested / n * billed * rate.value, 2)
            if rate.per_unit is None:
                reasons.append(rate.comparison + ".")  # ranked like an unknown charge
            else:
                # Not rounded again: at 0.01 USD per Service Unit, 8.90 and 9.49 SU both round
                # to 0.09 USD, and the ranking would read the cheaper as a tie.
                compared = charged * rate.per_unit
        return Costs(
            nodes, gpu_hours, contingency, requested, gpu_hours / n, cost, charged, compared,
            compared,
        )  # fmt: skip

    def schedule_reasons(self, f: NodeFacts, costs: Costs, n: int, reasons: list[str]) -> bool:
        """The wall-time limits, the network between the nodes, availability and trial access;
        False when the researcher's own wall-time limit rules the option out."""
        wall, requested = costs.wall, costs.requested
        within = True
        if spans_without_network(f.node, costs.nodes):
            reasons.append(
                f"needs {costs.nodes} nodes; {f.node.name} nodes have no cluster network "
                "between them (inter-node interconnect: none), so a job may not be able to "
                "span them, and where it can, only over their front-end Ethernet (priced as "
                "such)."
            )
        max_wall = self.max_wall
        part_wall = f.partition.max_wall_hours if f.partition is not None else None
        shards = 1 if self.training else inference_shards(wall, self.target, part_wall)
        if shards > 1:
            # Independent requests: a job array meets any limit at the same GPU hours.
            reasons.append(
                f"The requests are independent: split the prompts into {shards} jobs (a Slurm "
                f"job array), each about {wall / shards:,.1f} h on {plural(n, 'GPU')}; the GPU "
                "hours stay the same."
            )
        elif wall is not None and max_wall is not None and wall * self.with_contingency > max_wall:
            reasons.append(f"needs about {wall:.1f} h of wall time; your limit is {max_wall:g} h.")
            within = False
        if shards == 1 and wall is not None and part_wall and wall > part_wall:
            reasons.append(
                f"about {wall:.0f} h of wall time exceeds the {f.partition.name} limit of "
                f"{part_wall:g} h: run {math.ceil(wall / part_wall)} chained jobs that "
                "resume from checkpoints."
            )
        if f.limited is not None:
            reasons.append(f.limited)
            reasons.append(LIMITED_RANKS_AFTER)
        if requested is not None and f.trial and requested <= f.trial:
            reasons.append(
                f"{requested:.0f} GPU hours fit within {f.system.display_name}'s trial "
                f"access ({f.trial:g} GPU hours)."
            )
        return within

    def candidate(
        self,
        f: NodeFacts,
        strategy: str,
        n: int,
        breakdown: MemoryBreakdown,
        recipe: Recipe,
        costs: Costs,
        fits: bool,
        headroom: bool,
        eligible: bool,
        reasons: list[str],
    ) -> Candidate:
        """The option's fields and its ranking key (ranking.RankKey, flattened)."""
        need = breakdown.total_bytes
        gpu_hours, contingency, requested, wall = (
            costs.gpu_hours,
            costs.contingency,
            costs.requested,
            costs.wall,
        )
        acc, system = f.acc, f.system
        if not self.training and recipe.tp > 1:
            stages = pipeline_stages(f.node, n, strategy)
            if stages > 1:  # vLLM over nodes: tensor parallel within each, a stage per node
                recipe = recipe.model_copy(update={"tp": recipe.tp // stages, "pp": stages})
        fields = {
            "system": system.name,
            "accelerator": acc.name,
            "num_gpus": n,
            "nodes": costs.nodes,
            "strategy": strategy,
            "memory_per_gpu_bytes": need,
            "memory": breakdown,
            "capacity_bytes": f.capacity,
            "fits": fits,
            "gpu_hours": None if gpu_hours is None else round(gpu_hours, 2),
            "contingency_gpu_hours": None if contingency is None else round(contingency, 2),
            "requested_gpu_hours": None if requested is None else round(requested, 2),
            "wall_hours": None if wall is None else round(wall, 2),
            "cost": costs.cost,
            "currency": system.currency if costs.cost is not None else "",
            "reasons": reasons,
            "rank": None,
            "eligible": eligible,
            "headroom": headroom,
            "partition": f.partition.name if f.partition is not None else None,
            "compute_dtype": f.dtype,
            "utilisation": f.util.value,
            "utilisation_source": f.util.label,
            "charge": self.charge(f.rate, costs),
            "supported": f.supported,
            "software_reasons": f.software_reasons,
            "recipe": recipe,
            "queue_guidance": system.queue_guidance or None,
        }
        # A stated batch is the researcher's choice; one left out may grow (workload.global_batch).
        larger_batch = (
            self.training
            and self.request.batch_size is not None
            and recipe is not None
            and recipe.global_batch > self.request.batch_size
        )
        sort_key = self.rank_key(f, strategy, n, need, costs, headroom, eligible, larger_batch)
        return Candidate(
            fields,
            eligible,
            headroom,
            f.partition,
            system,
            f.node,
            acc,
            f.dtype,
            sort_key,
            None,
            f.util,
            f.stack.flash,
            larger_batch,
        )

    def charge(self, rate: ranking.Rate, costs: Costs) -> Charge:
        """What the option is charged: the rate, the total and, across currencies, the total
        the ranking compared."""
        compared = costs.compared
        return trusted(
            Charge,
            {
                "rate_per_gpu_hour": rate.value,
                "currency": rate.currency if rate.value is not None else "",
                "total": costs.charged,
                "source": rate.source,
                "compared_total": None if compared is None else round(compared, 2),
                "compared_currency": self.currency if compared is not None else "",
                "comparison": rate.comparison,
            },
        )

    def rank_key(
        self,
        f: NodeFacts,
        strategy: str,
        n: int,
        need: int,
        costs: Costs,
        headroom: bool,
        eligible: bool,
        larger_batch: bool,
    ) -> tuple:
        """ranking.RankKey, flattened (sorting nested tuples costs several times more): the
        profile's tie-breakers come in its order through `pick_ties`."""
        wall, compared, acc = costs.wall, costs.rank_cost, f.acc
        return (
            not eligible,
            f.limited is not None,
            # Nodes that may not run one job together: after all that need no such network.
            spans_without_network(f.node, costs.nodes),
            not headroom,
            # CPU offload trades much speed for memory: only when nothing else fits.
            strategy == "zero3_offload",
            *self.pick_ties(
                (
                    wall is not None and wall > self.target,  # misses the deadline
                    larger_batch,  # enlarges the stated global batch (ranking.TIE_BREAKER_SIZE)
                    compared is None,
                    # An unknown or not comparable charge never wins; among those, fewer GPU
                    # hours do.
                    compared
                    if compared is not None
                    else (costs.requested if costs.requested is not None else math.inf),
                    acc.memory_gb,
                    acc.bf16_tflops or acc.fp16_tflops or 0.0,
                    f.queue,
                    n,
                    costs.nodes,
                )
            ),
            STRATEGY_COMPLEXITY[strategy],
            need,
            f.system.name,
            acc.name,
        )


_sort_key = attrgetter("sort_key")


def rank(
    candidates: list[Candidate], tie_order: tuple[str, ...] = ranking.DEFAULT_TIE_BREAKERS
) -> list[Candidate]:
    """The order of each candidate's `sort_key` (ranking.RankKey, flattened; built in
    evaluate): feasible and supported, available, headroom, no offload, then the profile's
    tie-breakers (by default deadline and the stated batch, charged cost, GPU class, queue,
    GPUs), the cost read at the estimate's resolution between GPU counts of one node type."""
    _fewer_gpus_within_the_band(candidates, tie_order)
    ordered = sorted(candidates, key=_sort_key)
    position = 0
    # Said only where it is why: some workable option trains the batch asked for.
    batch_kept = any(cand.eligible and not cand.larger_batch for cand in ordered)
    for cand in ordered:
        fields = cand.fields
        if cand.eligible:
            position += 1
            fields["rank"] = position
            if cand.larger_batch and batch_kept:
                fields["reasons"].append(LARGER_BATCH_RANKS_AFTER)
        cand.option = trusted(Option, fields)
    return ordered


def _fewer_gpus_within_the_band(candidates: list[Candidate], tie_order: tuple[str, ...]) -> None:
    """More GPUs of one kind on one system (a cloud's VM sizes included) outrank fewer only
    when they cost less by more than
    FEWER_GPUS_COST_BAND: a closer cost (70B QLoRA's 4 % less dequantisation over two GPUs) is
    within the estimate's resolution, so the option on more GPUs is ranked at the cost of the
    fewer-GPU one and the profile's later tie-breakers (fewest GPUs) decide. Only siblings
    that rank at least as high on everything before the cost (eligible, headroom, the
    deadline, the stated batch) count."""
    sizes = ranking.TIE_BREAKER_SIZE
    unknown_at = 5 + sum(sizes[name] for name in tie_order[: tie_order.index("cost")])
    cost_at = unknown_at + 1  # (unknown?, cost): GPU hours where the charge is unknown
    groups: dict[tuple[str, str], list[Candidate]] = {}  # (system, accelerator)
    for cand in candidates:
        if cand.eligible:
            groups.setdefault((cand.system.name, cand.accelerator.name), []).append(cand)
    band = 1 + c.FEWER_GPUS_COST_BAND.value
    for group in groups.values():
        if len(group) < 2:
            continue
        for cand in group:
            key, n = cand.sort_key, cand.fields["num_gpus"]
            cost = key[cost_at]
            close = [
                other.sort_key[cost_at]
                for other in group
                if other.fields["num_gpus"] < n
                and cost < other.sort_key[cost_at] <= cost * band
                and other.sort_key[:cost_at] <= key[:cost_at]
            ]
            if close:
                cand.sort_key = (*key[:cost_at], min(close), *key[cost_at + 1 :])
                cand.fields["reasons"].append(
                    "Cheaper than the same job on fewer GPUs of this kind here, but by less "
                    f"than {c.FEWER_GPUS_COST_BAND.value:.0%}, within the estimate's "
                    "resolution: ranked as a tie, which fewer GPUs win."
                )
