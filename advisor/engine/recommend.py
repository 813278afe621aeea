"""Try every active system / accelerator / strategy in the catalog and rank what fits.

For each node type and strategy (candidate generation: `Evaluation.candidates`, with the GPU
counts and strategies from layouts.py) the recipe search finds the fewest GPUs that fit with
headroom and the cheapest recipe there (`Evaluation.plan`, recipe.py); memory per GPU never
grows with more GPUs, so a scan that stops at the first count that fits is enough. Then the
option's costs (`costs`), the reasons a researcher reads, and its ranking key (`candidate`,
ranking.RankKey flattened); `options.rank` sorts. Rejections keep their numbers and say why
in plain words.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from advisor.engine import constants as c
from advisor.engine import ranking, software
from advisor.engine import tensor_parallel as tp_layout
from advisor.engine.compute import (
    decode_steps,
    inference_gpu_hours,
    scaling_efficiency,
    training_step_model,
)
from advisor.engine.frameworks import cuda_context_bytes, framework_for
from advisor.engine.generation_options import GenerationPlanning
from advisor.engine.generations import generation
from advisor.engine.layouts import (
    partitions_by_node,
    pipeline_stages,
    strategies_for,
    system_rejections,
)
from advisor.engine.memory import MemoryModel, Workload
from advisor.engine.models import (
    AcceleratorSpec,
    EstimateRequest,
    MemoryBreakdown,
    RankingPolicySpec,
    Recipe,
    SystemSpec,
)
from advisor.engine.node_facts import FactGathering, utilisation_reason
from advisor.engine.option_writing import OptionWriting
from advisor.engine.options import (
    FULL_STACK,
    RANKING_TOKENS,
    AcceleratorFacts,
    Candidate,
    NodeFacts,
    Sized,
    Stack,
    spans_without_network,
    trusted,
    wall_target,
)
from advisor.engine.parallel_options import ParallelPlanning
from advisor.engine.preference import needs_trl_trainer
from advisor.engine.recipe import Choice, RecipeSearch
from advisor.engine.serving_options import SPLIT_SERVING, Served, ServingPlanning
from advisor.engine.shape import ModelShape
from advisor.engine.speed import job_distances
from advisor.engine.tensor_parallel import generation_collectives_seconds
from advisor.engine.widening import fill_vms, widen
from advisor.engine.words import STRATEGY_NAMES, plural


def _distances_by_generation(measured: tuple, shape: ModelShape, wl: Workload) -> dict:
    """How far each benchmark is from the job (speed.job_distances), by GPU generation in
    their order: an accelerator's utilisation looks only at its own generation's (its own
    chip's are among them), so each accelerator reads its few instead of every benchmark in
    the catalog. Inference times its prompts from them too (speed.prefill_utilisation)."""
    by_generation: dict[str, list] = {}
    for entry in job_distances(
        measured,
        task=wl.task,
        precision=wl.precision,
        params=shape.params_total,
        seq_len=wl.seq_len,
        batch=wl.batch_size,
    ):
        by_generation.setdefault(entry[1].generation, []).append(entry)
    return by_generation


def _gpu_limit(request: EstimateRequest) -> int | None:
    """The most GPUs an option may use: the constraint and a pinned count, the smaller."""
    limit = request.constraints.max_gpus
    if request.num_gpus is not None:
        limit = request.num_gpus if limit is None else min(limit, request.num_gpus)
    return limit


class Evaluation(
    FactGathering, OptionWriting, ParallelPlanning, GenerationPlanning, ServingPlanning
):
    """One estimate's pass over the catalog: what the request fixes, worked out once, and the
    caches that live for this estimate only (so nothing carries over to the next one;
    tests/engine/test_ranking_caches.py). The options are generated per system, node type and
    strategy (`candidates`); each gets its recipe and GPU count (`plan`), its costs (`costs`),
    the reasons a researcher reads, and its place in the ranking (`candidate`).

    Work is shared wherever the inputs are the same: per accelerator (`on_accelerator`), per
    node layout (`layout`), the sizing scan per (strategy, allowed counts, capacity), memory per
    (strategy, GPU count, recipe), inference GPU hours per (accelerator, GPU count, scaling
    efficiency). The goal is a thousand estimates a second (bench/engine_rankings.py).
    """

    def __init__(
        self,
        request: EstimateRequest,
        shape: ModelShape,
        wl: Workload,
        accelerators: dict[str, AcceleratorSpec],
        measured: tuple,
        policy: RankingPolicySpec | None = None,
    ) -> None:
        self.request, self.shape, self.wl = request, shape, wl
        self.training = training = wl.training
        policy = policy or RankingPolicySpec()
        self.currency = policy.currency
        self.pick_ties = ranking.tie_picker(ranking.order(policy))
        self.profile_rates = {rate.accelerator: rate for rate in policy.charge_rates}
        self.accelerators = accelerators
        self.generations = {name: generation(acc) for name, acc in accelerators.items()}
        self.distances_by_generation = _distances_by_generation(measured, shape, wl)
        self.tools_needed = software.job_needs(request, shape, wl)
        self.tokens = None
        if request.tokens is not None:
            self.tokens = request.tokens * (request.epochs if training else 1)
        # What the GPU hours are worked out for: the job's tokens, or where it gave none a
        # nominal count that only orders the options by cost (Costs.rank_cost).
        self.timing_tokens = self.tokens if self.tokens is not None else RANKING_TOKENS
        self.adapter_memo: dict[tuple, float] = {}  # parallel_options.adapter_hours
        self.optimizer_memo: dict[tuple, float] = {}  # parallel_options.optimizer_hours
        self.generation_memo: dict[tuple, float] = {}  # parallel_options.generation_hours
        self.limit = _gpu_limit(request)
        self.margin = c.MEMORY_MARGIN.value
        self.margin_pct = f"{self.margin:.0%}"
        self.contingency_rate = c.CONTINGENCY.value
        self.with_contingency = 1 + self.contingency_rate
        self.max_wall = max_wall = request.constraints.max_wall_hours
        self.target = wall_target(max_wall)
        self.splits_heads = wl.task == "inference"  # tensor parallelism splits the heads evenly
        self.free_choice = request.strategy is None
        # vLLM serves one model over several nodes: tensor parallel within each, pipeline
        # stages across them (docs.vllm.ai, 'Parallelism and Scaling'); transformers' and
        # TGI's inference stays within one node.
        self.spans_nodes = not training and request.framework == "vllm"
        framework, _ = framework_for(request.framework, training, needs_trl_trainer(request))
        # One recipe search for the estimate. Pre-Ampere NVIDIA GPUs carry the larger CUDA
        # context of their era's stack (frameworks.cuda_context_bytes): a constant more per
        # GPU, so their options search the same recipes against a capacity that much smaller.
        context = cuda_context_bytes(framework, False)
        self.legacy_extra = cuda_context_bytes(framework, True) - context
        self.context, self.framework = context, framework
        self.tp_training, self.pinned_tp = self.tensor_parallel_terms(request, framework)
        self.pinned_pp = request.pipeline_parallel
        self.tp_last_resort = framework.tensor_parallel_last_resort
        search = RecipeSearch(shape, wl, request, framework, MemoryModel(shape, wl, context))
        # Those stacks are PyTorch 1.x, whose zero_grad() zeroed gradients in place instead of
        # freeing them: gradients coexist with activations (memory.py), a second search for
        # training on pre-Ampere GPUs only. GPUs where bitsandbytes' 8-bit optimizers do not
        # run search without 8-bit AdamW, those without a fused attention kernel with eager
        # attention. (extra context, options.Stack) -> its search.
        self.searches: dict[tuple[float, Stack], RecipeSearch] = {(0.0, FULL_STACK): search}
        # (strategy, GPU count, recipe, extra context, the limits it was sized for, stack)
        # -> (breakdown, recipe, its reasons).
        # Recipes are shared objects within an estimate, so their identity names them.
        self.breakdowns: dict[tuple, tuple] = {}
        # (strategy, allowed counts, capacity, extra context) -> RecipeSearch.plan's answer
        self.sized: dict[tuple, tuple] = {}
        self.per_accelerator: dict[tuple[str, bool], AcceleratorFacts] = {}
        self.hours_memo: dict[tuple, float] = {}  # Evaluation.hours for inference
        self.filled: dict[int, Workload] = {}  # sequences at once -> the workload with them
        # The node's single-GPU layout where it runs short of KV cache (serving_options.py).
        self.alone_short: Served | None = None
        # The data-parallel exchange per optimizer step (scale_cost.py), for training_hours.
        self.step_model = training_step_model(shape, wl) if self.training else None
        self.layouts: dict[tuple, tuple] = {}

    # --- shared per accelerator, per layout, per recipe ---

    def search_for(self, extra: float, stack: Stack = FULL_STACK) -> RecipeSearch:
        """The recipe search for a stack with `extra` CUDA context (0: the request's own),
        with or without bitsandbytes' 8-bit optimizers and a fused attention kernel
        (`stack`): each variant shares what the others computed that it does not change."""
        found = self.searches.get((extra, stack))
        if found is not None:
            return found
        base = self.searches[(0.0, FULL_STACK)]
        if stack.generation_tp > 1:
            # GRPO's vLLM split over more GPUs: the same search but for its share of each GPU.
            whole = self.search_for(extra, stack._replace(generation_tp=1))
            model = MemoryModel(
                self.shape, whole.wl, whole.model.context, like=whole.model,
                generation_tp=stack.generation_tp,
            )  # fmt: skip
            found = RecipeSearch(
                self.shape, whole.wl, self.request, self.framework, model,
                eight_bit=stack.eight_bit,
            )  # fmt: skip
        elif not stack.flash and self.training and self.wl.flash_attention:
            fused = self.search_for(extra, Stack(stack.eight_bit, True))
            eager = replace(fused.wl, flash_attention=False)
            model = MemoryModel(
                self.shape, eager, self.context, like=fused.model, same_activations=False
            )
            found = RecipeSearch(
                self.shape, eager, self.request, self.framework, model, eight_bit=stack.eight_bit
            )
        elif not stack.eight_bit and self.training:
            found = self.search_for(extra, Stack(True, stack.flash)).without_eight_bit(self.request)
        elif extra and self.training and not self.wl.keeps_gradients:
            old = replace(self.wl, keeps_gradients=True)
            model = MemoryModel(self.shape, old, self.context, like=base.model)
            found = RecipeSearch(self.shape, old, self.request, self.framework, model)
        else:
            found = base
        self.searches[(extra, stack)] = found
        return found

    def breakdown(
        self,
        strategy: str,
        n: int,
        choice: Choice,
        extra: float,
        capacity: float | None = None,
        headroom_limit: float | None = None,
        stack: Stack = FULL_STACK,
    ) -> tuple:
        """(memory breakdown, recipe, the recipe's reasons) for one layout on one stack; the
        options with that layout share them. `capacity` and `headroom_limit`: the bytes per
        GPU the recipe was sized for, whole and with the margin kept free (the reasons say
        what a smaller recipe would have fitted)."""
        if not self.training:  # only training's reasons read them
            capacity = headroom_limit = None
        key = (strategy, n, id(choice), extra, capacity, headroom_limit, stack)
        found = self.breakdowns.get(key)
        if found is not None:
            return found
        search = self.search_for(extra, stack)
        parts = search.parts(strategy, n, choice)
        if extra:
            parts["cuda_context"] += int(extra)
            parts["total_bytes"] += int(extra)
        why = search.reasons(choice, strategy, n, extra, capacity, headroom_limit)
        found = self.breakdowns[key] = (
            trusted(MemoryBreakdown, parts),
            trusted(Recipe, search.recipe_fields(choice, strategy, n, why)),
            why,
        )
        return found

    def hours(self, f: NodeFacts, k: int, strategy: str, choice: Choice) -> float:
        if self.training:
            return self.training_hours(f, k, strategy, choice)  # parallel_options.py
        stages = pipeline_stages(f.node, k, strategy)
        # Pipeline stages on different nodes pass one hidden state per token between them, far
        # below any link's bandwidth: only each node's tensor-parallel group pays its link, in
        # all-reduces timed per pass (tensor_parallel.py).
        tp = k // stages if strategy == "tensor_parallel" else 1
        sequential = self.framework.sequential_multi_gpu and k > 1
        eff = (
            1.0 if tp > 1 and not sequential else scaling_efficiency(f.node, k // stages, strategy)
        )
        wl = self.wl
        if wl.fills_kv_cache:
            wl = self.filled_workload(f, k, strategy, choice)
        if wl.batch_size < stages:
            # vLLM keeps a pipeline busy with one batch per stage in flight; fewer sequences
            # than stages leave the others waiting.
            eff *= wl.batch_size / stages
        elif stages > 1:
            # Each stage's read of its weights serves the one batch on it: a stage's share of
            # the sequences in flight (serving_options.py).
            wl = self.micro_batch_workload(wl, stages)
        key = (f.acc.name, k, eff, wl.batch_size, stages, tp, f.node.intra_node_interconnect)
        found = self.hours_memo.get(key)
        if found is None:
            if sequential:
                # device_map="auto": one GPU works at a time, the others hold their layers.
                one = inference_gpu_hours(self.shape, wl, f.acc, self.timing_tokens, f.peak,
                                          f.util.value, 1, 1.0)  # fmt: skip
                found = self.hours_memo[key] = one * k
            else:
                waits = generation_collectives_seconds(
                    self.shape, wl, tp, decode_steps(wl), f.node, f.acc, stages
                )
                found = self.hours_memo[key] = inference_gpu_hours(
                    self.shape, wl, f.acc, self.timing_tokens, f.peak, f.util.value, k, eff,
                    collectives=waits, tp=tp,
                )  # fmt: skip
        return found

    # --- candidate generation ---

    def candidates(self, systems: list[SystemSpec]) -> list[Candidate]:
        """Every system / node type / strategy sized for the request, unranked."""
        out: list[Candidate] = []
        for system in systems:
            sys_reasons = system_rejections(self.request, system)
            strategies = strategies_for(
                self.request, self.wl, system, tensor_parallel=self.tp_training,
                library=self.framework if self.training else None,
            )  # fmt: skip
            partitions = partitions_by_node(system) if system.partitions else {}
            for node in system.node_types:
                acc = self.accelerators.get(node.accelerator)
                if acc is not None:
                    facts = self.node_facts(system, node, acc, sys_reasons, partitions)
                    out.extend(self.node_options(facts, strategies))
        return out

    def node_options(
        self, f: NodeFacts, strategies: list[tuple[str, str | None]]
    ) -> list[Candidate]:
        """The options on one node type, one per strategy worth trying."""
        out = []
        single_fits = fits_elsewhere = False
        self.alone_short = None
        for strategy, unavailable in strategies:
            # Training's tensor parallelism combines with data parallel across nodes.
            tp_training = self.training and strategy == "tensor_parallel"
            allowed = f.several if tp_training else f.allowed(strategy)
            if strategy == "tensor_parallel" and self.spans_nodes:
                allowed = allowed + f.whole_nodes()
            if not allowed and strategy != "single":
                continue  # e.g. multi-GPU strategies where a job gets one GPU: not tried
            # Tensor parallelism when one GPU is enough, and CPU offload when an on-GPU
            # strategy fits, would never rank first: not tried unless asked for.
            # A server short of KV cache on one GPU may cost less over several
            # (serving_options.py).
            if strategy == "pipeline_parallel" and f.node.intra_node_interconnect != "pcie":
                continue  # over NVLink and the like tensor parallelism's all-reduces are cheap
            if self.free_choice and (
                (strategy in SPLIT_SERVING and single_fits and not self.alone_short)
                or (strategy == "zero3_offload" and fits_elsewhere)
                or (strategy == "tensor_parallel" and fits_elsewhere and self.tp_last_resort)
            ):
                continue
            cand = self.option(f, strategy, unavailable, allowed)
            out.append(cand)
            # Nodes without a cluster network between them rank after CPU offload on one. An
            # option outside the GPU counts allowed (one GPU when two were asked for) is no
            # reason to skip the layouts that are allowed.
            usable = bool(allowed)
            fits = (
                usable
                and cand.fields["fits"]
                and not spans_without_network(f.node, cand.fields["nodes"])
            )
            fits_elsewhere = fits_elsewhere or fits
            if strategy == "single" and usable and cand.headroom:
                single_fits = True
                self.alone_short = self.single_is_short(f)
            if f.reasons and cand.headroom:
                # Ruled out whatever the strategy (retired, a constraint, no bf16): one
                # option with its numbers says why; the other strategies add nothing.
                break
        return out

    # --- one option ---

    def option(
        self, f: NodeFacts, strategy: str, unavailable: str | None, allowed: tuple[int, ...]
    ) -> Candidate:
        reasons = list(f.reasons)
        if unavailable:
            reasons.append(unavailable + ".")
        hard = bool(reasons)  # system/accelerator-level rejections
        if f.changes is not None and not hard:
            reasons.append(f.changes + ".")
        if not allowed:
            allowed = (f.counts[-1],)
            hard = True
            reasons.append(
                f"This layout uses one GPU; the job is to use {plural(f.counts[0], 'GPU')}."
                if strategy == "single"
                else f"{STRATEGY_NAMES.get(strategy, strategy)} needs more than the "
                f"{plural(f.counts[-1], 'GPU')} allowed here."
            )
        pinned = self.request.strategy
        if strategy == "single" and pinned not in (None, "single") and not hard:
            # layouts.strategies_for offers one GPU beside a pinned strategy when the count is
            # not pinned: say so, or the pin reads as ignored.
            reasons.append(
                f"One GPU holds this job: {STRATEGY_NAMES.get(pinned, pinned)}, which you asked "
                "for, would have nothing to split; give num_gpus to run it on more GPUs."
            )
        planned = self.plan_layout(f, strategy, allowed, reasons)  # parallel_options.py
        n, choice, gpu_hours, n_fit, n_head, breakdown, recipe, recipe_reasons, ruled_out = planned
        if recipe is not None and (recipe.generation_tp or 1) > 1:
            # GRPO's vLLM spans GPUs (plan_generation): its hours, here too, are that layout's.
            f = replace(f, stack=f.stack._replace(generation_tp=recipe.generation_tp))
        hard = hard or ruled_out
        need = breakdown.total_bytes
        reasons.extend(recipe_reasons)
        if ruled_out:  # no layout to fit (parallel_options.ruled_out_tensor_parallel)
            fits = headroom = False
        else:
            fits, headroom = self.memory_reasons(
                f, strategy, n, choice, need, n_fit, n_head, reasons
            )
        if self.framework.sequential_multi_gpu and strategy == "tensor_parallel" and n > 1:
            reasons.append(
                f"{self.framework.name} spreads the layers over the {n} GPUs "
                '(device_map="auto"), and they run one after another: as long as one GPU with '
                f"all the memory would take, at {n} x its GPU hours. vLLM, or Transformers 4.49 "
                'or newer with tp_plan="auto", runs them together.'
            )
        elif self.splits_heads and strategy == "tensor_parallel":
            # Over nodes the heads split within each node; each node holds a pipeline stage.
            stages = pipeline_stages(f.node, n, strategy)
            tp = n // stages
            if not tp_layout.vllm_splits_heads(self.shape, tp):
                hard = True
                what = "attention heads" if self.shape.softmax_layers else "SSM heads"
                reasons.append(
                    f"{self.shape.num_attention_heads} {what} do not split over {tp} GPUs."
                )
            elif stages > 1:
                reasons.append(
                    f"The model is split over {stages} nodes as vLLM serves one larger than a "
                    f"node: tensor parallel over the {tp} GPUs of each node, one pipeline stage "
                    "per node (tensor_parallel_size x pipeline_parallel_size), on a Ray cluster."
                )
                idle = self.idle_stages_reason(f, n, strategy)
                if idle:
                    reasons.append(idle)
        elif strategy == "pipeline_parallel":
            reasons.extend(self.pipeline_reasons(f, n))
        rank_hours = None
        if gpu_hours is None and self.tokens is None and f.peak and recipe is not None:
            # No token count: the option's hours for a nominal one, to rank by cost per token.
            layout = strategy
            if self.training and strategy == "tensor_parallel":
                layout = tp_layout.layout_key(recipe.tp, recipe.pp)
            rank_hours = self.hours(f, n, layout, choice)
        costs = self.costs(f, n, gpu_hours, reasons, rank_hours)
        eligible = self.schedule_reasons(f, costs, n, reasons) and not hard and fits
        return self.candidate(
            f, strategy, n, breakdown, recipe, costs, fits, headroom, eligible, reasons
        )

    def plan(
        self, f: NodeFacts, strategy: str, allowed: tuple[int, ...], reasons: list[str]
    ) -> Sized:
        """The fewest GPUs that fit with headroom and their cheapest recipe, widened to more
        GPUs while they pay when the run would take longer than the target (widening.py).
        Adds the reasons for the count and the memory."""
        search = self.search_for(f.extra, f.stack)
        capacity, headroom_limit = f.capacity - f.extra, f.headroom_limit - f.extra
        size_key = (strategy, allowed, capacity, f.extra, f.stack)
        found = self.sized.get(size_key)
        if found is None:
            found = self.sized[size_key] = search.plan(strategy, allowed, capacity, headroom_limit)
        recipe_at = partial(search.at, strategy, capacity=capacity, headroom_limit=headroom_limit)

        def hours_at(k: int, recipe: Choice) -> float:
            return self.hours(f, k, strategy, recipe)

        n_fit, n_head, n, choice = found
        if strategy == "zero3_offload":  # the nodes' memory must hold the offloaded states too
            n_fit, n_head, n, choice = self.size_for_host(f, allowed, found, recipe_at, reasons)
        gpu_hours = None
        if f.dtype_note is not None:
            reasons.append(f.dtype_note)
        if f.attention_note is not None:
            reasons.append(f.attention_note)
        if f.assumes is not None:
            reasons.append(utilisation_reason(f, choice.level if choice is not None else "full"))
        if f.timed:
            gpu_hours = self.hours(f, n, strategy, choice)
            # A long inference job is split into shards at the same GPU hours
            # (options.inference_shards) rather than widened; a server short of KV cache
            # takes more GPUs where they cost fewer GPU hours (serving_options.py).
            if not self.training and strategy in SPLIT_SERVING and n_fit is not None:
                n, choice, gpu_hours = self.serving_degree(
                    f, strategy, allowed, n, choice, gpu_hours, recipe_at, reasons
                )
            elif self.training and gpu_hours / n > self.target and n_fit is not None:
                n, choice, gpu_hours, said = widen(
                    f.node, allowed, n, choice, gpu_hours, target=self.target,
                    deadline=self.max_wall is not None, recipe_at=recipe_at, hours_at=hours_at,
                )  # fmt: skip
                reasons.append(said)
        if self.training and f.cloud and f.peak and n_fit is not None:
            # Every GPU of the cloud VMs it rents, where that shortens the run (widening.py).
            filled = fill_vms(
                f.node, allowed, n, choice, gpu_hours, recipe_at=recipe_at, hours_at=hours_at
            )
            if filled is not None:
                n, choice, gpu_hours, said = filled
                reasons.append(said)
        return Sized(n, choice, gpu_hours, n_fit, n_head)


def evaluate(
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    systems: list[SystemSpec],
    accelerators: dict[str, AcceleratorSpec],
    measured: tuple,
    policy: RankingPolicySpec | None = None,
) -> list[Candidate]:
    """Every system / node type / strategy sized for `request`, unranked (see Evaluation)."""
    return Evaluation(request, shape, wl, accelerators, measured, policy).candidates(systems)
