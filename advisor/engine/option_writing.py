"""Writing one option of the ranking: the reasons a researcher reads (memory, CPU offload, wall
time, network, availability), what it costs, its fields and its ranking key. `OptionWriting` is
the part of recommend.Evaluation that writes an option once its recipe and GPU count are chosen;
Evaluation supplies the request and its terms (training, margin_pct, contingency_rate, max_wall,
with_contingency, target, pick_ties). The records it writes into are in options.py."""

from __future__ import annotations

import math

from advisor.engine import constants as c
from advisor.engine import offload, ranking
from advisor.engine.layouts import STRATEGY_COMPLEXITY, pipeline_stages
from advisor.engine.models import Charge, MemoryBreakdown, Recipe, trusted
from advisor.engine.options import (
    Candidate,
    Costs,
    NodeFacts,
    gb,
    inference_shards,
    nodes_for,
    spans_without_network,
)
from advisor.engine.recipe import Choice
from advisor.engine.words import plural, strategy_words

# Why a limited system's option sits below the available ones (ranking.RankKey.limited).
LIMITED_RANKS_AFTER = (
    "Options on fully available systems are ranked before it; it is offered for when none of "
    "them can run the job."
)


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
        # Inference requests are independent: the rented VMs serve a copy of the model on every
        # n of their GPUs, each its share of the prompts, at the same GPU hours.
        copies = billed // n if not self.training and billed > n else 1
        busy = n * copies  # GPUs at work
        if gpu_hours is None:
            rank_cost = None
            if rank_hours is not None and f.rate.value is not None and f.rate.per_unit is not None:
                rank_cost = rank_hours / busy * billed * f.rate.value * f.rate.per_unit
            return Costs(nodes, None, None, None, None, None, None, None, rank_cost)
        contingency = gpu_hours * self.contingency_rate
        requested = gpu_hours + contingency
        if copies > 1:
            reasons.append(
                f"runs {copies} copies of the model on the {billed} GPUs of the {f.node.name} "
                f"it rents (billed whole), {plural(n, 'GPU')} each, each serving its share of "
                f"the prompts: about {gpu_hours / busy:,.1f} h of wall time instead of "
                f"{gpu_hours / n:,.1f} h; the GPU hours stay the same."
            )
        elif billed > n and f.price is not None:
            reasons.append(f"billed for the whole {f.node.name} ({billed} GPUs) while using {n}.")
        cost = charged = compared = None
        if f.price is not None:
            cost = round(requested / busy * billed * f.price, 2)
        rate = f.rate
        if rate.value is not None:
            charged = round(requested / busy * billed * rate.value, 2)
            if rate.per_unit is None:
                reasons.append(rate.comparison + ".")  # ranked like an unknown charge
            else:
                # Not rounded again: at 0.01 USD per Service Unit, 8.90 and 9.49 SU both round
                # to 0.09 USD, and the ranking would read the cheaper as a tie.
                compared = charged * rate.per_unit
        return Costs(
            nodes, gpu_hours, contingency, requested, gpu_hours / busy, cost, charged, compared,
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
        recipe: Recipe | None,
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
        acc, system, level = f.acc, f.system, recipe.checkpointing if recipe else "full"
        if not self.training and (recipe.tp > 1 or strategy == "pipeline_parallel"):
            stages = pipeline_stages(f.node, n, strategy)
            if stages > 1:  # vLLM over nodes (tensor parallel within each), or over a node
                recipe = recipe.model_copy(update={"tp": n // stages, "pp": stages})
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
            # What the recipe's GPU hours used (speed.Utilisation.for_recipe).
            "utilisation": f.util.for_recipe(level),
            "utilisation_source": f.util.label_for_recipe(level),
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
                    deadline_grade(wall, self.target),
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


def deadline_grade(wall: float | None, target: float) -> int:
    """The deadline tie-breaker's first value: 0 meets the wall-time target, 1 misses it but
    finishes within an allocation period (six months), 2 would not even do that: a plan of
    years ranks after one of weeks, whatever either is charged."""
    if wall is None or wall <= target:
        return 0
    return 1 if wall <= c.ALLOCATION_PERIOD_HOURS.value else 2
