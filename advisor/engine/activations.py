"""The activation terms of peak memory: what a training step keeps for backward (each layer's
saved tensors, LoRA dropout's copies, a speech encoder's convolutional stem) and what prefill
holds at once in inference, for one request (`Workload`) and model (`ModelShape`).

Each term is bytes on one GPU before the parallel layout shards it, like the weight, logits
and KV cache terms in memory_terms.py; memory.py's `MemoryModel` lays them out per strategy.
The constants they use are in constants/memory.py, with their sources.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine.memory_terms import (
    ENCODER_ONLY_FAMILIES,
    Workload,
    copies_per_token,
    lora_target_name,
    lora_targeted_linears,
)
from advisor.engine.shape import CROSS_KV_ROLES, ModelShape

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
    roles = [lin.role for lin in shape.linears if lora_target_name(lin.name) in targets]
    if not roles or not all(roles):  # a target we cannot place: keep everything (safe side)
        return True, True, True
    attn = any(
        role in _ATTN_IN_ROLES
        or role.startswith("cross_attn")
        # a hybrid's linear-attention input projections read the same normed input
        or (role.startswith("linear_attn") and role != "linear_attn_out")
        for role in roles
    )
    mlp = any(role.endswith(_MLP_IN_SUFFIXES) for role in roles)
    down = any(role.endswith(_MLP_DOWN_SUFFIXES) for role in roles)
    return attn, mlp, down


def lora_dropout_bytes_per_token(
    shape: ModelShape, wl: Workload, *, cross: float | None = 1.0
) -> float:
    """Bytes per token and layer that LoRA dropout keeps: a bool mask and the dropped-out
    16-bit input for every adapted linear layer the token passes through (each PEFT adapter
    has its own nn.Dropout; an expert's adapter sees only the tokens routed to it).

    In an encoder-decoder's decoder layer the cross-attention's key and value adapters read
    the encoder's tokens: `cross` of them per decoder token; None: an encoder layer, which
    has no cross-attention to adapt."""
    if not (wl.adapters and wl.lora_dropout):
        return 0.0
    per_element = c.LORA_DROPOUT.value + wl.act_bytes
    linears = lora_targeted_linears(shape, wl)
    if not linears:  # no named linears: q, k, v, o, the MLP's input projections and its output
        h, f = shape.hidden_size, shape.intermediate_size
        return per_element * ((4 + (2 if shape.gated_mlp else 1)) * h + f)
    total = 0.0
    for lin in linears:
        # A layer only some blocks have counts by its share of them: the caller multiplies
        # this by the number of layers.
        share = shape.blocks_with(lin) / max(shape.total_layers, 1)
        if lin.role.startswith("cross_attn"):
            if cross is None:
                continue
            if lin.role in CROSS_KV_ROLES:
                share *= cross
        total += lin.in_features * copies_per_token(shape, lin) * share
    return per_element * total


def training_activations_per_layer(
    shape: ModelShape,
    wl: Workload,
    *,
    tp: int = 1,
    batch: int | None = None,
    sequence_parallel: bool = False,
    seq: int | None = None,
    cross: int = 0,
    linear_attention: bool = False,
    mixer: bool = True,
    mlp: bool = True,
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

    `seq` tokens pass through the layer (None: the request's sequence length). A decoder
    layer of an encoder-decoder (`cross` encoder tokens) also keeps its cross-attention's:
    the norm and query inputs and the query and output at the decoder's length, keys and
    values at the encoder's, and eager attention's decoder x encoder scores; the encoder
    output its key and value projections read is one tensor for every layer (counted once,
    training_activations). An encoder layer has no cross-attention adapters to drop out.

    A hybrid's `linear_attention` layer keeps, instead of Q, K, V and the output, what its
    mixer saves per token (LinearAttention.saved_per_token) and no scores: its cost is
    linear in the sequence; where the block also runs softmax attention beside it (Falcon-H1,
    LinearAttention.parallel_attention) it keeps that attention's tensors and scores too. A
    block without a `mixer` (Nemotron-H's MLP blocks) or without an `mlp` (its mixer blocks)
    keeps one norm input and only its own sub-layer's tensors.
    """
    b = wl.batch_size if batch is None else batch
    s = wl.seq_len if seq is None else seq
    dropout = shape.family in c.DROPOUT_FAMILIES
    # bitsandbytes' quantised layers return their input's dtype: fp32 after PEFT's cast.
    e = 4 if wl.fp32_unquantised else wl.act_bytes
    attn_in, mlp_in, down_in = stored_linear_inputs(shape, wl)
    unsharded = _unsharded_bytes(shape, wl, b, s, e, dropout, attn_in, mlp_in, cross, mixer, mlp)
    parallel = bool(linear_attention and shape.linear_attention.parallel_attention)
    attn = _attention_bytes(shape, b, s, e, cross, linear_attention, parallel, mixer)
    mlp_bytes = _mlp_bytes(shape, s * b, e, down_in) if mlp else 0
    if (linear_attention and not parallel) or not mixer:
        scores = 0
    else:
        scores = _score_bytes(shape, wl, b, s, e, cross, dropout)
    sharded = attn + mlp_bytes + scores
    if sequence_parallel:
        return (unsharded + sharded) / tp
    return unsharded + sharded / tp


def _unsharded_bytes(
    shape: ModelShape,
    wl: Workload,
    b: int,
    s: int,
    e: int,
    dropout: bool,
    attn_in: bool,
    mlp_in: bool,
    cross: int,
    mixer: bool,
    mlp: bool,
) -> float:
    """What a layer keeps that tensor parallelism leaves whole (sequence parallelism splits
    it): the norm inputs, the attention and MLP inputs, the dropout masks and LoRA dropout's
    copies; with cross-attention its norm input, query input and mask too."""
    h = shape.hidden_size
    # Norm inputs: fp32 under autocast, and where the RMSNorm upcasts before normalising.
    r = 4 if wl.autocast or shape.family in c.RMSNORM_FP32_FAMILIES else e
    sb = s * b
    if cross:
        adapted = lora_dropout_bytes_per_token(shape, wl, cross=cross / s)
    else:
        adapted = lora_dropout_bytes_per_token(shape, wl, cross=None if wl.encoder_len else 1.0)
    sublayers = int(mixer) + int(mlp)
    unsharded = (
        sublayers * r * sb * h
        + (attn_in * mixer + mlp_in * mlp) * e * sb * h
        + (sublayers * sb * h if dropout else 0)
        + adapted * sb
    )
    if cross:
        unsharded += r * sb * h + attn_in * e * sb * h + (sb * h if dropout else 0)
    return unsharded


def _attention_bytes(
    shape: ModelShape,
    b: int,
    s: int,
    e: int,
    cross: int,
    linear_attention: bool,
    parallel: bool,
    mixer: bool,
) -> int:
    """Q, K, V and the attention output, or what a linear-attention mixer saves (with the
    softmax attention's tensors where it runs beside it), and a cross-attention's query and
    output at the decoder's length with its keys and values at the encoder's."""
    h = shape.hidden_size
    kv = shape.kv_dim
    sb = s * b
    softmax = e * sb * (shape.attn_dim + 2 * kv + h)  # Q, K, V, output
    attn = softmax if mixer else 0
    if linear_attention:
        attn = e * sb * shape.linear_attention.saved_per_token + (softmax if parallel else 0)
    if cross:
        attn += e * (sb * (shape.attn_dim + h) + 2 * cross * b * kv)
    return attn


def _mlp_bytes(shape: ModelShape, sb: int, e: int, down_in: bool) -> int:
    """The MLP's inner tensors for `sb` tokens; a mixture of experts' for the experts each
    token is routed to, with their inputs."""
    # Gated: gate, up and act(gate) always (SiLU and product backward), the product when the
    # down projection keeps its input. GELU: its input always, its output likewise.
    inner = (3 if shape.gated_mlp else 1) + down_in
    if shape.num_experts and shape.experts_per_token:
        f = shape.moe_intermediate_size or shape.intermediate_size
        routed = shape.experts_per_token + shape.shared_experts
        return inner * e * sb * f * routed + e * sb * shape.hidden_size * routed
    return inner * e * sb * shape.intermediate_size


def _score_bytes(
    shape: ModelShape, wl: Workload, b: int, s: int, e: int, cross: int, dropout: bool
) -> int:
    """What attention keeps of its scores: a fused kernel only the logsumexp, eager attention
    its probabilities (and an fp32 copy, a mask and the dropout output where they apply)."""
    a = shape.num_attention_heads
    if (wl.flash_attention and not shape.eager_attention) or wl.selective_recompute:
        # logsumexp in fp32 (selective: the recomputed core's input), per attention block
        return 4 * b * a * s * (2 if cross else 1)
    if wl.autocast:
        per_score = 4 + 2 + (1 + 4 if dropout else 0)
    else:
        upcast = 4 if e == 2 and shape.family in c.FP32_SOFTMAX_FAMILIES else 0
        per_score = e + upcast + (1 + e if dropout else 0)
    return per_score * a * s * (s + cross) * b


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
    residual_bytes = _residual_bytes(shape, wl, sixteen_bit_params)
    saved = inputs = 0.0
    largest_layer = 0.0
    stream = 0.0  # the embedding output and the final norm of each stack
    for layers, seq, cross, stack in _stacks(shape, wl):
        for count, linear_attention, mixer, mlp in _layer_kinds(shape, wl, layers):
            if not count:
                continue
            per_layer = training_activations_per_layer(
                stack,
                wl,
                tp=tp,
                sequence_parallel=sequence_parallel,
                seq=seq,
                cross=cross,
                linear_attention=linear_attention,
                mixer=mixer,
                mlp=mlp,
            )
            saved += count * per_layer
            largest_layer = max(largest_layer, per_layer)
        # Gemma 3n's AltUp carries several copies of the hidden state from block to block: each
        # block's input, kept under checkpointing, is all of them, and its predictions and
        # corrections of them are kept for backward.
        streams = stack.residual_streams
        sbh = seq * wl.batch_size * stack.hidden_size * residual_bytes * streams
        if streams > 1:
            altup = 2 * (streams - 1) * seq * wl.batch_size * stack.hidden_size * wl.act_bytes
            saved += layers * altup
            largest_layer += altup
        if sequence_parallel:  # the residual stream is split along the sequence between layers
            sbh /= tp
        inputs += layers * sbh
        stream += 2 * sbh
    if shape.eager_attention and not wl.encoder_len:
        # WavLM: the first layer's relative-position bias (batch x heads x tokens^2, looked
        # up in the fp32 table), which every layer's gate multiplies: kept once.
        bias_bytes = 4 if wl.autocast else wl.act_bytes
        stream += bias_bytes * wl.batch_size * shape.num_attention_heads * wl.seq_len**2 / tp
    front_kept, front_working = frontend_training_bytes(shape, wl)
    stream += front_kept
    if wl.encoder_len:
        # The encoder's output, which every cross-attention's key and value projections read.
        width = shape.encoder_view().hidden_size
        stream += wl.encoder_len * wl.batch_size * width * wl.act_bytes
    if wl.gradient_checkpointing:
        # Each layer keeps only its input; one layer is recomputed in full during backward.
        # Offloaded checkpoints (Unsloth) keep only the inputs being copied in and out.
        layers = shape.total_layers
        kept = inputs if not wl.checkpoint_offload else inputs * 2 / max(layers, 1)
        return max(kept + largest_layer + stream, front_working)
    return max(saved + stream, front_working)


def _residual_bytes(shape: ModelShape, wl: Workload, sixteen_bit_params: bool) -> int:
    """Bytes per value of the residual stream between layers (training_activations)."""
    # LoRA and QLoRA load the frozen base in 16-bit (or 4-bit with a 16-bit compute dtype):
    # the embedding output and every residual add are 16-bit even under autocast, only the
    # norms upcast inside the layer (counted per layer).
    fp32_stream = (wl.autocast and not sixteen_bit_params and not wl.adapters) or (
        wl.fp32_unquantised  # PEFT's kbit preparation made the embedding output fp32
    )
    # Mamba adds each block's output to a float32 residual whatever the model's dtype.
    fp32_residual = bool(shape.linear_attention and shape.linear_attention.fp32_residual)
    return 4 if fp32_stream or fp32_residual else wl.act_bytes


def _stacks(shape: ModelShape, wl: Workload) -> list[tuple[int, int, int, ModelShape]]:
    """An encoder-decoder's two stacks: (layers, tokens per sequence, encoder tokens each
    layer's cross-attention reads, the stack's shape); any other model has one stack at
    seq_len. A masked autoencoder's decoder (ViT-MAE) reads no cross-attention, and its
    encoder has its own widths (ModelShape.encoder_view)."""
    if wl.encoder_len:
        return [
            (shape.encoder_layers, wl.encoder_len, 0, shape.encoder_view()),
            (shape.num_layers, wl.decoder_len, wl.encoder_len * shape.cross_attends, shape),
        ]
    return [(shape.total_layers, wl.seq_len, 0, shape)]


def _layer_kinds(
    shape: ModelShape, wl: Workload, layers: int
) -> tuple[tuple[int, bool, bool, bool], ...]:
    """(layers, linear attention, mixer, MLP) for each kind of block in a stack of `layers`.
    A hybrid (decoder-only) has blocks of both attention kinds, and Nemotron-H blocks that
    are an MLP alone while its mixer blocks have none."""
    hybrid = None if wl.encoder_len else shape.linear_attention
    linear = hybrid.layers if hybrid else 0
    mlp_only = hybrid.mlp_only_layers if hybrid else 0
    separate = bool(hybrid and hybrid.separate_mlp)
    return (
        (layers - linear - mlp_only, False, True, not separate),
        (linear, True, True, not separate),
        (mlp_only, False, False, True),
    )


def frontend_trained(shape: ModelShape, wl: Workload) -> bool:
    """Whether the job trains the model's convolutional stem (a speech encoder's feature
    encoder: pre-training does; fine-tuning freezes it, LoRA leaves the base frozen)."""
    front = shape.frontend
    return bool(front) and wl.task in front.trained_tasks


def frontend_training_bytes(shape: ModelShape, wl: Workload) -> tuple[float, float]:
    """(bytes the stem keeps for backward, bytes a frozen stem holds at once in its forward
    pass) in a training step, for the request's frames (architecture.model.Frontend). A
    trained stem keeps its conv and GELU inputs and its norms' (fp32 under autocast), or
    checkpointed each conv layer's input and one layer; a frozen one runs without autograd,
    its largest layer's tensors alive only at the start of the forward pass."""
    front = shape.frontend
    if not front:
        return 0.0, 0.0
    tokens = wl.batch_size * wl.seq_len
    e = wl.act_bytes
    head = tokens * front.head_saved_fp32 * 4 if wl.task == "pretrain" else 0.0
    if not frontend_trained(shape, wl):
        return head, tokens * front.working * e
    if wl.gradient_checkpointing:
        return head + tokens * front.checkpointed * e, 0.0
    fp32 = front.saved_fp32 if wl.autocast else 0
    return head + tokens * (front.saved * e + fp32 * (4 - e)), 0.0


def inference_activations(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    """Prefill's working set for one layer at a time (nothing is kept for backward); an
    encoder-decoder's is its encoder reading the input, a masked autoencoder's the larger of
    its encoder's (the visible patches) and its decoder's (all of them)."""
    if wl.encoder_len and not shape.cross_attends and shape.family in ENCODER_ONLY_FAMILIES:
        decoder = replace(wl, encoder_len=0, seq_len=wl.decoder_len or wl.seq_len)
        return max(
            inference_activations(
                shape.encoder_view(), replace(wl, seq_len=wl.encoder_len, encoder_len=0), tp=tp
            ),
            inference_activations(shape, decoder, tp=tp),
        )
    b, s, h = wl.batch_size, wl.encoder_len or wl.seq_len, shape.hidden_size
    f = shape.intermediate_size
    if shape.num_experts and shape.experts_per_token:
        f = (shape.moe_intermediate_size or f) * (shape.experts_per_token + shape.shared_experts)
    per_token = 4 * h + (2 * shape.kv_dim + (3 if shape.gated_mlp else 2) * f) / tp
    if wl.prefill_chunk_tokens:
        # A server that chunks prefill runs at most one chunk's tokens through a layer, and
        # its paged attention kernels never hold the scores.
        return min(b * s, wl.prefill_chunk_tokens) * per_token * wl.act_bytes
    working = b * s * per_token * wl.act_bytes
    # A pure state-space model scores none; WavLM scores eagerly whatever the kernel.
    if (not wl.flash_attention or shape.eager_attention) and shape.softmax_layers:
        per_score = wl.act_bytes + (4 if shape.family in c.FP32_SOFTMAX_FAMILIES else 0)
        working += per_score * b * shape.num_attention_heads * s * s / tp
    if shape.frontend:
        # A speech encoder's feature encoder runs first, on the raw waveform: its first
        # layers hold more per frame than a block does.
        working = max(working, b * s * shape.frontend.working * wl.act_bytes)
    return working
