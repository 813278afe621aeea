"""The recipe search: the knobs a practitioner turns to make a job fit, chosen per option.

For one option (accelerator x GPU count x strategy) the search tries the activation
checkpointing levels the library offers, the optimizers the researcher left open and, for
each, the largest micro-batch that fits (memory is linear in the micro-batch, so it is solved
for, not tried), with gradient accumulation making up the global batch. It keeps the recipe
with the least compute time: recomputation repeats FLOPs and small micro-batches leave the GPU
under-used; ties go to the simpler recipe (AdamW before 8-bit AdamW, no checkpointing before
checkpointing). A knob the researcher pinned is never changed.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import replace
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine.compute import micro_batch_efficiency, training_flops_per_token
from advisor.engine.frameworks import Framework
from advisor.engine.memory import MemoryModel, Workload
from advisor.engine.models import EstimateRequest
from advisor.engine.preference import min_micro_batch
from advisor.engine.recipe_reasons import recipe_reasons
from advisor.engine.shape import ModelShape
from advisor.engine.tensor_parallel import split as split_layout
from advisor.engine.tensor_parallel import stages
from advisor.engine.workload import global_batch

_LEVEL_ORDER = {"none": 0, "selective": 1, "full": 2}


class Choice(NamedTuple):
    """One recipe for one (strategy, GPU count), with what it costs (a tuple: the search
    builds many, and tuples are the cheapest immutable records Python has)."""

    micro: int
    accumulation: int
    global_batch: int
    level: str
    optimizer: str
    total: float  # bytes per GPU
    time_factor: float  # compute time relative to no recomputation at full efficiency
    flops_per_token: float
    efficiency: float  # utilisation multiplier from the micro-batch size


class RecipeSearch:
    """Per-estimate search; results are cached per (strategy, GPU count, memory limit)."""

    def __init__(
        self,
        shape: ModelShape,
        wl: Workload,
        request: EstimateRequest,
        framework: Framework,
        model: MemoryModel,
        *,
        eight_bit: bool = True,
    ) -> None:
        """`eight_bit`: bitsandbytes' 8-bit optimizers run on the GPUs searched for, so 8-bit
        AdamW is a knob (where they do not, only a pinned 8-bit AdamW is kept, and the
        software check rules the option out)."""
        self.shape, self.wl, self.model, self.framework = shape, wl, model, framework
        self.training = wl.training
        self.global_batch = global_batch(request)
        self.batch_words = "you asked for" if request.batch_size is not None else "we assumed"
        self.pinned_micro = request.micro_batch
        # KTO under TRL needs two examples per GPU pass (preference.min_micro_batch); where the
        # batch per GPU is smaller, the recipe's global batch grows to it.
        self.min_micro = min_micro_batch(framework, wl.objective)
        self.pinned_level = request.gradient_checkpointing is not None
        self.default_level = model.default_level
        if not self.training:
            levels: tuple[str, ...] = ("none",)
        elif request.gradient_checkpointing is not None:
            levels = (self.default_level,)
        else:
            levels = tuple(
                lvl
                for lvl in framework.checkpoint_levels
                # With flash attention there is no score matrix for selective recomputation
                # to drop: it would cost FLOPs and save nothing.
                if not (lvl == "selective" and wl.flash_attention)
            )
        self.levels = levels
        if not self.training:
            optimizers: tuple[str, ...] = (wl.optimizer,)
        elif request.optimizer is not None:
            optimizers = (request.optimizer,)
        elif eight_bit and framework.eight_bit_optimizers:
            optimizers = ("adamw", "adamw_8bit")
        else:
            optimizers = ("adamw",)
        self.optimizers = optimizers
        self.flops: dict[str, float] = {}
        if self.training:
            base_wl = replace(wl, gradient_checkpointing=False)
            base = training_flops_per_token(shape, base_wl)
            attention = 12 * shape.attention_reads(wl.seq_len)
            self.flops = {
                "none": base,
                "selective": base + attention * c.SELECTIVE_RECOMPUTE_ATTENTION.value,
                # The forward again: for an encoder-decoder each stack at its own length.
                "full": training_flops_per_token(shape, replace(wl, gradient_checkpointing=True)),
            }
        self._divisors: dict[int, list[int]] = {}
        self._per_rank: dict[tuple[str, int], tuple[int, int]] = {}
        self._choices: dict[tuple[str, int, int, str, str], Choice] = {}
        self._totals: dict[tuple[str, int, str, str, int, int], float] = {}
        self._cache: dict[tuple[str, int, float], Choice | None] = {}
        self._floor: dict[tuple[str, int], Choice] = {}
        none_flops = self.flops.get("none") or 1.0
        # (compute ratio, optimizer rank, level rank, optimizer, level), cheapest first.
        self._order = sorted(
            (self.flops.get(level, none_flops) / none_flops, o, _LEVEL_ORDER[level], opt, level)
            for o, opt in enumerate(optimizers)
            for level in levels
        )
        self._least_cache: dict[tuple[str, int], float] = {}
        self._lean_level = max(self.levels, key=_LEVEL_ORDER.__getitem__)
        self._lean_opt = "adamw_8bit" if "adamw_8bit" in optimizers else optimizers[0]
        self._reasons: dict[tuple, list[str]] = {}

    def without_eight_bit(self, request: EstimateRequest) -> RecipeSearch:
        """This search for GPUs where bitsandbytes' 8-bit optimizers do not run: the same
        memory model and recipes (shared, so each is built once per estimate), searched
        without 8-bit AdamW."""
        other = RecipeSearch(
            self.shape, self.wl, request, self.framework, self.model, eight_bit=False
        )
        other._totals, other._choices = self._totals, self._choices
        other._per_rank, other._divisors = self._per_rank, self._divisors
        return other

    # --- helpers ---

    def per_rank(self, strategy: str, n: int) -> tuple[int, int]:
        """(sequences per data-parallel rank per step, data-parallel ranks): a tensor-parallel
        group shares its micro-batches."""
        key = (strategy, n)
        found = self._per_rank.get(key)
        if found is None:
            _, _, dp = split_layout(strategy, n)
            found = self._per_rank[key] = (max(1, math.ceil(self.global_batch / dp)), dp)
        return found

    def _pinned(self, per_rank: int) -> int | None:
        """The micro-batch the recipe may not change: the researcher's, or the whole batch
        per rank where the optimizer steps inside backward (torchtune refuses gradient
        accumulation with optimizer_in_bwd: each gradient is applied and freed at once)."""
        if self.wl.optimizer_in_backward and self.pinned_micro is None:
            return per_rank
        return self.pinned_micro

    def _divisors_of(self, value: int) -> list[int]:
        found = self._divisors.get(value)
        if found is None:
            small = [d for d in range(1, math.isqrt(value) + 1) if value % d == 0]
            found = sorted(set(small + [value // d for d in small]))
            self._divisors[value] = found
        return found

    def step_total(
        self, strategy: str, n: int, level: str, optimizer: str, micro: int, accumulation: int
    ) -> float:
        """MemoryModel.step_total, once per estimate for each recipe (the search asks for the
        same ones across accelerators)."""
        key = (strategy, n, level, optimizer, micro, accumulation)
        found = self._totals.get(key)
        if found is None:
            found = self._totals[key] = self.model.step_total(*key)
        return found

    def _choice(self, strategy: str, n: int, micro: int, level: str, optimizer: str) -> Choice:
        """The recipe's record, built once per estimate: options that choose the same recipe
        share one object (and with it their memory breakdown; see recommend)."""
        key = (strategy, n, micro, level, optimizer)
        found = self._choices.get(key)
        if found is None:
            found = self._choices[key] = self._new_choice(strategy, n, micro, level, optimizer)
        return found

    def _new_choice(self, strategy: str, n: int, micro: int, level: str, optimizer: str) -> Choice:
        per_rank, dp = self.per_rank(strategy, n)
        accumulation = max(1, math.ceil(per_rank / micro))
        total = self.step_total(strategy, n, level, optimizer, micro, accumulation)
        if not self.training:
            return Choice(micro, 1, micro * dp, level, optimizer, total,
                          1.0, 0.0, 1.0)  # fmt: skip
        eff = micro_batch_efficiency(micro * self.wl.sample_tokens)
        flops = self.flops[level]
        return Choice(
            micro,
            accumulation,
            micro * accumulation * dp,
            level,
            optimizer,
            total,
            flops / self.flops["none"] / eff,
            flops,
            eff,
        )

    # --- the search ---

    def best(self, strategy: str, n: int, limit: float) -> Choice | None:
        """The cheapest recipe whose memory per GPU is at most `limit`, or None.

        Recipes are tried from the cheapest conceivable (no recomputation, AdamW, the whole
        per-GPU batch at once) and the search stops once no untried recipe can beat the best
        one found, so a job that fits as asked costs one memory lookup."""
        key = (strategy, n, limit)
        if key in self._cache:
            return self._cache[key]
        if self._least(strategy, n) > limit:  # not even the leanest recipe fits
            self._cache[key] = None
            return None
        if not self.training:
            found = self._choice(strategy, n, self.wl.batch_size, "none", self.optimizers[0])
            self._cache[key] = found
            return found
        per_rank, _ = self.per_rank(strategy, n)
        pinned = self._pinned(per_rank)
        whole = max(per_rank, self.min_micro)
        seq = self.wl.sample_tokens
        saturation = c.MICROBATCH_SATURATION_TOKENS.value
        top = pinned or whole
        top_eff = 1.0 if top * seq >= saturation else (top * seq / saturation) ** 0.25
        linear = self.model.linear
        step_total = self.step_total
        best_key = picked = None
        for ratio, opt_rank, lvl_rank, optimizer, level in self._order:
            if best_key is not None and (ratio / top_eff, opt_rank, lvl_rank) >= best_key:
                break
            fixed, per_sample = linear(strategy, n, level, optimizer)
            if pinned is not None:
                micro = pinned
                if step_total(strategy, n, level, optimizer, micro, -(-per_rank // micro)) > limit:
                    continue
            elif step_total(strategy, n, level, optimizer, whole, 1) <= limit:
                micro = whole  # the whole batch at once: no accumulated gradients
            else:
                room = limit - fixed
                if room < per_sample * self.min_micro:
                    continue
                most = int(room // per_sample) if per_sample > 0 else per_rank
                if most >= per_rank:
                    micro = per_rank
                else:
                    divisors = self._divisors.get(per_rank) or self._divisors_of(per_rank)
                    micro = max(divisors[bisect_right(divisors, most) - 1], self.min_micro)
            tokens = micro * seq
            cost = ratio if tokens >= saturation else ratio / (tokens / saturation) ** 0.25
            rank_key = (cost, opt_rank, lvl_rank)
            if best_key is None or rank_key < best_key:
                best_key, picked = rank_key, (micro, level, optimizer)
        found = None if picked is None else self._choice(strategy, n, *picked)
        self._cache[key] = found
        return found

    def smallest(self, strategy: str, n: int) -> Choice:
        """The recipe that needs the least memory (for options where nothing fits)."""
        key = (strategy, n)
        found = self._floor.get(key)
        if found is None:
            # Compared from the memory model, and only the leanest (the first of equals,
            # optimizer before level) becomes a Choice.
            per_rank, _ = self.per_rank(strategy, n)
            micro = self._pinned(per_rank) or self.min_micro
            accumulation = max(1, math.ceil(per_rank / micro))
            step_total = self.step_total
            least = picked = None
            for optimizer in self.optimizers:
                for level in self.levels:
                    total = step_total(strategy, n, level, optimizer, micro, accumulation)
                    if least is None or total < least:
                        least, picked = total, (level, optimizer)
            found = self._floor[key] = self._choice(strategy, n, micro, *picked)
        return found

    def size(
        self, strategy: str, allowed: tuple[int, ...], capacity: float, headroom_limit: float
    ) -> tuple[int | None, int | None]:
        """(smallest count where a recipe fits, smallest where one fits with the margin to
        spare). Memory per GPU never grows with the count, and a recipe fits exactly when the
        leanest one does: the scan stops at the first count with the margin to spare."""
        least = self._least
        if least(strategy, allowed[-1]) > capacity:
            return None, None
        n_fit = None
        for k in allowed:
            need = least(strategy, k)
            if n_fit is None and need <= capacity:
                n_fit = k
            if need <= headroom_limit:
                return n_fit, k
        return n_fit, None

    def _least(self, strategy: str, n: int) -> float:
        """Memory of the leanest recipe: the most recomputation and the smallest optimizer
        state open to the search, at the smallest micro-batch the library takes (or the
        pinned one)."""
        key = (strategy, n)
        found = self._least_cache.get(key)
        if found is None:
            # Accumulating micro-batches keep the gradients alive during every forward pass;
            # the whole batch at once may need less when the gradients outweigh activations.
            per_rank, _ = self.per_rank(strategy, n)
            micro = self.pinned_micro or self.min_micro
            args = (strategy, n, self._lean_level, self._lean_opt)
            step_total = self.step_total
            found = step_total(*args, micro, -(-per_rank // micro))
            if self.pinned_micro is None and per_rank > micro:
                found = min(found, step_total(*args, per_rank, 1))
            self._least_cache[key] = found
        return found

    def plan(
        self, strategy: str, allowed: tuple[int, ...], capacity: float, headroom_limit: float
    ) -> tuple[int | None, int | None, int, Choice]:
        """(smallest count that fits, smallest with headroom, the count to use, its recipe)."""
        n_fit, n_head = self.size(strategy, allowed, capacity, headroom_limit)
        n = n_head or n_fit or allowed[-1]
        return n_fit, n_head, n, self.at(strategy, n, capacity, headroom_limit)

    def at(self, strategy: str, n: int, capacity: float, headroom_limit: float) -> Choice:
        """The recipe for `n` GPUs: the cheapest with headroom, else the cheapest that fits,
        else the one that needs the least memory (the option then says it does not fit)."""
        return (
            self.best(strategy, n, headroom_limit)
            or self.best(strategy, n, capacity)
            or self.smallest(strategy, n)
        )

    def parts(self, strategy: str, n: int, choice: Choice) -> dict[str, int]:
        return self.model.per_gpu(
            strategy, n, choice.micro, choice.level, choice.optimizer, choice.accumulation
        )

    def recipe_fields(self, choice: Choice, strategy: str, n: int, reasons: list[str]) -> dict:
        name, tp, _ = split_layout(strategy, n)
        return {
            "micro_batch": choice.micro,
            "grad_accumulation": choice.accumulation,
            "global_batch": choice.global_batch,
            "checkpointing": choice.level,
            "optimizer": choice.optimizer if self.training else None,
            "strategy": name,
            "offload": "optimizer_and_weights" if strategy == "zero3_offload" else "none",
            "tp": tp,
            "pp": stages(strategy),
            "compute_factor": round(choice.time_factor, 3),
            "reasons": reasons,
            "sample": "pair" if self.wl.sequences_per_sample == 2 else "sequence",
            "generation_tp": self.model.generation_tp if self.wl.generates else None,
        }

    # --- words ---

    # Why this recipe, in the practitioner's terms: recipe_reasons(search, choice, strategy, n,
    # extra, capacity, headroom_limit), called as a method.
    reasons = recipe_reasons
