"""Peak memory per GPU, component by component.

The numbers are bytes. Each component is computed from the tensors that are alive at the peak
(see constants.py for the sources); `total_bytes` adds the CUDA context and the caching
allocator's reserve so that it matches what nvidia-smi shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.engine import constants as c
from advisor.engine.shape import ModelShape

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

COMPONENTS = (
    "weights",
    "gradients",
    "optimizer_states",
    "activations",
    "logits",
    "kv_cache",
    "quantization",
    "cuda_context",
    "allocator_reserve",
)


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


def lora_trainable_params(shape: ModelShape, wl: Workload) -> int:
    """r * (in + out) for every targeted linear layer in every block."""
    targets = set(wl.lora_targets)
    linears = [lin for lin in shape.linears if not targets or _short(lin.name) in targets]
    if not linears:  # a shape without named linears: q/k/v/o + MLP of a standard block
        h, f = shape.hidden_size, shape.intermediate_size
        per_layer = 4 * (h + h) + (3 if shape.gated_mlp else 2) * (h + f)
        return wl.lora_rank * per_layer * shape.total_layers
    per_layer = sum(
        (lin.in_features + lin.out_features) * lin.count_per_layer for lin in linears
    )
    return wl.lora_rank * per_layer * shape.total_layers


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def base_weight_bytes(shape: ModelShape, weight_format: str) -> tuple[float, float]:
    """(bytes of the stored weights, bytes of the quantisation constants)."""
    total = shape.params_total
    if weight_format in ("int8", "int4"):
        linear = shape.params_linear
        kept = total - linear  # embeddings, LM head, norms stay in 16-bit
        if weight_format == "int8":
            rows = _quantised_rows(shape)
            return linear * 1 + kept * 2, rows * c.INT8_ROW_SCALE.value
        return linear * 0.5 + kept * 2, linear * c.NF4_DOUBLE_QUANT.value
    return total * c.BYTES[weight_format], 0.0


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


def training_activations_per_layer(
    shape: ModelShape, wl: Workload, *, tp: int = 1, batch: int | None = None
) -> float:
    """Bytes autograd keeps for one transformer layer (Korthikanti et al. 2022, generalised).

    16-bit tensors: norm inputs 2*2sbh, attention/MLP inputs 2*2sbh (never sharded by tensor
    parallelism); Q 2sbh, K and V 2*2*s*b*kv_dim, attention output 2sbh; MLP inner tensors
    2*s*b*f each (gated: gate, up, act(gate), product = 4; GELU: input, output = 2); dropout
    masks 1 byte per element; eager attention keeps the softmax 2*a*s^2*b (plus a 4-byte fp32
    copy where the implementation upcasts, plus mask and dropout output where dropout is on).
    With h=kv_dim, f=4h, GELU, dropout and eager attention this is exactly s*b*h*(34+5as/h).
    """
    b = wl.batch_size if batch is None else batch
    s = wl.seq_len
    h = shape.hidden_size
    a = shape.num_attention_heads
    kv = shape.kv_dim
    dropout = shape.family in c.DROPOUT_FAMILIES
    sb = s * b
    unsharded = 8 * sb * h + (2 * sb * h if dropout else 0)
    attn = 2 * sb * shape.attn_dim + 4 * sb * kv + 2 * sb * h  # Q, K, V, output
    if shape.num_experts and shape.experts_per_token:
        f = shape.moe_intermediate_size or shape.intermediate_size
        routed = shape.experts_per_token + shape.shared_experts
        mlp = (8 if shape.gated_mlp else 4) * sb * f * routed + 2 * sb * h * routed
    else:
        mlp = (8 if shape.gated_mlp else 4) * sb * shape.intermediate_size
    if wl.flash_attention:
        scores = 4 * b * a * s  # logsumexp in fp32
    else:
        per_score = 2 + (4 if shape.family in c.FP32_SOFTMAX_FAMILIES else 0) + (
            3 if dropout else 0
        )
        scores = per_score * a * s * s * b
    sharded = attn + mlp + scores
    total = unsharded + sharded / tp
    return total * wl.act_bytes / 2


def training_activations(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    layers = shape.total_layers
    per_layer = training_activations_per_layer(shape, wl, tp=tp)
    sbh = wl.seq_len * wl.batch_size * shape.hidden_size * wl.act_bytes
    embeddings_and_final_norm = 2 * sbh
    if wl.gradient_checkpointing:
        # Each layer keeps only its input; one layer is recomputed in full during backward.
        return layers * sbh + per_layer + embeddings_and_final_norm
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
        per = c.LOGITS_TRAINING_BYTES.value if wl.act_bytes == 2 else 12
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
    kv_heads_per_gpu = math.ceil(shape.num_kv_heads / tp)
    return (
        2 * shape.num_layers * kv_heads_per_gpu * shape.head_dim * wl.batch_size * tokens
    ) * wl.act_bytes


def memory_per_gpu(shape: ModelShape, wl: Workload, strategy: str, n: int) -> dict[str, int]:
    """Peak bytes per GPU by component for `n` GPUs under `strategy`."""
    tp = n if strategy == "tensor_parallel" else 1
    dp = n if strategy not in ("single", "tensor_parallel") else 1
    weights, quant = base_weight_bytes(shape, wl.weight_format)
    grads = optim = 0.0
    if wl.training:
        if wl.adapters:
            trainable = lora_trainable_params(shape, wl)
            w_b, g_b, o_b = _ADAPTER_STATE[(wl.state_mode, wl.optimizer)]
            weights += trainable * w_b
        else:
            trainable = shape.params_total
            g_b, o_b = _FULL_STATE[(wl.state_mode, wl.optimizer)]
            if wl.state_mode == "fp32":
                weights = shape.params_total * 4.0
        grads = trainable * g_b
        optim = trainable * o_b
    quant += dequant_workspace_bytes(shape, wl)

    if wl.training:
        activations = training_activations(shape, wl, tp=tp)
    else:
        activations = inference_activations(shape, wl, tp=tp)
    logits = logits_bytes(shape, wl, tp=tp)
    kv = kv_cache_bytes(shape, wl, tp=tp)

    gathered = c.ZERO3_LIVE_LAYERS.value * shape.params_per_layer * c.BYTES[wl.compute_dtype]
    if strategy == "tensor_parallel":
        weights, grads, optim = weights / tp, grads / tp, optim / tp
        quant /= tp
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

    context = c.CUDA_CONTEXT.value + (c.NCCL_BUFFERS.value if n > 1 else 0)
    # Fragmentation hits what is allocated and freed every step; tensors allocated once keep
    # only the allocator's rounding (up to 2 MiB per block).
    dynamic = grads + activations + logits + kv + dequant_workspace_bytes(shape, wl)
    static = weights + optim + quant - dequant_workspace_bytes(shape, wl)
    reserve = dynamic * c.ALLOCATOR_FRAGMENTATION.value + static * c.ALLOCATOR_STATIC_ROUNDING.value
    parts = {
        "weights": int(weights),
        "gradients": int(grads),
        "optimizer_states": int(optim),
        "activations": int(activations),
        "logits": int(logits),
        "kv_cache": int(kv),
        "quantization": int(quant),
        "cuda_context": int(context),
        "allocator_reserve": int(reserve),
    }
    parts["total_bytes"] = sum(parts.values())
    return parts
