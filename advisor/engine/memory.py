"""Peak memory per GPU, component by component.

The numbers are bytes. Each component is computed from the tensors that are alive at the peak
(see constants.py for the sources); `total_bytes` adds the CUDA context and the caching
allocator's reserve so that it matches what nvidia-smi shows.

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
from dataclasses import dataclass, replace

from advisor.engine import constants as c
from advisor.engine.shape import ModelShape
from advisor.engine.tensor_parallel import LAYOUT_PREFIX as TP_LAYOUT
from advisor.engine.tensor_parallel import split as split_layout

ENCODER_ONLY_FAMILIES = frozenset({"bert", "roberta", "distilbert", "vit", "deberta", "electra"})

# Per trainable parameter: (gradients, optimizer states incl. fp32 master weights) in bytes.
# Full training keeps the ZeRO paper's accounting; LoRA adapters are fp32 under mixed precision
# (PEFT keeps adapter weights in fp32 with autocast), so their master copy *is* the weight.
_FULL_STATE = {
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
_ADAPTER_STATE = {
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


@dataclass(frozen=True, slots=True)
class Workload:
    """The request reduced to what the formulas need (built and validated in workload.py)."""

    task: str  # inference | full_finetune | pretrain | lora | qlora
    precision: str  # as requested
    weight_format: str  # fp32 | fp16 | bf16 | int8 | int4 (how the base weights are stored)
    compute_dtype: str  # fp32 | fp16 | bf16 (what the matmuls run in)
    batch_size: int
    seq_len: int
    new_tokens: int
    gradient_checkpointing: bool
    flash_attention: bool
    mixed_precision: bool
    optimizer: str
    lora_rank: int
    lora_targets: tuple[str, ...] = ()
    double_quant: bool = False
    lora_dropout: bool = False
    # From the framework profile (frameworks.py); None: Transformers' fp32-upcast loss.
    logits_per_entry: float | None = None
    # Checkpointed layer inputs kept in CPU memory (Unsloth's "unsloth" checkpointing).
    checkpoint_offload: bool = False
    # The optimizer steps each parameter inside backward (torchtune optimizer_in_bwd): only
    # the gradient being applied exists at a time.
    optimizer_in_backward: bool = False
    # Megatron-style selective recomputation: the attention core is recomputed, its
    # sequence x sequence tensors are never kept.
    selective_recompute: bool = False
    # Whether a 4-bit base quantises the LM head (frameworks.Framework.quantises_head).
    quantises_head: bool | None = None
    # Whether the gradients of the last step still exist during the forward pass: False for
    # PyTorch >= 2.0 stacks (zero_grad(set_to_none=True) frees them), True for PyTorch 1.x
    # (zero_grad zeroed in place) and for stacks with a persistent gradient buffer.
    keeps_gradients: bool = False
    # The library that generates (frameworks.py key): its decoding speed (speed.decode_speed).
    decode_framework: str = "transformers"
    # Whether 16-bit training runs under torch.autocast (False: DeepSpeed's and Megatron's
    # fp16/bf16 modes cast the model itself, frameworks.Framework.autocast).
    framework_autocast: bool = True

    @property
    def training(self) -> bool:
        return self.task != "inference"

    @property
    def adapters(self) -> bool:
        return self.task in ("lora", "qlora")

    @property
    def state_mode(self) -> str:
        if self.compute_dtype == "fp32":
            return "fp32"
        return "mixed" if self.mixed_precision else "pure16"

    @property
    def act_bytes(self) -> int:
        return 4 if self.compute_dtype == "fp32" else 2

    @property
    def autocast(self) -> bool:
        """PyTorch AMP: 16-bit matmuls, fp32 softmax/norms (HF Trainer fp16/bf16=True)."""
        return (
            self.training
            and self.mixed_precision
            and self.framework_autocast
            and self.compute_dtype != "fp32"
        )


def lora_trainable_params(shape: ModelShape, wl: Workload) -> int:
    """r * (in + out) for every targeted linear layer in every block."""
    targets = set(wl.lora_targets)
    linears = [lin for lin in shape.linears if not targets or _short(lin.name) in targets]
    if not linears:  # a shape without named linears: q/k/v/o + MLP of a standard block
        h, f = shape.hidden_size, shape.intermediate_size
        per_layer = 4 * (h + h) + (3 if shape.gated_mlp else 2) * (h + f)
        return wl.lora_rank * per_layer * shape.total_layers
    per_layer = sum((lin.in_features + lin.out_features) * lin.count_per_layer for lin in linears)
    return wl.lora_rank * per_layer * shape.total_layers


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def base_weight_bytes(
    shape: ModelShape, weight_format: str, double_quant: bool = False
) -> tuple[float, float]:
    """(bytes of the stored weights, bytes of the quantisation constants)."""
    total = shape.params_total
    if weight_format in ("int8", "int4"):
        linear = shape.params_linear
        kept = total - linear  # embeddings, LM head, norms stay in 16-bit
        if weight_format == "int8":
            rows = _quantised_rows(shape)
            return linear * 1 + kept * 2, rows * c.INT8_ROW_SCALE.value
        per_weight = (c.NF4_DOUBLE_QUANT if double_quant else c.NF4_CONSTANTS).value
        return linear * 0.5 + kept * 2, linear * per_weight
    return total * c.BYTES[weight_format], 0.0


def quantised_base_bytes(shape: ModelShape, wl: Workload) -> tuple[float, float, float]:
    """(stored weights, quantisation constants, dequantisation workspace) of the base model.

    Whether a 4-bit stack quantises the LM head depends on the library (the framework profile
    says). transformers' bitsandbytes integration keeps the output layer in 16-bit
    (`get_keys_to_not_convert`); Lightning's BitsandbytesPrecision (LitGPT) replaces every
    `nn.Linear`, the head included, and bitsandbytes then dequantises the whole head for every
    forward (and backward) pass over more than one token. With a large vocabulary the head is
    the largest linear layer, so its dequantised copies outweigh the bytes the 4-bit head
    saves. Where the library's choice is unknown, the larger of the two layouts is what the GPU
    must hold.
    """
    weights, constants = base_weight_bytes(shape, wl.weight_format, wl.double_quant)
    workspace = dequant_workspace_bytes(shape, wl)
    head = shape.vocab_size * shape.hidden_size
    if wl.weight_format != "int4" or not head or wl.quantises_head is False:
        return weights, constants, workspace
    per_weight = (c.NF4_DOUBLE_QUANT if wl.double_quant else c.NF4_CONSTANTS).value
    head_weights = weights - shape.params_lm_head * 2 + head * 0.5
    head_constants = constants + head * per_weight
    head_workspace = c.DEQUANT_WORKSPACE_LAYERS.value * max(shape.largest_linear, head) * 2
    larger = head_weights + head_constants + head_workspace > weights + constants + workspace
    if wl.quantises_head or larger:
        return head_weights, head_constants, head_workspace
    return weights, constants, workspace


def _quantised_rows(shape: ModelShape) -> int:
    if shape.linears:
        per_layer = sum(lin.out_features * lin.count_per_layer for lin in shape.linears)
        return per_layer * shape.total_layers
    return shape.params_linear // max(shape.hidden_size, 1)


def dequant_workspace_bytes(shape: ModelShape, wl: Workload) -> float:
    if wl.weight_format == "int4":
        return c.DEQUANT_WORKSPACE_LAYERS.value * shape.largest_linear * 2
    if wl.weight_format == "int8":
        return shape.largest_linear * 2
    return 0.0


_ATTN_IN_ROLES = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_kv")
_MLP_IN_SUFFIXES = ("_gate", "_up", "_gate_up", "mlp_in")
_MLP_DOWN_SUFFIXES = ("_down", "mlp_out")


def stored_linear_inputs(shape: ModelShape, wl: Workload) -> tuple[bool, bool, bool]:
    """Which linear-layer inputs autograd keeps: (attention input, MLP input, MLP down input).

    A linear layer keeps its input only when its weight needs a gradient. Full training keeps
    all of them; bitsandbytes' 4-bit and 8-bit matmuls keep their input whenever the input
    needs a gradient (MatMul4Bit: `ctx.tensors = (A, B)`), so quantised LoRA keeps all too. A
    frozen 16-bit layer keeps its input only where a LoRA adapter on it needs that input, and
    not even then when the adapter's dropout hands it a copy (counted by
    `lora_dropout_bytes_per_token`).
    """
    if not wl.adapters or wl.weight_format in ("int4", "int8"):
        return True, True, True
    if wl.lora_dropout:
        return False, False, False
    if not wl.lora_targets:
        return True, True, True
    targets = set(wl.lora_targets)
    roles = [lin.role for lin in shape.linears if _short(lin.name) in targets]
    if not roles or not all(roles):  # a target we cannot place: keep everything (safe side)
        return True, True, True
    attn = any(role in _ATTN_IN_ROLES or role.startswith("cross_attn") for role in roles)
    mlp = any(role.endswith(_MLP_IN_SUFFIXES) for role in roles)
    down = any(role.endswith(_MLP_DOWN_SUFFIXES) for role in roles)
    return attn, mlp, down


def lora_dropout_bytes_per_token(shape: ModelShape, wl: Workload) -> float:
    """Bytes per token and layer that LoRA dropout keeps: a bool mask and the dropped-out
    16-bit input for every adapted linear layer (each PEFT adapter has its own nn.Dropout)."""
    if not (wl.adapters and wl.lora_dropout):
        return 0.0
    per_element = c.LORA_DROPOUT.value + wl.act_bytes
    targets = set(wl.lora_targets)
    linears = [lin for lin in shape.linears if not targets or _short(lin.name) in targets]
    if not linears:  # no named linears: q, k, v, o, the MLP's input projections and its output
        h, f = shape.hidden_size, shape.intermediate_size
        return per_element * ((4 + (2 if shape.gated_mlp else 1)) * h + f)
    return per_element * sum(lin.in_features * lin.count_per_layer for lin in linears)


def training_activations_per_layer(
    shape: ModelShape,
    wl: Workload,
    *,
    tp: int = 1,
    batch: int | None = None,
    sequence_parallel: bool = False,
) -> float:
    """Bytes autograd keeps for one transformer layer (Korthikanti et al. 2022, generalised).

    With e bytes per activation (2 in 16-bit, 4 in fp32): norm inputs 2*r*sbh (r: bytes of
    the residual stream) and attention/MLP inputs 2*e*sbh, never sharded by tensor
    parallelism; Q, K, V and the attention output e*s*b*(h_attn + 2*kv_dim + h); MLP inner
    tensors e*s*b*f each (gated: gate, up, act(gate), product = 4; GELU: input, output = 2);
    dropout masks 1 byte per element; eager attention keeps the softmax output (plus an fp32
    copy where the implementation upcasts, plus mask and dropout output where dropout is on).
    With e=r=2, h=kv_dim, f=4h, GELU, dropout and eager attention this is exactly
    s*b*h*(34+5as/h).

    Under PyTorch autocast (mixed precision) softmax and layer norm run in fp32: the residual
    stream is fp32 (r=4) and eager attention keeps its probabilities in fp32 plus the 16-bit
    cast the next matmul saves (PyTorch AMP docs, "CUDA ops that can autocast to float32").

    With tensor parallelism the attention and MLP tensors are split over `tp` GPUs; sequence
    parallelism splits the norm and dropout inputs along the sequence too, so the whole layer
    is 1/tp (Korthikanti et al. 2022 equation 4: s*b*h*(34 + 5as/h)/t).
    """
    b = wl.batch_size if batch is None else batch
    s = wl.seq_len
    h = shape.hidden_size
    a = shape.num_attention_heads
    kv = shape.kv_dim
    dropout = shape.family in c.DROPOUT_FAMILIES
    e = wl.act_bytes
    amp = wl.autocast
    # Norm inputs: fp32 under autocast, and where the RMSNorm upcasts before normalising.
    r = 4 if amp or shape.family in c.RMSNORM_FP32_FAMILIES else e
    sb = s * b
    attn_in, mlp_in, down_in = stored_linear_inputs(shape, wl)
    unsharded = (
        2 * r * sb * h
        + (attn_in + mlp_in) * e * sb * h
        + (2 * sb * h if dropout else 0)
        + lora_dropout_bytes_per_token(shape, wl) * sb
    )
    attn = e * sb * (shape.attn_dim + 2 * kv + h)  # Q, K, V, output
    # Gated: gate, up and act(gate) always (SiLU and product backward), the product when the
    # down projection keeps its input. GELU: its input always, its output likewise.
    inner = (3 if shape.gated_mlp else 1) + down_in
    if shape.num_experts and shape.experts_per_token:
        f = shape.moe_intermediate_size or shape.intermediate_size
        routed = shape.experts_per_token + shape.shared_experts
        mlp = inner * e * sb * f * routed + e * sb * h * routed
    else:
        mlp = inner * e * sb * shape.intermediate_size
    if wl.flash_attention or wl.selective_recompute:
        scores = 4 * b * a * s  # logsumexp in fp32 (selective: the recomputed core's input)
    else:
        if amp:
            per_score = 4 + 2 + (1 + 4 if dropout else 0)
        else:
            upcast = 4 if e == 2 and shape.family in c.FP32_SOFTMAX_FAMILIES else 0
            per_score = e + upcast + (1 + e if dropout else 0)
        scores = per_score * a * s * s * b
    sharded = attn + mlp + scores
    if sequence_parallel:
        return (unsharded + sharded) / tp
    return unsharded + sharded / tp


def training_activations(
    shape: ModelShape,
    wl: Workload,
    *,
    tp: int = 1,
    sixteen_bit_params: bool = False,
    sequence_parallel: bool = False,
) -> float:
    """All layers' saved tensors, or with checkpointing each layer's input plus one layer.

    Plain PyTorch AMP keeps fp32 parameters, so the embedding output and the residual stream
    between layers are fp32. DeepSpeed's bf16/fp16 modes cast the module to 16-bit
    (`module.bfloat16()`, fp32 master weights live in the optimizer) and FSDP computes with
    `MixedPrecision.param_dtype`, so under those (`sixteen_bit_params`) the stream, and the
    layer inputs checkpointing keeps, are 16-bit. Norm inputs stay fp32 under autocast either
    way: layer_norm autocasts to fp32 and saves that copy. Adapters train on a base stored in
    16 bits, so their stream is 16-bit too.
    """
    layers = shape.total_layers
    per_layer = training_activations_per_layer(
        shape, wl, tp=tp, sequence_parallel=sequence_parallel
    )
    # LoRA and QLoRA load the frozen base in 16-bit (or 4-bit with a 16-bit compute dtype):
    # the embedding output and every residual add are 16-bit even under autocast, only the
    # norms upcast inside the layer (counted per layer).
    fp32_stream = wl.autocast and not sixteen_bit_params and not wl.adapters
    residual_bytes = 4 if fp32_stream else wl.act_bytes
    sbh = wl.seq_len * wl.batch_size * shape.hidden_size * residual_bytes
    if sequence_parallel:  # the residual stream is split along the sequence between layers
        sbh /= tp
    embeddings_and_final_norm = 2 * sbh
    if wl.gradient_checkpointing:
        # Each layer keeps only its input; one layer is recomputed in full during backward.
        # Offloaded checkpoints (Unsloth) keep only the inputs being copied in and out.
        kept = 2 if wl.checkpoint_offload else layers
        return kept * sbh + per_layer + embeddings_and_final_norm
    return layers * per_layer + embeddings_and_final_norm


def inference_activations(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    """Prefill's working set for one layer at a time (nothing is kept for backward)."""
    b, s, h = wl.batch_size, wl.seq_len, shape.hidden_size
    f = shape.intermediate_size
    if shape.num_experts and shape.experts_per_token:
        f = (shape.moe_intermediate_size or f) * (shape.experts_per_token + shape.shared_experts)
    per_token = 4 * h + (2 * shape.kv_dim + (3 if shape.gated_mlp else 2) * f) / tp
    working = b * s * per_token * wl.act_bytes
    if not wl.flash_attention:
        per_score = wl.act_bytes + (4 if shape.family in c.FP32_SOFTMAX_FAMILIES else 0)
        working += per_score * b * shape.num_attention_heads * s * s / tp
    return working


def logits_bytes(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    b, s, v = wl.batch_size, wl.seq_len, shape.vocab_size
    if wl.training:
        if wl.act_bytes != 2:
            per = 12.0
        elif wl.logits_per_entry is not None:
            per = wl.logits_per_entry
        elif shape.remote_code and not wl.autocast:
            # The model's own forward has no fp32 upcast, and without autocast nothing casts
            # the loss to fp32 (under autocast cross_entropy runs in fp32 all the same).
            per = c.LOGITS_REMOTE_CODE_BYTES.value
        else:
            per = c.LOGITS_TRAINING_BYTES.value
        return b * s * v * per / tp
    if shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    if wl.new_tokens > 0:
        # generate() computes the last position's logits only, kept in fp32 with the scores.
        return b * v * 4 * 2 / tp
    return b * s * v * (wl.act_bytes + 4) / tp


def kv_cache_bytes(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    if wl.training or shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    tokens = wl.seq_len + wl.new_tokens
    # A latent cache (DeepSeek MLA) is replicated, not split by head.
    per_token = shape.kv_cache_width or 2 * math.ceil(shape.num_kv_heads / tp) * shape.head_dim
    # Sliding-window layers keep at most the window (a rolling buffer).
    window = shape.sliding_window
    local = shape.sliding_layers if window and window < tokens else 0
    layer_tokens = (shape.num_layers - local) * tokens + local * (window or 0)
    return layer_tokens * per_token * wl.batch_size * wl.act_bytes * kv_cache_copies(shape, wl)


def kv_cache_copies(shape: ModelShape, wl: Workload) -> float:
    """Caches alive at the peak of generation: two where the model's own code returns a new
    tuple cache each step (old and new alive together), else one (constants.py)."""
    legacy = shape.remote_code and wl.new_tokens > 0 and wl.decode_framework == "transformers"
    return c.LEGACY_KV_CACHE_COPIES.value if legacy else 1.0


_SIXTEEN_BIT_PARAM_STRATEGIES = frozenset({"zero1", "zero2", "zero3", "fsdp", "zero3_offload"})


def memory_per_gpu(shape: ModelShape, wl: Workload, strategy: str, n: int) -> dict[str, int]:
    """Peak bytes per GPU by component for `n` GPUs under `strategy`."""
    return MemoryModel(shape, wl).per_gpu(strategy, n)


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
        "shape",
        "wl",
    )

    def __init__(
        self,
        shape: ModelShape,
        wl: Workload,
        context_bytes: float | None = None,
        like: MemoryModel | None = None,
    ):
        """`like`: a model of the same request that differs only in whether gradients are
        kept between steps; the per-optimizer states and per-sample tensors do not depend on
        that, so they are shared instead of computed again."""
        self.shape, self.wl = shape, wl
        self.context = c.CUDA_CONTEXT.value if context_bytes is None else context_bytes
        if like is not None:
            self.base, self.gathered = like.base, like.gathered
            self._states, self._flows = like._states, like._flows
        else:
            self.base = quantised_base_bytes(shape, wl)  # weights, constants, workspace
            self.gathered = (
                c.ZERO3_LIVE_LAYERS.value * shape.params_per_layer * c.BYTES[wl.compute_dtype]
            )
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
                w_b, g_b, o_b = _ADAPTER_STATE[(wl.state_mode, kind)]
                weights += trainable * w_b
            else:
                trainable = shape.params_total
                g_b, o_b = _FULL_STATE[(wl.state_mode, kind)]
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
                batch_size=1,
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
        dp = n if strategy not in ("single", "tensor_parallel") else 1
        weights, grads, optim, amp_states = self._state(optimizer)
        _, constants, workspace = self.base
        gathered = self.gathered
        # ZeRO/FSDP mixed precision computes with 16-bit parameters (see training_activations).
        flow = self._flow(tp, strategy in _SIXTEEN_BIT_PARAM_STRATEGIES, level)
        if amp_states is not None and strategy in ("single", "ddp", "tensor_parallel"):
            weights, grads, optim = amp_states
        if strategy == "tensor_parallel":
            weights, grads, optim = weights / tp, grads / tp, optim / tp
            constants, workspace = constants / tp, workspace / tp
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
        flow = self._flow(tp, True, level, sequence_parallel=True)
        # Each NCCL communicator keeps its own buffers (NCCL_BUFFSIZE per channel and peer):
        # the tensor-parallel group's, and the data-parallel group's when there is one.
        communicators = 2 if dp > 1 else 1
        context = self.context + c.NCCL_BUFFERS.value * communicators
        return (
            weights / tp,
            grads / tp,
            optim / tp / dp,
            constants / tp,
            workspace / tp,
            flow,
            context,
        )

    def _first_gradient(self, grads: float) -> float:
        """Gradient bytes that exist when backward starts with all activations still alive:
        the LM head's weight gradient, the first one backward writes (its share of the
        trainable parameters). Adapters leave the head frozen."""
        shape, wl = self.shape, self.wl
        if not wl.training or wl.keeps_gradients or wl.optimizer_in_backward:
            return grads
        if wl.adapters:
            return 0.0
        head = shape.vocab_size * shape.hidden_size
        return grads * min(1.0, head / max(shape.params_total, 1))

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

    def _linear_of(self, key: tuple, layout: tuple) -> tuple[float, float]:
        weights, grads, optim, constants, workspace, flow, context = layout
        frag = 1 + c.ALLOCATOR_FRAGMENTATION.value
        static = (weights + optim + constants) * (1 + c.ALLOCATOR_STATIC_ROUNDING.value)
        fixed = context + static + (grads + workspace) * frag
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
                forward_fixed = without_grads + self._first_gradient(grads) * frag
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
            first = self._first_gradient(grads)
            forward = first + activations + logits + kv + workspace
            if grads > forward:  # the optimizer step holds more than the forward pass
                phase, activations, logits, kv, workspace = "optimizer", 0.0, 0.0, 0.0, 0.0
            else:
                grads = first
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
            "logits": int(logits),
            "kv_cache": int(kv),
            "quantization": int(constants + workspace),
            "cuda_context": int(context),
            "allocator_reserve": int(reserve),
        }
        parts["total_bytes"] = sum(parts.values())
        parts["peak_phase"] = phase
        return parts
