"""GRPO's generation as part of an option's plan: how many GPUs each colocated vLLM engine
spans (rollouts.py; TRL's vllm_tensor_parallel_size) and what its rounds cost.

`GenerationPlanning` is a mixin for recommend.Evaluation beside ParallelPlanning, whose
`plan_layout` sends a job that generates here: each option is sized once per degree the node
allows, as training's tensor-parallel degree is (parallel_options.plan_tensor_parallel).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import rollouts
from advisor.engine.models import Recipe
from advisor.engine.options import NodeFacts, Planned, gb, trusted
from advisor.engine.recipe import Choice
from advisor.engine.speed import prefill_utilisation
from advisor.engine.words import plural


class GenerationPlanning:
    """Mixin for recommend.Evaluation (see the module docstring)."""

    def generation_hours(self, f: NodeFacts, k: int, strategy: str, choice: Choice) -> float:
        """GRPO's generation rounds (rollouts.py): each data-parallel rank's vLLM samples its
        share of every step's completions, or each group of the node's GPUs theirs together
        over vLLM's tensor parallelism (`f.stack.generation_tp`), its prompt passes at the
        chip's prompt-pass utilisation; once per GPU, count, batch, degree and link."""
        per_gpu = rollouts.per_gpu_sequences(choice.global_batch, strategy, k)
        util = prefill_utilisation(f.util).value
        degree = f.stack.generation_tp
        link = f.node.intra_node_interconnect
        key = (f.acc.name, f.peak, util, k, per_gpu, choice.global_batch, degree, link)
        found = self.generation_memo.get(key)
        if found is None:
            found = self.generation_memo[key] = rollouts.generation_gpu_hours(
                self.shape, self.wl, f.acc, f.node, self.timing_tokens, choice.global_batch,
                per_gpu, k, (f.peak, util), degree,
            )  # fmt: skip
        return found

    def plan_generation(
        self, f: NodeFacts, strategy: str, allowed: tuple[int, ...], reasons: list[str]
    ) -> Planned:
        """`plan_layout` for GRPO: the option sized for each vLLM tensor-parallel degree the
        node allows (rollouts.degrees) on the counts it divides, and the degree that fits,
        then with headroom, in the fewest GPU hours wins (then fewest GPUs, smallest degree).
        A larger degree shrinks vLLM's share of each GPU and reads the weights once for more
        completions, but every decoding step waits for its all-reduces: for the smallest
        models at small generation batches one engine per GPU stays faster."""
        open_here = rollouts.degrees(self.shape, f.node.gpus_per_node)
        pinned = self.request.generation_tensor_parallel
        if pinned is not None:
            if pinned not in open_here or not any(k % pinned == 0 for k in allowed):
                return self.ruled_out_generation(f, strategy, pinned, allowed, reasons)
            open_here = (pinned,)
        planned: dict[int, tuple] = {}
        for degree in open_here:
            counts = tuple(k for k in allowed if k % degree == 0)
            if not counts:
                continue
            at = replace(f, stack=f.stack._replace(generation_tp=degree))
            why: list[str] = []
            found = self.plan_sized(at, strategy, counts, why)
            need = found.breakdown.total_bytes
            hours = found.gpu_hours
            if hours is None and f.peak:  # no token count: the nominal job's, as option() ranks
                hours = self.hours(at, found.n, strategy, found.choice)
            cost = (hours or 0.0) if need <= f.capacity else float(need)
            rank = (need > f.capacity, need > f.headroom_limit, cost, found.n, degree)
            planned[degree] = (rank, why, found, hours)
        degree = min(planned, key=lambda d: planned[d][0])
        _, why, found, hours = planned[degree]
        reasons.extend(why)
        if degree == 1 or 1 not in planned:  # one engine per GPU, or a pinned degree
            return found
        _, _, whole, whole_hours = planned[1]
        said = self.generation_tp_reason(f, degree, (found, hours), (whole, whole_hours))
        recipe_why = [said, *found.recipe_reasons]
        recipe = trusted(Recipe, {**found.recipe.__dict__, "reasons": recipe_why})
        return found._replace(recipe=recipe, recipe_reasons=recipe_why)

    def ruled_out_generation(
        self,
        f: NodeFacts,
        strategy: str,
        degree: int,
        allowed: tuple[int, ...],
        reasons: list[str],
    ) -> Planned:
        """`plan_generation` where the pinned vLLM degree cannot run: the option says why and
        carries no recipe or GPU hours (sized with one engine per GPU for its memory)."""
        # Heads that do not split are a 400 (rollouts.model_errors): the node or the counts.
        gpn = f.node.gpus_per_node
        if degree > gpn or gpn % degree:
            why = (
                f"{f.node.name} has {plural(gpn, 'GPU')} per node, which groups of {degree} "
                "do not fill"
            )
        else:
            why = f"no GPU count allowed here ({', '.join(map(str, allowed))}) is a multiple of it"
        reasons.append(f"vllm_tensor_parallel_size {degree}, which you asked for: {why}.")
        untimed = replace(f, timed=False, assumes=None)
        n, choice, _, n_fit, n_head = self.plan(untimed, strategy, allowed, [])
        breakdown, _, _ = self.breakdown(strategy, n, choice, f.extra, stack=f.stack)
        return Planned(n, choice, None, n_fit, n_head, breakdown, None, [], True)

    def generation_tp_reason(
        self,
        f: NodeFacts,
        degree: int,
        split: tuple[Planned, float | None],
        whole: tuple[Planned, float | None],
    ) -> str:
        """Why vLLM spans `degree` GPUs rather than one engine per GPU: what one engine per GPU
        would hold (on its own count of GPUs when that differs) and, where the split wins on
        time alone, the GPU hours it saves. Each side is (the sized layout, its GPU hours)."""
        (split_plan, split_hours), (whole_plan, whole_hours) = split, whole
        engine, alone = split_plan.breakdown.rollout_engine, whole_plan.breakdown.rollout_engine
        on = "" if whole_plan.n == split_plan.n else f" on {plural(whole_plan.n, 'GPU')}"
        said = (
            f"vLLM generates with tensor parallel {degree} (vllm_tensor_parallel_size "
            f"{degree}): it takes {gb(engine)} of each GPU against {gb(alone)} with one engine "
            f"per GPU{on}"
        )
        need = whole_plan.breakdown.total_bytes
        if need > f.capacity:
            return said + f", which would need {gb(need)} per GPU in all."
        if need > f.headroom_limit:
            return said + f", which would leave less than the {self.margin_pct} headroom."
        if split_hours and whole_hours and split_hours < whole_hours and not on:
            saved = 1 - split_hours / whole_hours
            said += (
                f", and the job takes {saved:.0%} fewer GPU hours: each decoding step reads "
                f"1/{degree} of the weights for {degree} GPUs' completions at once and waits "
                f"for {2 * self.shape.num_layers} all-reduces (in the GPU hours)"
            )
        return said + "."
