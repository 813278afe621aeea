"""The time of a training option under its parallel layout, and the tensor x data parallel
options: which tensor-parallel degree a node gets and why.

`ParallelPlanning` is a mixin for recommend.Evaluation, which supplies the request's terms
(shape, wl, tokens, pinned_tp) and the sizing it shares with every strategy (plan, breakdown,
search_for). Tensor parallelism is a recipe knob: for each degree the node allows
(tensor_parallel.degrees) the option is sized like any other strategy, and the degree that
fits with headroom in the fewest GPU hours wins; the tensor-parallel collectives
(tensor_parallel.py), CPU offload's host traffic (offload.py) and the optimizer steps on the
GPUs (optimizer_step.py) are part of those hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from advisor.engine import offload, optimizer_step, scale_cost
from advisor.engine import tensor_parallel as tp_layout
from advisor.engine.compute import (
    lora_adapter_gpu_hours,
    qlora_dequant_gpu_hours,
    training_gpu_hours,
)
from advisor.engine.frameworks import Framework
from advisor.engine.memory_terms import lora_trainable_params
from advisor.engine.models import (
    AcceleratorSpec,
    Assumption,
    EstimateRequest,
    NodeTypeSpec,
    Option,
    Recipe,
)
from advisor.engine.options import NodeFacts, Planned, gb, nodes_for, trusted
from advisor.engine.recipe import Choice
from advisor.engine.recipe_reasons import LEVEL_WORDS
from advisor.engine.words import plural


class ParallelPlanning:
    """Mixin for recommend.Evaluation (see the module docstring)."""

    def training_hours(self, f: NodeFacts, k: int, strategy: str, choice: Choice) -> float:
        """GPU hours of `k` GPUs with the recipe `choice` under the layout `strategy`."""
        _, tp, _ = tp_layout.split(strategy, k)
        pp = tp_layout.stages(strategy) if tp > 1 else 1
        # The recipe's recomputation and micro-batch size set the FLOPs and utilisation.
        util = f.util.for_recipe(choice.level) * choice.efficiency
        # The data-parallel exchange against each optimizer step's compute (scale_cost.py;
        # a TP layout's data-parallel ranks shard the optimizer, Megatron's zero1; each holds
        # 1 / (tp x pp) of the parameters), then the tensor-parallel collectives of every
        # layer, then the pipeline bubble: (p - 1) / m of the compute with m micro-batches
        # per pipeline per step.
        eff = self.step_model.efficiency(
            f.node,
            f.acc.name,
            k,
            "zero1" if tp > 1 else strategy,
            global_batch=choice.global_batch,
            micro=choice.micro,
            flops_per_token=choice.flops_per_token,
            achieved_flops=f.peak * util * 1e12,
            recompute=choice.level == "full",
            tp=tp * pp,
        )
        if tp > 1:
            eff *= self.tp_efficiency(f, tp, choice)
        if pp > 1:
            eff /= 1 + tp_layout.bubble(pp, choice.accumulation)
        # Waiting for the slowest rank and restarting after interruptions (scale_cost.py).
        eff *= scale_cost.scale_efficiency(k, f.util.measured_gpus)
        hours = training_gpu_hours(
            self.shape, self.wl, self.timing_tokens, f.peak, util, eff, choice.flops_per_token
        )
        if self.wl.adapters:
            hours += self.adapter_hours(f.acc.memory_bandwidth_gb_s, choice)
        if self.wl.rollout is not None:
            hours += self.generation_hours(f, k, strategy, choice)
        if strategy == "zero3_offload":
            hours += self.offload_hours(f, k, choice)
        else:
            hours += self.optimizer_hours(f.acc.memory_bandwidth_gb_s, k, strategy, choice)
        return hours

    def optimizer_hours(
        self, bandwidth_gb_s: float, k: int, strategy: str, choice: Choice
    ) -> float:
        """The optimizer steps' GPU hours (optimizer_step.py), worked out once for each
        optimizer, split, GPU count, bandwidth and global batch."""
        whole = strategy in optimizer_step.WHOLE_ON_EACH_GPU
        key = (choice.optimizer, whole, k, bandwidth_gb_s, choice.global_batch)
        found = self.optimizer_memo.get(key)
        if found is None:
            found = self.optimizer_memo[key] = optimizer_step.step_gpu_hours(
                self.shape,
                self.wl,
                choice.optimizer,
                strategy,
                k,
                bandwidth_gb_s,
                self.timing_tokens,
                choice.global_batch,
            )
        return found

    def adapter_hours(self, bandwidth_gb_s: float, choice: Choice) -> float:
        """What LoRA adds at memory speed: its adapters' own traffic and, for QLoRA, the
        dequantisation of the 4-bit base per pass and micro-batch (compute.py). The same for
        every option with the GPU's bandwidth and the recipe's micro-batch and recomputation,
        so it is worked out once for each."""
        key = (bandwidth_gb_s, choice.micro, choice.level)
        found = self.adapter_memo.get(key)
        if found is None:
            recompute = choice.level == "full"
            tokens = self.timing_tokens
            found = lora_adapter_gpu_hours(self.shape, self.wl, bandwidth_gb_s, tokens, recompute)
            found += qlora_dequant_gpu_hours(
                self.shape, self.wl, bandwidth_gb_s, tokens, choice.micro, recompute
            )
            self.adapter_memo[key] = found
        return found

    def tp_efficiency(self, f: NodeFacts, tp: int, choice: Choice) -> float:
        """Share of the GPU time left to compute after `tp`-way collectives on the node."""
        bandwidth, _ = tp_layout.bus_bandwidth(f.node, f.acc)
        achieved = f.peak * 1e12 * f.util.for_recipe(choice.level) * choice.efficiency
        own = tp_layout.efficiency(
            self.shape, self.wl, tp, choice.level, choice.flops_per_token, achieved, bandwidth
        )
        return tp_layout.without_measured_layout(own, self.shape.hidden_size, f.util.tp_width)

    def offload_hours(self, f: NodeFacts, k: int, choice: Choice) -> float:
        """GPU hours the `k` GPUs wait on the host link and the CPU optimizer (offload.py)."""
        shape, wl = self.shape, self.wl
        trainable = lora_trainable_params(shape, wl) if wl.adapters else shape.params_total
        steps = self.timing_tokens / max(choice.global_batch * wl.sample_tokens, 1)
        cores = offload.cores_per_gpu(f.node.cpu_cores, f.node.gpus_per_node)
        per_step = offload.seconds_per_step(
            trainable, shape.params_total, k, choice.accumulation, cores
        )
        return steps * per_step * k / 3600

    def size_for_host(
        self,
        f: NodeFacts,
        allowed: tuple[int, ...],
        sized: tuple[int | None, int | None, int, Choice],
        recipe_at: Callable[[int], Choice],
        reasons: list[str],
    ) -> tuple[int | None, int | None, int, Choice]:
        """RecipeSearch.plan's (n_fit, n_head, n, choice) for CPU offload, moved up to the
        smallest allowed count whose nodes' memory also holds their share of the offloaded
        states (`host_bytes`, as the host check in options.memory_reasons computes it), with
        that count's own recipe. Unchanged where the catalog gives no memory for the node,
        where no count fits the GPUs, or where no allowed count's nodes hold the states (the
        host check then says why)."""
        n_fit, n_head, n, choice = sized
        ram = (f.node.ram_gb or 0) * 1e9
        if not ram or n_fit is None:
            return sized
        needed = self.host_bytes(f, n, choice)
        if needed <= ram:
            return sized
        for k in allowed:
            if k <= n:
                continue
            recipe = recipe_at(k)
            host = self.host_bytes(f, k, recipe)
            if host <= ram:
                reasons.append(
                    f"CPU offload uses {k} GPUs on {plural(nodes_for(f.node, k), 'node')} so "
                    "that each node's memory holds its share of the offloaded states "
                    f"({gb(host)} of {f.node.ram_gb:g} GB); on {plural(n, 'GPU')} a node "
                    f"would keep {gb(needed)}."
                )
                return k, (k if n_head is not None else None), k, recipe
        return sized

    def tensor_parallel_terms(
        self, request: EstimateRequest, framework: Framework
    ) -> tuple[bool, int | None]:
        """(whether training tries tensor x data parallel, the pinned degree or None): only
        for libraries that train with it, unless the researcher pinned tensor_parallel 1; a
        pinned degree is the only one tried."""
        tried = self.training and framework.tensor_parallel_training
        tried = tried and request.tensor_parallel != 1
        return tried, request.tensor_parallel if tried else None

    def plan_layout(
        self, f: NodeFacts, strategy: str, allowed: tuple[int, ...], reasons: list[str]
    ) -> Planned:
        """The option's GPU count, recipe and memory: training's tensor parallelism picks
        its degree here; every other strategy is sized as it is."""
        if self.training and strategy == "tensor_parallel":
            planned = self.plan_tensor_parallel(f, reasons)
            if planned is not None:
                return planned
            return self.ruled_out_tensor_parallel(f, reasons)
        if self.wl.generates:
            return self.plan_generation(f, strategy, allowed, reasons)
        return self.plan_sized(f, strategy, allowed, reasons)

    def plan_sized(
        self, f: NodeFacts, strategy: str, allowed: tuple[int, ...], reasons: list[str]
    ) -> Planned:
        """`plan_layout` for a strategy sized as it is, on the node's stack."""
        sized = self.plan(f, strategy, allowed, reasons)
        breakdown, recipe, recipe_reasons = self.breakdown(
            strategy, sized.n, sized.choice, f.extra, *f.limits_for_recipe, f.stack
        )
        return Planned(*sized, breakdown, recipe, recipe_reasons, False)

    def ruled_out_tensor_parallel(self, f: NodeFacts, reasons: list[str]) -> Planned:
        """`plan_layout` for a node that allows no tensor-parallel degree: the option says
        why and carries no recipe, GPU hours or cost. Sized as "tensor_parallel" over every
        GPU, as inference shards, it would price a layout training cannot run (tp = every
        GPU allowed, e.g. 512, with heads that do not split). The memory breakdown is still
        filled (an option needs one); the option neither fits nor is eligible."""
        reasons.append(self.no_tensor_parallel(f))
        untimed = replace(f, timed=False, assumes=None)
        allowed = (f.counts[-1],)
        n, choice, _, n_fit, n_head = self.plan(untimed, "tensor_parallel", allowed, reasons)
        breakdown, _, _ = self.breakdown("tensor_parallel", n, choice, f.extra, stack=f.stack)
        return Planned(n, choice, None, n_fit, n_head, breakdown, None, [], True)

    def plan_tensor_parallel(self, f: NodeFacts, reasons: list[str]) -> Planned | None:
        """`plan_layout` for the best tensor-parallel degree on the node: fits,
        then headroom, then fewest GPU hours, fewest GPUs, smallest degree. None when the
        node allows no degree (one GPU per node, heads that do not split, a pinned degree
        larger than the node)."""
        best = None
        for tp in tp_layout.degrees(f.node.gpus_per_node, self.pinned_tp):
            if not self.splits_over(tp):
                continue
            for pp in self.pipeline_depths():
                found = self.plan_degrees(f, tp, pp)
                if found is None:
                    continue
                if best is None or found[0] < best[0]:
                    best = found
                if not found[0][1] and self.pinned_pp is None:
                    break  # fits with headroom: more stages only add a bubble
        if best is None:
            return None
        _, tp, pp, why, planned = best
        reasons.extend(why)
        need = planned.breakdown.total_bytes
        said = self.tensor_parallel_reason(f, tp, planned.n, planned.choice, need, pp)
        recipe_why = [said, *planned.recipe_reasons]
        recipe = trusted(Recipe, {**planned.recipe.__dict__, "reasons": recipe_why})
        return planned._replace(recipe=recipe, recipe_reasons=recipe_why)

    def splits_over(self, tp: int) -> bool:
        """Megatron splits whole attention heads and whole key/value groups; a single
        key/value head (multi-query attention) is kept whole on every rank, as BigCode's
        Megatron-LM fork trained StarCoder (TP 4, arXiv:2305.06161 section 5)."""
        shape = self.shape
        kv = shape.num_kv_heads
        return not shape.num_attention_heads % tp and (kv == 1 or not kv % tp)

    def pipeline_depths(self) -> tuple[int, ...]:
        """Stage counts tried, fewest first: 1 only, unless the library trains with pipeline
        parallelism (then the pinned count, or 1 and the depths that split the layers)."""
        if not self.framework.pipeline_parallel_training:
            return (1,)
        if self.pinned_pp is not None:
            return (self.pinned_pp,)
        return (1, *tp_layout.pipeline_depths(self.shape.total_layers))

    def plan_degrees(self, f: NodeFacts, tp: int, pp: int) -> tuple | None:
        """(rank, tp, pp, reasons, planned) of `tp` x `pp` on the node, or None when no
        allowed GPU count holds whole pipelines. Rank: fits, then headroom, then fewest GPU
        hours (where nothing fits, the least memory), fewest GPUs, smallest degrees."""
        allowed = tuple(k for k in f.several if k % (tp * pp) == 0)
        if not allowed:
            return None
        key = tp_layout.layout_key(tp, pp)
        why: list[str] = []
        sized = self.plan(f, key, allowed, why)
        breakdown, recipe, recipe_why = self.breakdown(
            key, sized.n, sized.choice, f.extra, *f.limits_for_recipe, f.stack
        )
        need = breakdown.total_bytes
        cost = (sized.gpu_hours or 0.0) if need <= f.capacity else float(need)
        rank = (need > f.capacity, need > f.headroom_limit, cost, sized.n, tp, pp)
        return rank, tp, pp, why, Planned(*sized, breakdown, recipe, recipe_why, False)

    def tensor_parallel_reason(
        self, f: NodeFacts, tp: int, n: int, choice: Choice, need: int, pp: int = 1
    ) -> str:
        """Why this degree: what it makes fit, against sharding on the same GPUs, and what its
        collectives (and pipeline bubble) cost."""
        dp = n // (tp * pp)
        layout = (
            f"tensor parallel {tp} within the node"
            + (f" x {pp} pipeline stages" if pp > 1 else "")
            + (f" x {dp} data parallel" if dp > 1 else "")
        )
        search = self.search_for(f.extra, f.stack)
        per_rank = math.ceil(search.global_batch / n)
        accumulation = max(1, math.ceil(per_rank / choice.micro))
        # Against the library's own alternative: ZeRO-3, FSDP (torchtune), or DDP where it
        # shards neither (Megatron).
        offered = self.framework.data_parallel
        other, other_strategy = "ZeRO-3", "zero3"
        if offered is not None and "zero3" not in offered:
            other, other_strategy = ("FSDP", "fsdp") if "fsdp" in offered else ("DDP", "ddp")
        alone = search.step_total(
            other_strategy, n, choice.level, choice.optimizer, choice.micro, accumulation
        )
        alone += f.extra
        if need <= f.capacity < alone:
            said = (
                f"{layout} makes it fit {n} x {f.capacity_gb} without offload; "
                f"{other} on the same GPUs with the same recipe (micro-batch "
                f"{choice.micro}, {LEVEL_WORDS[choice.level]}) would need {gb(alone)} per GPU"
            )
        else:
            said = (
                f"{layout}: weights, gradients and optimizer state split {tp * pp} ways, "
                f"activations with sequence parallelism ({gb(need)} per GPU)"
            )
        if f.peak:
            bandwidth, source = tp_layout.bus_bandwidth(f.node, f.acc)
            cost = 1 - self.tp_efficiency(f, tp, choice)
            said += (
                f"; its all-reduces over {source} ({bandwidth / 1e9:.0f} GB/s) take about "
                f"{cost:.0%} of the GPU time (in the GPU hours)"
            )
        if self.framework.tensor_parallel_last_resort:
            said += (
                f"; this is {self.framework.name}'s Megatron-DeepSpeed layout (pretrain_gpt.py), "
                "a different code base from DeepSpeed under the Transformers Trainer"
            )
        if pp > 1:
            idle = tp_layout.bubble(pp, choice.accumulation)
            said += (
                f"; the {pp}-stage pipeline idles (p - 1) / m = {pp - 1}/{choice.accumulation}"
                f" of the compute ({idle:.0%}, in the GPU hours; {choice.accumulation} "
                "micro-batches per pipeline per step)"
            )
        return said + "."

    def no_tensor_parallel(self, f: NodeFacts) -> str:
        gpn = f.node.gpus_per_node
        heads, kv_heads = self.shape.num_attention_heads, self.shape.num_kv_heads
        # Megatron splits whole key/value groups too (splits_over); a single key/value head
        # (multi-query attention) is kept whole on every rank.
        split = f"{heads} attention heads" + (
            f" and {plural(kv_heads, 'key/value head')}" if kv_heads not in (1, heads) else ""
        )
        if not self.shape.softmax_layers:  # a state-space model: its SSM heads and groups
            split = f"{heads} SSM heads and {kv_heads} groups" if heads else "the layers"
        if self.pinned_tp:
            return (
                f"tensor parallel {self.pinned_tp} needs {self.pinned_tp} GPUs in one node that "
                f"split the {split} evenly; {f.node.name} has {gpn} per node."
            )
        return (
            f"tensor parallelism needs at least 2 GPUs in one node that split the "
            f"{split} evenly; {f.node.name} has {gpn} per node."
        )


def serving_layout_assumptions(
    option: Option, node: NodeTypeSpec, acc: AcceleratorSpec, framework: Framework
) -> list:
    """What a recommended tensor-parallel serving option assumes about its all-reduces (none
    where the library runs the GPUs one after another)."""
    recipe = option.recipe
    if (
        option.strategy != "tensor_parallel"
        or recipe is None
        or recipe.tp <= 1
        or framework.sequential_multi_gpu
    ):
        return []
    bandwidth, where = tp_layout.bus_bandwidth(node, acc)
    return [
        Assumption.model_construct(
            name="Tensor-parallel all-reduces",
            value=f"every forward pass (each prompt chunk and each decoding step) all-reduces "
            f"the hidden states twice per layer over the {recipe.tp} GPUs: about 9 us a call "
            "for small messages, from vLLM's own all-reduce measured on H100 (applied to every "
            f"library and link), larger messages at {bandwidth / 1e9:.0f} GB/s ({where})",
            source=tp_layout.VLLM_ALL_REDUCE_SOURCE + "; " + tp_layout.SOURCE,
        )
    ]


def layout_assumptions(option: Option, node: NodeTypeSpec, acc: AcceleratorSpec) -> list:
    """What the recommended option's parallel layout assumes about time: the tensor-parallel
    link, or CPU offload's host link and CPU optimizer."""
    recipe = option.recipe
    out: list[Assumption] = []
    if option.strategy == "tensor_parallel" and recipe is not None and recipe.tp > 1:
        bandwidth, where = tp_layout.bus_bandwidth(node, acc)
        out.append(
            Assumption.model_construct(
                name="Tensor-parallel all-reduces",
                value=f"{bandwidth / 1e9:.0f} GB/s per GPU ({where}); per layer and token 4 "
                "collectives of the hidden state (6 with full recomputation), on the critical "
                "path (no communication overlap)",
                source=tp_layout.SOURCE,
            )
        )
    if option.strategy == "zero3_offload":
        out.append(offload.HOST_LINK.assumption(f"{offload.HOST_LINK.value / 1e9:.0f} GB/s"))
        out.append(offload.CPU_ADAM_PARAMS_PER_CORE.assumption())
    return out
