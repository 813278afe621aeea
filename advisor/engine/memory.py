"""Peak memory per GPU, component by component.

The numbers are bytes. Each component is computed from the tensors that are alive at the peak
(the byte terms are in memory_terms.py and activations.py, their constants' sources in
constants/memory.py); `total_bytes` adds the CUDA context and the caching allocator's reserve so
that it matches what nvidia-smi shows. This module holds the training state per optimizer and
how each parallel layout shards the terms (`MemoryModel`).

A training step does not hold every tensor at once. The peak is the larger of two moments
(`PHASES`): the end of the forward pass, where every saved activation and the logits are alive,
and the end of the backward pass / the optimizer step, where every gradient is alive and the
activations are gone (backward frees each layer's saved tensors as it writes that layer's
gradients). Between the two, what backward has freed and what it has allocated trade places
layer by layer, so neither moment is exceeded. Whether gradients also exist during the forward
pass depends on the stack: `zero_grad(set_to_none=True)`, the default since PyTorch 2.0
(torch.optim.Optimizer.zero_grad docs; transformers' Trainer and torchtune call it), frees
them after each step; PyTorch 1.x zeroed them in place, and Megatron and DeepSpeed keep them in
contiguous buffers allocated once (`Workload.keeps_gradients`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine import rollouts
from advisor.engine.activations import inference_activations, training_activations
from advisor.engine.memory_terms import (
    Workload,
    kv_cache_bytes,
    logits_bytes,
    lora_trainable_params,
    loss_chunk_bytes,
    quantised_base_bytes,
)
from advisor.engine.shape import ModelShape
from advisor.engine.tensor_parallel import LAYOUT_PREFIX as TP_LAYOUT
from advisor.engine.tensor_parallel import split as split_layout
from advisor.engine.tensor_parallel import stage_share, stages

# Per trainable parameter: (gradients, optimizer states incl. fp32 master weights) in bytes.
# Full training keeps the ZeRO paper's accounting; LoRA adapters are fp32 under mixed precision
# (PEFT keeps adapter weights in fp32 with autocast), so their master copy *is* the weight.
FULL_STATE = {
    # (mode, optimizer): (grad bytes, optimizer bytes)
    ("mixed", "adamw"): (2, 12),
    ("mixed", "adamw_8bit"): (2, 4 + 2),
    ("mixed", "sgd"): (2, 4 + 4),
    ("pure16", "adamw"): (2, 4),
    ("pure16", "adamw_8bit"): (2, 2),
    ("pure16", "sgd"): (2, 2),
    ("fp32", "adamw"): (4, 8),
    ("fp32", "adamw_8bit"): (4, 2),
    ("fp32", "sgd"): (4, 4),
}
ADAPTER_STATE = {
    # (mode, optimizer): (adapter weight bytes, grad bytes, optimizer bytes)
    ("mixed", "adamw"): (4, 4, 8),
    ("mixed", "adamw_8bit"): (4, 4, 2),
    ("mixed", "sgd"): (4, 4, 4),
    ("pure16", "adamw"): (2, 2, 4),
    ("pure16", "adamw_8bit"): (2, 2, 2),
    ("pure16", "sgd"): (2, 2, 2),
    ("fp32", "adamw"): (4, 4, 8),
    ("fp32", "adamw_8bit"): (4, 4, 2),
    ("fp32", "sgd"): (4, 4, 4),
}

# The components of MemoryBreakdown in the order pages draw them, with their names for people.
COMPONENT_LABELS = {
    "weights": "Weights",
    "gradients": "Gradients",
    "optimizer_states": "Optimizer states",
    "activations": "Activations",
    "logits": "Logits",
    "kv_cache": "KV cache",
    "rollout_engine": "Generation engine (vLLM)",
    "quantization": "Quantisation buffers",
    "cuda_context": "CUDA context",
    "allocator_reserve": "Allocator reserve",
}
COMPONENTS = tuple(COMPONENT_LABELS)

# The moment of a step that sets the peak, with its words for people.
PHASES = {
    "forward": "end of the forward pass (activations and logits alive)",
    "optimizer": "end of backward / optimizer step (all gradients alive, activations freed)",
    "inference": "prefill and generation",
}


_SIXTEEN_BIT_PARAM_STRATEGIES = frozenset({"zero1", "zero2", "zero3", "fsdp", "zero3_offload"})
# Layouts whose gradients are reduce-scattered: each exists whole until it is reduced.
_SHARDED_GRADIENTS = frozenset({"zero2", "zero3", "fsdp", "zero3_offload"})


def memory_per_gpu(
    shape: ModelShape, wl: Workload, strategy: str, n: int, generation_tp: int = 1, **recipe
) -> dict[str, int]:
    """Peak bytes per GPU by component for `n` GPUs under `strategy` (`recipe`: per_gpu's
    micro, level, optimizer and accumulation, where not the workload's own; `generation_tp`:
    GRPO's vLLM degree)."""
    return MemoryModel(shape, wl, generation_tp=generation_tp).per_gpu(strategy, n, **recipe)


# PyTorch AMP's fp32 parameters stay as they are where no DeepSpeed / FSDP engine casts them.
_AMP_STRATEGIES = ("single", "ddp", "tensor_parallel")


def reference_copy_bytes(shape: ModelShape, wl: Workload, strategy: str, n: int) -> float:
    """DPO's, KTO's or GRPO's frozen reference copy per GPU (preference.py; 0 without one).
    TRL's create_reference_model deep-copies the policy as it is held, so an fp32 model under
    autocast copies fp32 and a 16-bit one 16 bits; GRPOTrainer loads the reference afresh in the
    checkpoint's dtype (`Workload.reference_param_bytes`). Sharded as the policy's weights are: TRL
    prepares the reference with the policy's ZeRO-3 settings (its CPU offload included) and
    with stage 0, a whole copy, under ZeRO-1/2 and DDP; a Megatron-style layout holds its
    fullest pipeline stage's share over its tensor-parallel degree."""
    if not wl.reference_copy or strategy == "zero3_offload":
        return 0.0
    amp = wl.state_mode == "mixed" and not wl.adapters and strategy in _AMP_STRATEGIES
    per_param = 4.0 if amp or wl.state_mode == "fp32" else c.BYTES[wl.compute_dtype]
    if wl.reference_param_bytes:
        per_param = wl.reference_param_bytes
    whole = shape.params_total * per_param
    if strategy in ("zero3", "fsdp", "tensor_parallel"):
        return whole / n
    if strategy.startswith(TP_LAYOUT):
        _, tp, _ = split_layout(strategy, n)
        embedding = shape.params_embedding or shape.params_lm_head
        return whole * stage_share(shape.params_total, embedding, stages(strategy)) / tp
    return whole


class MemoryModel:
    """The components that do not depend on the parallel layout or the recipe, computed once
    per request; `per_gpu` then shards them for a strategy and GPU count and scales the
    per-sample tensors by the micro-batch (the ranking and the recipe search call it often).

    Everything a step keeps per sample (activations, logits, KV cache) is linear in the
    micro-batch, so `linear` gives the total as fixed + micro-batch x per-sample bytes and the
    recipe search solves for the largest micro-batch that fits instead of trying each one.
    """

    __slots__ = (
        "_flows",
        "_linear",
        "_phases",
        "_states",
        "base",
        "context",
        "gathered",
        "generation_tp",
        "loss_chunk",
        "shape",
        "wl",
    )

    def __init__(
        self,
        shape: ModelShape,
        wl: Workload,
        context_bytes: float | None = None,
        like: MemoryModel | None = None,
        *,
        same_activations: bool = True,
        generation_tp: int = 1,
    ):
        """`like`: a model of the same request that differs only in whether gradients are
        kept between steps, or (`same_activations` False) in its attention kernel, or in
        GRPO's vLLM tensor-parallel degree (`generation_tp`); the weights and per-optimizer
        states do not depend on any of them, nor the per-sample tensors on the first and the
        last, so they are shared instead of computed again."""
        self.shape, self.wl = shape, wl
        self.generation_tp = generation_tp
        self.context = c.CUDA_CONTEXT.value if context_bytes is None else context_bytes
        if like is not None:
            self.base, self.gathered = like.base, like.gathered
            self.loss_chunk = like.loss_chunk
            self._states = like._states
            self._flows = like._flows if same_activations else {}
        else:
            # Weights, constants and the buffers a step allocates once and frees before the
            # optimizer step: the dequantisation workspace and a chunked loss's one chunk.
            weights, constants, workspace = quantised_base_bytes(shape, wl)
            self.loss_chunk = loss_chunk_bytes(shape, wl)
            self.base = (weights, constants, workspace + self.loss_chunk)
            # The unit computing and the one prefetched: layers, except where the embedding
            # or LM head (a unit of its own, or the root's) is larger than a layer.
            layer = shape.params_per_layer
            largest = max(layer, shape.vocab_size * shape.hidden_size)
            self.gathered = ((c.ZERO3_LIVE_LAYERS.value - 1) * layer + largest) * c.BYTES[
                wl.compute_dtype
            ]
            self._states: dict[str, tuple] = {}
            self._flows: dict[tuple[int, bool, str, bool], tuple[float, float, float]] = {}
        self._linear: dict[tuple[str, int, str, str], tuple[float, float]] = {}
        self._phases: dict[tuple[str, int, str, str], tuple[float, float, float, float]] = {}

    @property
    def default_level(self) -> str:
        wl = self.wl
        if wl.gradient_checkpointing:
            return "full"
        return "selective" if wl.selective_recompute else "none"

    def _state(self, optimizer: str) -> tuple:
        """(weights, grads, optimizer states, AMP layout or None) for `optimizer`."""
        found = self._states.get(optimizer)
        if found is not None:
            return found
        shape, wl = self.shape, self.wl
        weights = self.base[0]
        grads = optim = 0.0
        amp_states = None
        kind = optimizer.removeprefix("paged_")  # paged states are the same bytes, spillable
        if kind == "adamw_32bit":
            kind = "adamw"
        if wl.training:
            if wl.adapters:
                trainable = lora_trainable_params(shape, wl)
                mode = "pure16" if wl.sixteen_bit_adapters else wl.state_mode
                w_b, g_b, o_b = ADAPTER_STATE[(mode, kind)]
                if wl.autocast and not wl.sixteen_bit_adapters:
                    # fp32 adapters under autocast: their 16-bit casts stay cached until the
                    # forward pass's autocast region ends, past the loss (AMP_CAST_CACHE).
                    w_b += c.AMP_CAST_CACHE.value
                weights += trainable * w_b
            else:
                trainable = shape.params_total
                g_b, o_b = FULL_STATE[(wl.state_mode, kind)]
                if wl.state_mode == "fp32":
                    weights = shape.params_total * 4.0
            grads = trainable * g_b
            # Paged optimizers keep their state in CUDA unified memory, which the driver moves
            # to CPU RAM when the GPU runs short (QLoRA paper section 3, "Paged Optimizers"):
            # it never makes a job run out of memory, so it is not counted against capacity.
            optim = 0.0 if optimizer.startswith("paged_") else trainable * o_b
            # PyTorch AMP without DeepSpeed/FSDP keeps the parameters and their gradients in
            # fp32 and caches a 16-bit cast of each weight while autocast runs: 4 + 2
            # weights, 4 gradients, optimizer states without a separate master copy (18
            # B/param with AdamW).
            if not wl.adapters and wl.state_mode == "mixed":
                p = shape.params_total
                moments = max(optim - p * 4.0, 0.0)
                amp_states = (p * (4 + c.AMP_CAST_CACHE.value), p * 4.0, moments)
            if wl.optimizer_in_backward and not wl.adapters:
                # Only the gradient being applied exists (torchtune optimizer_in_bwd).
                largest = max(shape.largest_linear, shape.vocab_size * shape.hidden_size)
                grads = largest * g_b
                if amp_states is not None:
                    amp_states = (amp_states[0], largest * 4.0, amp_states[2])
        found = self._states[optimizer] = (weights, grads, optim, amp_states)
        return found

    def offloaded_bytes(self, optimizer: str) -> float:
        """What CPU offload keeps in host memory for the whole model: its weights,
        gradients and optimizer states (with the fp32 master copy) as the GPU would hold them
        unsharded (offload.host_bytes_per_node splits them per node)."""
        weights, grads, optim, _ = self._state(optimizer)
        return weights + grads + optim

    def _flow(
        self, tp: int, sixteen_bit_params: bool, level: str, sequence_parallel: bool = False
    ) -> tuple[float, float, float]:
        """Per-sample (activations, logits, KV cache) per GPU with `tp`-way tensor parallelism
        and the checkpointing `level`."""
        key = (tp, sixteen_bit_params, level, sequence_parallel)
        found = self._flows.get(key)
        if found is None:
            shape = self.shape
            wl = replace(
                self.wl,
                batch_size=self.wl.sequences_per_sample,  # one sample: a pair's 2 sequences
                gradient_checkpointing=level == "full",
                selective_recompute=level == "selective",
            )
            if wl.training:
                activations = training_activations(
                    shape,
                    wl,
                    tp=tp,
                    sixteen_bit_params=sixteen_bit_params,
                    sequence_parallel=sequence_parallel,
                )
            else:
                activations = inference_activations(shape, wl, tp=tp)
            found = self._flows[key] = (
                activations,
                logits_bytes(shape, wl, tp=tp),
                kv_cache_bytes(shape, wl, tp=tp),
            )
        return found

    def _layout(self, strategy: str, n: int, level: str, optimizer: str) -> tuple:
        """(weights, grads, optim, constants, workspace, per-sample flow, context)."""
        if strategy.startswith(TP_LAYOUT):
            return self._tensor_parallel_layout(strategy, n, level, optimizer)
        tp = n if strategy == "tensor_parallel" else 1
        dp = n if strategy not in ("single", "tensor_parallel", "pipeline_parallel") else 1
        weights, grads, optim, amp_states = self._state(optimizer)
        _, constants, workspace = self.base
        gathered = self.gathered
        # ZeRO/FSDP mixed precision computes with 16-bit parameters (see training_activations).
        flow = self._flow(tp, strategy in _SIXTEEN_BIT_PARAM_STRATEGIES, level)
        if amp_states is not None and strategy in _AMP_STRATEGIES:
            weights, grads, optim = amp_states
        if strategy == "tensor_parallel":
            weights, grads, optim = weights / tp, grads / tp, optim / tp
            constants, workspace = constants / tp, workspace / tp
        elif strategy == "pipeline_parallel":
            # vLLM's stages in a node: the fullest stage's layers and their KV cache per GPU; a
            # layer's working set and the logits as on one GPU.
            embedding = self.shape.params_embedding or self.shape.params_lm_head
            share = stage_share(self.shape.params_total, embedding, n)
            weights, constants = weights * share, constants * share
            activations, logits, kv = flow
            flow = (activations, logits, kv / n)
        elif strategy == "ddp" and dp > 1:
            grads *= 1 + c.DDP_BUCKET_COPY.value
        elif strategy == "zero1":
            optim /= dp
        elif strategy == "zero2":
            optim /= dp
            grads /= dp
        elif strategy in ("zero3", "fsdp"):
            weights = weights / dp + (gathered if dp > 1 else 0)
            grads /= dp
            optim /= dp
        elif strategy == "zero3_offload":
            weights = gathered
            grads = min(grads, gathered)
            optim = 0.0
        context = self.context + (c.NCCL_BUFFERS.value if n > 1 else 0)
        if self.wl.reference_copy:
            weights += reference_copy_bytes(self.shape, self.wl, strategy, n)
        return weights, grads, optim, constants, workspace, flow, context

    def _tensor_parallel_layout(self, key: str, n: int, level: str, optimizer: str) -> tuple:
        """Megatron-style training (tensor_parallel.py): `tp`-way tensor and sequence
        parallelism within the node, the distributed optimizer over the `dp` data-parallel
        ranks. Megatron computes with 16-bit parameters and keeps fp32 master weights in the
        optimizer (the ZeRO paper's 2 + 12 bytes) but accumulates gradients in an fp32
        `main_grad` buffer under bf16 (megatron/training/arguments.py sets
        accumulate_allreduce_grads_in_fp32 with --bf16): 4 bytes per parameter, not 2."""
        _, tp, dp = split_layout(key, n)
        weights, grads, optim, _ = self._state(optimizer)
        _, constants, workspace = self.base
        if self.wl.state_mode == "mixed" and not self.wl.adapters:
            grads *= 2
        # Pipeline stages hold their share of the layers (the fullest stage: the layers' share
        # plus an embedding). Activations do not shrink: under 1F1B the first stage keeps p
        # micro-batches in flight of its L/p layers, one micro-batch's worth of all L layers
        # (Korthikanti et al. 2022, arXiv:2205.05198 section 4.2.3).
        pp = stages(key)
        if pp > 1:
            shape = self.shape
            share = stage_share(
                shape.params_total, shape.params_embedding or shape.params_lm_head, pp
            )
            weights, grads, optim = weights * share, grads * share, optim * share
        flow = self._flow(tp, True, level, sequence_parallel=True)
        # Each NCCL communicator keeps its own buffers (NCCL_BUFFSIZE per channel and peer):
        # the tensor-parallel group's, and the data-parallel group's when there is one.
        communicators = 2 if dp > 1 else 1
        context = self.context + c.NCCL_BUFFERS.value * communicators
        return (
            weights / tp + reference_copy_bytes(self.shape, self.wl, key, n),
            grads / tp,
            optim / tp / dp,
            constants / tp,
            workspace / tp,
            flow,
            context,
        )

    def _first_gradient(self, grads: float, strategy: str = "single", optimizer: str = "") -> float:
        """Gradient bytes that exist when backward starts with all activations still alive:
        the LM head's weight gradient, the first one backward writes (its share of the
        trainable parameters). Adapters leave the head frozen. Under sharded gradients
        (ZeRO-2/3, FSDP) it is whole until it is reduce-scattered."""
        shape, wl = self.shape, self.wl
        if not wl.training or wl.keeps_gradients or wl.optimizer_in_backward:
            return grads
        if wl.adapters:
            return 0.0
        head = shape.vocab_size * shape.hidden_size
        share = min(1.0, head / max(shape.params_total, 1))
        if strategy in _SHARDED_GRADIENTS:
            return self._state(optimizer)[1] * share
        return grads * share

    def linear(self, strategy: str, n: int, level: str, optimizer: str) -> tuple[float, float]:
        """(fixed bytes, bytes per sample of micro-batch): total = fixed + micro x per-sample
        for a step with gradient accumulation, where the gradients of the earlier micro-steps
        are alive during every forward pass. A step without accumulation may need less
        (`step_total`); this form never under-states it."""
        key = (strategy, n, level, optimizer)
        found = self._linear.get(key)
        if found is None:
            found = self._linear_of(key, self._layout(*key))
        return found

    def rollout_bytes(self, strategy: str, n: int) -> float:
        """GRPO's colocated vLLM engine on each GPU (rollouts.py), sized for the GPU's share of
        the step's completions and split over `generation_tp` GPUs; 0 for a job that does not
        generate. vLLM reserves it once at start-up, outside PyTorch's caching allocator."""
        wl = self.wl
        if wl.rollout is None:
            return 0.0
        per_gpu = rollouts.per_gpu_sequences(wl.rollout.batch, strategy, n)
        return rollouts.engine_bytes(self.shape, wl, per_gpu, self.generation_tp)

    def _linear_of(self, key: tuple, layout: tuple) -> tuple[float, float]:
        weights, grads, optim, constants, workspace, flow, context = layout
        frag = 1 + c.ALLOCATOR_FRAGMENTATION.value
        static = (weights + optim + constants) * (1 + c.ALLOCATOR_STATIC_ROUNDING.value)
        fixed = context + static + (grads + workspace) * frag
        if self.wl.rollout is not None:
            fixed += self.rollout_bytes(key[0], key[1])
        found = self._linear[key] = (fixed, (flow[0] + flow[1] + flow[2]) * frag)
        return found

    def step_total(
        self, strategy: str, n: int, level: str, optimizer: str, micro: int, accumulation: int
    ) -> float:
        """Peak bytes per GPU of a step: the larger of its phases (module docstring)."""
        key = (strategy, n, level, optimizer)
        found = self._phases.get(key)
        if found is None:
            # One layout for both forms (the search asks for each layout's phases once).
            layout = self._layout(*key)
            fixed, per_sample = self._linear.get(key) or self._linear_of(key, layout)
            forward_fixed = optimizer_step = fixed
            if self.wl.training and not self.wl.keeps_gradients:
                grads, workspace = layout[1], layout[4]
                frag = 1 + c.ALLOCATOR_FRAGMENTATION.value
                without_grads = fixed - grads * frag
                first = self._first_gradient(grads, strategy, optimizer)
                forward_fixed = without_grads + first * frag
                optimizer_step = without_grads - workspace * frag + grads * frag
            found = self._phases[key] = (fixed, per_sample, forward_fixed, optimizer_step)
        fixed, per_sample, forward_fixed, optimizer_step = found
        if accumulation > 1:
            return fixed + micro * per_sample
        return max(forward_fixed + micro * per_sample, optimizer_step)

    def per_gpu(
        self,
        strategy: str,
        n: int,
        micro: int | None = None,
        level: str | None = None,
        optimizer: str | None = None,
        accumulation: int | None = None,
    ) -> dict:
        """Bytes per GPU by component at the step's peak, with `peak_phase` naming the
        moment (PHASES). Without `accumulation`, a micro-batch smaller than the batch means
        the batch is accumulated."""
        wl = self.wl
        micro = wl.batch_size if micro is None else micro
        level = self.default_level if level is None else level
        optimizer = wl.optimizer if optimizer is None else optimizer
        if accumulation is None:
            accumulation = max(1, math.ceil(wl.batch_size / max(micro, 1)))
        weights, grads, optim, constants, workspace, flow, context = self._layout(
            strategy, n, level, optimizer
        )
        activations, logits, kv = (x * micro for x in flow)
        phase = "inference" if not wl.training else "forward"
        if wl.training and accumulation == 1 and not wl.keeps_gradients:
            first = self._first_gradient(grads, strategy, optimizer)
            forward = first + activations + logits + kv + workspace
            if grads > forward:  # the optimizer step holds more than the forward pass
                phase, activations, logits, kv, workspace = "optimizer", 0.0, 0.0, 0.0, 0.0
            else:
                grads = first
        # The loss chunk travels in the workspace (sharded and freed with it): shown as logits.
        chunk = workspace * self.loss_chunk / self.base[2] if self.loss_chunk else 0.0
        # Fragmentation hits what is allocated and freed every step; tensors allocated once
        # keep only the allocator's rounding (up to 2 MiB per block).
        dynamic = grads + activations + logits + kv + workspace
        static = weights + optim + constants
        reserve = (
            dynamic * c.ALLOCATOR_FRAGMENTATION.value + static * c.ALLOCATOR_STATIC_ROUNDING.value
        )
        parts = {
            "weights": int(weights),
            "gradients": int(grads),
            "optimizer_states": int(optim),
            "activations": int(activations),
            "logits": int(logits + chunk),
            "kv_cache": int(kv),
            "rollout_engine": int(self.rollout_bytes(strategy, n)) if wl.rollout else 0,
            "quantization": int(constants + workspace - chunk),
            "cuda_context": int(context),
            "allocator_reserve": int(reserve),
        }
        parts["total_bytes"] = sum(parts.values())
        parts["peak_phase"] = phase
        return parts
