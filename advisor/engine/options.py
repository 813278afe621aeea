"""The records an option of the ranking is built from and the ranking itself: what an option
costs (`Costs`), how it was sized (`Sized`, `Planned`), what every option on one accelerator or
node type shares (`AcceleratorFacts`, `NodeFacts`, `Stack`), the candidate with its ranking key
(`Candidate`) and `rank`, which orders the candidates. option_writing.OptionWriting writes the
options' reasons, costs, fields and keys."""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine import ranking
from advisor.engine.models import (
    AcceleratorSpec,
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
    # GRPO's vLLM tensor-parallel degree (rollouts.degrees): the generation engine's share of
    # each GPU, which the recipe search sizes the training around (ParallelPlanning).
    generation_tp: int = 1


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
        if strategy in ("tensor_parallel", "pipeline_parallel"):
            return self.within_node
        if strategy == "zero3_offload":
            # Offload serves one GPU too: states that no GPU holds live in CPU memory
            # (ZeRO-Offload, arXiv:2101.06840: a 13B model on one V100).
            return self.one + self.several
        return self.several


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
    # Five values come before the tie-breakers in the key (option_writing.OptionWriting.rank_key).
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
