"""How many GPUs one replica of a library that batches a job's prompts itself (vLLM) spans.

Such a library runs as many sequences at once as its KV cache
holds (compute.kv_filled_batch). On the fewest GPUs that hold the weights that can be very
few: Llama-2-70B in 16 bits over two 80 GB GPUs leaves each about 3 GB for the cache, a
handful of sequences, so every decoding step reads the whole model for almost nothing. More
GPUs in the tensor-parallel group each hold a smaller share of the weights and keep the rest
for the cache, and the step's weights are read once for many more sequences; vLLM's own
tuning guide gives "increase tensor_parallel_size" as the remedy when the KV cache runs
short (docs.vllm.ai, "Optimization and Tuning", Preemption). Each larger group also waits
for its all-reduces (tensor_parallel.generation_collectives_seconds), so where the cache is
not short a larger group only costs more.

On a node whose GPUs talk over PCIe only, vLLM can also split the layers rather than the
matrices: a pipeline stage per GPU (`pipeline_parallel`) passes one hidden state per sequence to
the next stage where tensor parallelism all-reduces every layer's. It keeps one batch per stage
in flight, and a stage's read of its weights serves only the batch on it
(`micro_batch_workload`): the price of skipping the all-reduces, which the ranking weighs.

`ServingPlanning` is a mixin for recommend.Evaluation: its `plan` asks `serving_degree` for
the count of a split option, and `node_options` asks `single_is_short` whether a model that
one GPU holds is worth a split option too. A larger group is taken only where
it saves more than FEWER_GPUS_COST_BAND of the GPU hours, the ranking's own rule for more
GPUs of one kind against fewer (options.rank). Training, GRPO's generation, a stated batch (TGI's
concurrency is its client's) and libraries that do not batch keep the fewest GPUs that fit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine.compute import filled_batch, inference_requests
from advisor.engine.frameworks import batch_limit
from advisor.engine.layouts import pipeline_stages
from advisor.engine.memory import Workload
from advisor.engine.options import NodeFacts
from advisor.engine.recipe import Choice
from advisor.engine.tensor_parallel import vllm_splits_heads
from advisor.engine.words import plural

# The layouts that split one replica over GPUs: tensor parallel, or (vLLM within a node whose
# GPUs talk over PCIe) a pipeline stage per GPU.
SPLIT_SERVING = ("tensor_parallel", "pipeline_parallel")

VLLM_TUNING_SOURCE = (
    "vLLM's tuning guide: a larger tensor_parallel_size (or pipeline_parallel_size) leaves each "
    "GPU more memory for the KV cache (docs.vllm.ai, 'Optimization and Tuning')"
)


class Served(NamedTuple):
    """One replica's layout: GPUs, recipe, GPU hours and sequences at once."""

    n: int
    choice: Choice
    gpu_hours: float
    batch: int


class ServingPlanning:
    """Mixin for recommend.Evaluation (see the module docstring)."""

    def filled_workload(self, f: NodeFacts, k: int, strategy: str, choice: Choice) -> Workload:
        """The workload with as many sequences at once as this layout's KV cache holds
        (compute.kv_filled_batch): vLLM fills what its reservation leaves after the model."""
        memory = self.breakdown(strategy, k, choice, f.extra, stack=f.stack)[0]
        batch = filled_batch(self.framework, f.acc, f.capacity, memory, self.wl, self.tokens)
        return self.with_batch(batch)

    def with_batch(self, batch: int) -> Workload:
        """The estimate's workload with `batch` sequences at once, one copy per batch size."""
        found = self.filled.get(batch)
        if found is None:
            found = self.filled[batch] = replace(self.wl, batch_size=batch)
        return found

    def micro_batch_workload(self, wl: Workload, stages: int) -> Workload:
        """`wl` as one of the `stages` batches a vLLM pipeline keeps in flight (one per stage):
        a decoding step on a stage reads that stage's weights for its batch alone, so a
        pipeline amortises each read over 1/stages of the sequences a tensor-parallel group
        of the same GPUs would (its price for skipping the all-reduces)."""
        return self.with_batch(max(1, wl.batch_size // stages))

    def short_of_cache(self, f: NodeFacts, batch: int) -> bool:
        """Fewer sequences at once than the library would run and the job has: the KV cache,
        not max_num_seqs or the job's size, sets the batch."""
        limit = batch_limit(self.framework, f.acc) or 1
        return batch < min(limit, inference_requests(self.wl, self.tokens))

    def served_alone(self, f: NodeFacts) -> Served:
        """The job on one GPU of this node, as the single-GPU option sizes it."""
        capacity, headroom_limit = f.limits_for_recipe
        choice = self.search_for(f.extra, f.stack).at("single", 1, capacity, headroom_limit)
        batch = self.filled_workload(f, 1, "single", choice).batch_size
        return Served(1, choice, self.hours(f, 1, "single", choice), batch)

    def single_is_short(self, f: NodeFacts) -> Served | None:
        """The single-GPU layout where a model one GPU holds runs short of KV cache there, so
        that a tensor-parallel option may cost fewer GPU hours (node_options then tries one
        beside it, and `serving_degree` compares with it); else None."""
        if not self.wl.fills_kv_cache or not f.timed or self.framework.sequential_multi_gpu:
            return None
        alone = self.served_alone(f)
        return alone if self.short_of_cache(f, alone.batch) else None

    def serving_degree(
        self,
        f: NodeFacts,
        strategy: str,
        allowed: tuple[int, ...],
        n: int,
        choice: Choice,
        gpu_hours: float,
        recipe_at,
        reasons: list[str],
    ) -> tuple[int, Choice, float]:
        """The count for a replica split over GPUs: `n` (the fewest that hold it) or a larger
        count within the node (whose heads split, under tensor parallelism) whose larger KV
        cache saves more than the band of GPU hours; the option says why when it ends up on
        more GPUs than the fewest that hold the model (one, where node_options tried it beside
        one GPU)."""
        if not self.wl.fills_kv_cache or self.framework.sequential_multi_gpu:
            return n, choice, gpu_hours
        per_node = f.node.gpus_per_node
        if n > per_node:
            return n, choice, gpu_hours
        batch = self.filled_workload(f, n, strategy, choice).batch_size
        fitted = best = Served(n, choice, gpu_hours, batch)
        band = 1 + c.FEWER_GPUS_COST_BAND.value
        if self.short_of_cache(f, batch):
            for k in allowed:
                if k <= n or k > per_node:
                    continue
                heads = strategy == "tensor_parallel" and self.splits_heads
                if heads and not vllm_splits_heads(self.shape, k):
                    continue
                recipe = recipe_at(k)
                hours = self.hours(f, k, strategy, recipe)
                if hours * band < best.gpu_hours:
                    filled = self.filled_workload(f, k, strategy, recipe).batch_size
                    best = Served(k, recipe, hours, filled)
        base = self.alone_short or fitted
        if best.n != base.n and best.gpu_hours * band < base.gpu_hours:
            reasons.append(self.serving_degree_reason(strategy, base, best))
        return best.n, best.choice, best.gpu_hours

    def serving_degree_reason(self, strategy: str, base: Served, best: Served) -> str:
        saved = 1 - best.gpu_hours / base.gpu_hours
        holds = "holds" if base.n == 1 else "hold"
        how = "pipeline stages" if strategy == "pipeline_parallel" else ""
        return (
            f"{self.framework.name} over {plural(best.n, 'GPU')}{' in ' + how if how else ''}, "
            f"not the {base.n} that "
            f"{holds} the model: each GPU keeps a smaller share of the weights and more memory "
            f"for the KV cache, about {plural(best.batch, 'sequence')} at once instead of "
            f"{base.batch}, so each decoding step's read of the weights serves more of them: "
            f"{saved:.0%} fewer GPU hours ({best.gpu_hours:,.1f} against "
            f"{base.gpu_hours:,.1f}; {VLLM_TUNING_SOURCE})."
        )

    def pipeline_reasons(self, f: NodeFacts, n: int) -> list[str]:
        """Why vLLM splits the layers, not the matrices, over a node's PCIe-linked GPUs, and
        what a stated batch smaller than the stages leaves idle."""
        said = [
            f"vLLM splits the model's layers into {n} pipeline stages, one per GPU "
            f"(pipeline_parallel_size {n}): these GPUs talk over PCIe, where tensor "
            "parallelism would wait for two all-reduces of every layer in every forward pass; "
            "stages pass one hidden state per sequence to the next. GitLab's vLLM deployment "
            "guide advises pipeline parallelism where GPUs talk over PCIe (docs.gitlab.com, "
            "'vLLM GPT OSS 120B'); vLLM runs it within a node with tensor_parallel_size 1 "
            "(docs.vllm.ai, 'Distributed inference and serving')."
        ]
        idle = self.idle_stages_reason(f, n, "pipeline_parallel")
        return said + ([idle] if idle else [])

    def idle_stages_reason(self, f: NodeFacts, n: int, strategy: str) -> str | None:
        """What a pipeline over nodes loses when fewer sequences are in flight than stages."""
        stages = pipeline_stages(f.node, n, strategy)
        batch = self.wl.batch_size
        if self.training or self.wl.fills_kv_cache or batch >= stages:
            return None
        return (
            f"With {plural(batch, 'sequence')} in flight, {stages - batch} of the {stages} "
            "pipeline stages wait at any moment (vLLM keeps a pipeline busy with a batch per "
            "stage): the GPU hours count that; more concurrent requests would use them."
        )
