"""The byte terms of peak memory, component by component: weights (base, quantisation
constants, dequantisation workspace, LoRA adapters), activations kept for backward or used
in prefill, logits and the KV cache, for one request (`Workload`) and model (`ModelShape`).

Each term is bytes on one GPU before the parallel layout shards it; memory.py's `MemoryModel`
adds the training state, lays the terms out per strategy and finds the peak phase. The
constants they use are in constants/memory.py, with their sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from advisor.engine import constants as c
from advisor.engine.shape import CROSS_KV_ROLES, ModelShape

ENCODER_ONLY_FAMILIES = frozenset(
    {"bert", "roberta", "distilbert", "vit", "deberta", "electra", "modernbert", "esm", "dinov2"}
    | {"clip", "siglip"}  # dual encoders (architecture/dual_encoders.py)
    | {"mpnet", "longformer"}  # BERT-like encoders (architecture/encoders.py)
    | {"deit", "beit", "vit_mae", "videomae"}  # vision encoders (architecture/vision.py)
    | {"wav2vec2", "hubert", "wavlm", "data2vec-audio"}  # speech (architecture/speech.py)
)


@dataclass(frozen=True, slots=True)
class Workload:
    """The request reduced to what the formulas need (built and validated in workload.py)."""

    task: str  # inference | full_finetune | pretrain | lora | qlora
    precision: str  # as requested
    weight_format: str  # fp32 | fp16 | bf16 | fp8 | int8 | int4 (how base weights are stored)
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
    # A quantised base whose other parameters the library casts to fp32 and trains under AMP
    # (frameworks.Framework.upcasts_kbit_base): they, the residual stream and the quantised
    # layers' outputs take 4 bytes. Pure 16-bit training (qlora.py casts them back to bf16
    # after PEFT's preparation) keeps them 16-bit.
    fp32_unquantised: bool = False
    # Whether the gradients of the last step still exist during the forward pass: False for
    # PyTorch >= 2.0 stacks (zero_grad(set_to_none=True) frees them), True for PyTorch 1.x
    # (zero_grad zeroed in place) and for stacks with a persistent gradient buffer.
    keeps_gradients: bool = False
    # The library that generates (frameworks.py key): its decoding speed (speed.decode_speed).
    decode_framework: str = "transformers"
    # Chunked prefill (vLLM): at most this many tokens per forward pass; None: whole prompts.
    prefill_chunk_tokens: int | None = None
    # generate() rebuilds a tuple KV cache each step (frameworks.Framework.tuple_kv_cache).
    tuple_kv_cache: bool = False
    # How 4-bit weights are stored: "bitsandbytes" (NF4/FP4) or "gptq".
    quant_method: str = "bitsandbytes"
    # Whether 16-bit training runs under torch.autocast (False: DeepSpeed's and Megatron's
    # fp16/bf16 modes cast the model itself, frameworks.Framework.autocast).
    framework_autocast: bool = True
    # A batch inference job (tokens given, no batch) under a library that schedules the job's
    # prompts itself (vLLM): each option runs as many sequences at once as its KV cache holds
    # (compute.kv_filled_batch); `batch_size` is the one sequence memory is sized for.
    fills_kv_cache: bool = False
    # The precision was not said: a GPU without bf16 computes in fp16 with loss scaling
    # (compute.compute_dtype_for) instead of being ruled out, where the library can.
    fp16_where_no_bf16: bool = False
    # An encoder-decoder (T5, BART, Whisper): the tokens per sequence its encoder layers read
    # and its decoder layers write (the target in training, the generated tokens in
    # inference); 0 for any other model, whose layers all see seq_len (workload.py sets both).
    encoder_len: int = 0
    decoder_len: int = 0
    # False where the input is not text (Whisper reads audio): an inference job's tokens are
    # then the ones it writes, not prompt and generated together (tokens_per_request).
    reads_text: bool = True

    @property
    def training(self) -> bool:
        return self.task != "inference"

    @property
    def tokens_per_request(self) -> int:
        """The tokens one inference request counts towards the job's total: its prompt and
        what it generates, or only what it generates where the prompt is not text."""
        prompt = self.seq_len if self.reads_text else 0
        return max(prompt + self.new_tokens, 1)

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


def lora_targeted_linears(shape: ModelShape, wl: Workload) -> list:
    """The linear layers of a block that carry LoRA adapters: those named, or without targets
    every nn.Linear (PEFT's "all-linear"; a family's parameter-tensor experts are not)."""
    targets = set(wl.lora_targets)
    if not targets:
        return [lin for lin in shape.linears if lin.module]
    return [lin for lin in shape.linears if _short(lin.name) in targets]


def lora_trainable_params(shape: ModelShape, wl: Workload) -> int:
    """r * (in + out) for every targeted linear layer in every block."""
    linears = lora_targeted_linears(shape, wl)
    if not linears:  # a shape without named linears: q/k/v/o + MLP of a standard block
        h, f = shape.hidden_size, shape.intermediate_size
        per_layer = 4 * (h + h) + (3 if shape.gated_mlp else 2) * (h + f)
        return wl.lora_rank * per_layer * shape.total_layers
    return wl.lora_rank * sum(
        (lin.in_features + lin.out_features) * lin.count_per_layer * shape.blocks_with(lin)
        for lin in linears
    )


def copies_per_token(shape: ModelShape, lin) -> int:
    """How many copies of a block's linear layer one token passes through: one, or for an
    expert's layer the experts it is routed to (each expert sees only its tokens)."""
    if lin.count_per_layer > 1:
        return min(lin.count_per_layer, shape.experts_per_token or lin.count_per_layer)
    return 1


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def routed_expert_params(shape: ModelShape) -> float:
    """Parameters of a mixture of experts' routed experts: those idle for a token are
    (E - k) / E of them. 0 for a dense model."""
    experts, k = shape.num_experts, shape.experts_per_token
    if not (experts > k > 0):
        return 0.0
    idle = shape.params_total - shape.params_active
    return idle * experts / (experts - k)


def base_weight_bytes(
    shape: ModelShape,
    weight_format: str,
    double_quant: bool = False,
    method: str = "",
    kept_bytes: int = 2,
) -> tuple[float, float]:
    """(bytes of the stored weights, bytes of the quantisation constants); `kept_bytes` per
    parameter a quantised base leaves unquantised (2; 4 where PEFT casts them to fp32)."""
    total = shape.params_total
    if weight_format == "mxfp4":
        # The checkpoint's routed experts as stored (gpt-oss); attention, router, embeddings
        # and LM head stay bf16. The shared scales are the constants.
        experts = routed_expert_params(shape)
        return experts * 0.5 + (total - experts) * 2, experts * (c.MXFP4_EXPERT_BYTES.value - 0.5)
    if weight_format == "fp8":
        # vLLM and transformers quantise the blocks' matmul weights; the rest stays 16-bit.
        # Unlike bitsandbytes, fp8 also covers experts kept as parameter tensors (DeepSeek-V3.2
        # and GLM-4.5 in transformers 5): their FP8 checkpoints store them in fp8 and vLLM's
        # fused MoE layer serves them so.
        linear = shape.params_linear
        return linear * 1 + (total - linear) * 2, linear * c.FP8_BLOCK_SCALES.value
    if weight_format in ("int8", "int4"):
        linear = shape.params_quantisable
        kept = total - linear  # embeddings, LM head, norms stay in 16-bit
        if weight_format == "int8":
            rows = _quantised_rows(shape)
            return linear * 1 + kept * kept_bytes, rows * c.INT8_ROW_SCALE.value
        if method == "gptq":
            return linear * 0.5 + kept * kept_bytes, linear * c.GPTQ_GROUP_CONSTANTS.value
        per_weight = (c.NF4_DOUBLE_QUANT if double_quant else c.NF4_CONSTANTS).value
        return linear * 0.5 + kept * kept_bytes, linear * per_weight
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
    kept_bytes = 4 if wl.fp32_unquantised else 2
    weights, constants = base_weight_bytes(
        shape, wl.weight_format, wl.double_quant, wl.quant_method, kept_bytes
    )
    workspace = dequant_workspace_bytes(shape, wl)
    head = shape.vocab_size * shape.hidden_size
    # GPTQ checkpoints leave the LM head in 16-bit (optimum's GPTQQuantizer skips lm_head).
    gptq = wl.quant_method == "gptq"
    if wl.weight_format != "int4" or not head or wl.quantises_head is False or gptq:
        return weights, constants, workspace
    per_weight = (c.NF4_DOUBLE_QUANT if wl.double_quant else c.NF4_CONSTANTS).value
    head_weights = weights - shape.params_lm_head * kept_bytes + head * 0.5
    head_constants = constants + head * per_weight
    head_workspace = c.DEQUANT_WORKSPACE_LAYERS.value * max(shape.largest_linear, head) * 2
    larger = head_weights + head_constants + head_workspace > weights + constants + workspace
    if wl.quantises_head or larger:
        return head_weights, head_constants, head_workspace
    return weights, constants, workspace


def _quantised_rows(shape: ModelShape) -> int:
    if shape.linears:
        return sum(
            lin.out_features * lin.count_per_layer * shape.blocks_with(lin)
            for lin in shape.linears
            if lin.module
        )
    return shape.params_linear // max(shape.hidden_size, 1)


def dequant_workspace_bytes(shape: ModelShape, wl: Workload) -> float:
    if wl.weight_format == "int4" and wl.quant_method == "gptq":
        return c.GPTQ_DEQUANT_LAYERS.value * shape.largest_linear * 2
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
    h = shape.hidden_size
    a = shape.num_attention_heads
    kv = shape.kv_dim
    dropout = shape.family in c.DROPOUT_FAMILIES
    # bitsandbytes' quantised layers return their input's dtype: fp32 after PEFT's cast.
    e = 4 if wl.fp32_unquantised else wl.act_bytes
    amp = wl.autocast
    # Norm inputs: fp32 under autocast, and where the RMSNorm upcasts before normalising.
    r = 4 if amp or shape.family in c.RMSNORM_FP32_FAMILIES else e
    sb = s * b
    attn_in, mlp_in, down_in = stored_linear_inputs(shape, wl)
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
    softmax = e * sb * (shape.attn_dim + 2 * kv + h)  # Q, K, V, output
    hybrid = shape.linear_attention
    parallel = bool(linear_attention and hybrid.parallel_attention)
    attn = softmax if mixer else 0
    if linear_attention:
        attn = e * sb * hybrid.saved_per_token + (softmax if parallel else 0)
    if cross:
        unsharded += r * sb * h + attn_in * e * sb * h + (sb * h if dropout else 0)
        attn += e * (sb * (shape.attn_dim + h) + 2 * cross * b * kv)
    # Gated: gate, up and act(gate) always (SiLU and product backward), the product when the
    # down projection keeps its input. GELU: its input always, its output likewise.
    inner = (3 if shape.gated_mlp else 1) + down_in
    if shape.num_experts and shape.experts_per_token:
        f = shape.moe_intermediate_size or shape.intermediate_size
        routed = shape.experts_per_token + shape.shared_experts
        mlp_bytes = inner * e * sb * f * routed + e * sb * h * routed
    else:
        mlp_bytes = inner * e * sb * shape.intermediate_size
    if not mlp:
        mlp_bytes = 0
    if (linear_attention and not parallel) or not mixer:
        scores = 0
    elif (wl.flash_attention and not shape.eager_attention) or wl.selective_recompute:
        # logsumexp in fp32 (selective: the recomputed core's input), per attention block
        scores = 4 * b * a * s * (2 if cross else 1)
    else:
        if amp:
            per_score = 4 + 2 + (1 + 4 if dropout else 0)
        else:
            upcast = 4 if e == 2 and shape.family in c.FP32_SOFTMAX_FAMILIES else 0
            per_score = e + upcast + (1 + e if dropout else 0)
        scores = per_score * a * s * (s + cross) * b
    sharded = attn + mlp_bytes + scores
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
    # LoRA and QLoRA load the frozen base in 16-bit (or 4-bit with a 16-bit compute dtype):
    # the embedding output and every residual add are 16-bit even under autocast, only the
    # norms upcast inside the layer (counted per layer).
    fp32_stream = (wl.autocast and not sixteen_bit_params and not wl.adapters) or (
        wl.fp32_unquantised  # PEFT's kbit preparation made the embedding output fp32
    )
    # Mamba adds each block's output to a float32 residual whatever the model's dtype.
    fp32_residual = bool(shape.linear_attention and shape.linear_attention.fp32_residual)
    residual_bytes = 4 if fp32_stream or fp32_residual else wl.act_bytes
    # An encoder-decoder's two stacks: (layers, tokens per sequence, encoder tokens each
    # layer's cross-attention reads); any other model has one stack at seq_len.
    # A masked autoencoder's decoder (ViT-MAE) reads no cross-attention, and its encoder has
    # its own widths (ModelShape.encoder_view).
    if wl.encoder_len:
        stacks = [
            (shape.encoder_layers, wl.encoder_len, 0, shape.encoder_view()),
            (shape.num_layers, wl.decoder_len, wl.encoder_len * shape.cross_attends, shape),
        ]
    else:
        stacks = [(shape.total_layers, wl.seq_len, 0, shape)]
    saved = inputs = 0.0
    largest_layer = 0.0
    stream = 0.0  # the embedding output and the final norm of each stack
    for layers, seq, cross, stack in stacks:
        # A hybrid (decoder-only) has blocks of both attention kinds, and Nemotron-H blocks
        # that are an MLP alone while its mixer blocks have none.
        hybrid = None if wl.encoder_len else shape.linear_attention
        linear = hybrid.layers if hybrid else 0
        mlp_only = hybrid.mlp_only_layers if hybrid else 0
        separate = bool(hybrid and hybrid.separate_mlp)
        kinds = (
            (layers - linear - mlp_only, False, True),
            (linear, True, True),
            (mlp_only, False, False),
        )
        for count, linear_attention, mixer in kinds:
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
                mlp=not (separate and mixer),
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


# Encoder heads that score every token against the vocabulary; the others (sequence or token
# classification, question answering, the bare model) produce a handful of numbers per
# sequence or token.
_VOCAB_HEADS = ("ForMaskedLM", "ForPreTraining")


def masked_lm_head(shape: ModelShape) -> bool:
    """The head config.json's `architectures` names scores tokens against the vocabulary.
    ElectraForPreTraining is the discriminator: one logit per token (replaced or not). A
    vision encoder's pre-training head does only where it has a vocabulary: BEiT's masked
    image modelling scores every patch against its 8,192 visual tokens; ViT-MAE's and
    VideoMAE's regress pixels (vocab 0)."""
    name = shape.architecture or ""
    if name.endswith("ForMaskedImageModeling") or shape.family in ("vit_mae", "videomae"):
        return shape.vocab_size > 0 and name.endswith("ForMaskedImageModeling")
    return name.endswith(_VOCAB_HEADS) and name != "ElectraForPreTraining"


def logits_bytes(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    # An encoder-decoder scores its decoder's tokens (the target) against the vocabulary.
    b, s, v = wl.batch_size, wl.decoder_len or wl.seq_len, shape.vocab_size
    if wl.training:
        if not shape.vocab_head:  # an encoder's task head: a few logits per sequence
            return 0.0
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


def kv_cache_bytes(
    shape: ModelShape, wl: Workload, *, tp: int = 1, new_tokens: int | None = None
) -> float:
    """The KV cache once `new_tokens` are generated (None: all the request's)."""
    if wl.training or shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    generated = wl.new_tokens if new_tokens is None else new_tokens
    copies = kv_cache_copies(shape, wl, generated)
    return _one_cache_bytes(shape, wl, tp, generated) * copies + recurrent_state_bytes(
        shape, wl, tp=tp
    )


def _one_cache_bytes(shape: ModelShape, wl: Workload, tp: int, generated: int) -> float:
    """One copy of the KV cache once `generated` tokens are generated."""
    # An encoder-decoder's layers cache their own generated tokens and, for cross-attention,
    # the encoder's keys and values of the whole input.
    tokens = (wl.encoder_len or wl.seq_len) + generated
    if shape.attention_groups:
        # Layers that differ in heads and window; those reading another layer's cache keep none;
        # cross-attention layers keep their image tokens' keys and values whatever the length.
        # A latent cache (AttentionGroup.cache_width) is replicated, not split by head.
        values = sum(
            g.layers
            * (g.cache_width or 2 * math.ceil(g.kv_heads / tp) * g.head_dim)
            * (g.cross_tokens or min(tokens, g.window or tokens))
            for g in shape.attention_groups
            if g.caches
        )
        return values * wl.batch_size * wl.act_bytes
    # A latent cache (DeepSeek MLA) is replicated, not split by head.
    per_token = shape.kv_cache_width or 2 * math.ceil(shape.num_kv_heads / tp) * shape.head_dim
    # Sliding-window layers keep at most the window (a rolling buffer); a hybrid's
    # linear-attention layers keep none (Falcon-H1's, attending as well, keep both).
    window = shape.sliding_window
    local = shape.sliding_layers if window and window < tokens else 0
    softmax = shape.softmax_layers - shape.encoder_layers
    layer_tokens = (softmax - local) * tokens + local * (window or 0)
    return layer_tokens * per_token * wl.batch_size * wl.act_bytes


def kv_read_bytes(
    shape: ModelShape, wl: Workload, *, tp: int = 1, new_tokens: int | None = None
) -> float:
    """The KV cache one decoding step reads once `new_tokens` are generated: the cache itself,
    except where layers differ (AttentionGroup). There a sparse layer (DeepSeek-V3.2) reads
    only its top-k keys and values while its indexer group scores every cached key, and a
    layer that caches nothing (Gemma 4's and 3n's KV-shared layers) still reads the cache it
    shares: each group reads its own width over the tokens it attends to.

    A tuple cache rebuilt each step (kv_cache_copies) moves the cache three times: torch.cat
    reads the old cache and writes the new one, and attention reads the new one."""
    if wl.training or shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    generated = wl.new_tokens if new_tokens is None else new_tokens
    copies = kv_cache_copies(shape, wl, generated)
    passes = 2 * copies - 1  # one read, and a read and a write per copy made
    if not shape.attention_groups:
        cache = _one_cache_bytes(shape, wl, tp, generated)
        return cache * passes + recurrent_state_bytes(shape, wl, tp=tp)
    tokens = (wl.encoder_len or wl.seq_len) + generated
    values = sum(
        g.layers
        * (g.cache_width or 2 * math.ceil(g.kv_heads / tp) * g.head_dim)
        * (g.cross_tokens or min(tokens, g.reads or g.window or tokens))
        for g in shape.attention_groups
    )
    return values * wl.batch_size * wl.act_bytes * passes + recurrent_state_bytes(shape, wl, tp=tp)


def recurrent_state_bytes(shape: ModelShape, wl: Workload, *, tp: int = 1) -> float:
    """A hybrid's linear-attention layers keep, per sequence and whatever its length, the
    short convolution's last inputs in the activation dtype and the delta rule's (or the
    Mamba-2 scan's) matrix state in float32 (Qwen3.5's config: mamba_ssm_dtype float32;
    transformers' Mamba-2 cache keeps the scan's float32 final state); both are split by head
    under tensor parallelism."""
    hybrid = shape.linear_attention
    if not hybrid:
        return 0.0
    per_sequence = hybrid.state_values * wl.act_bytes + hybrid.state_fp32_values * 4
    return hybrid.layers * per_sequence * wl.batch_size / tp


def kv_cache_copies(shape: ModelShape, wl: Workload, new_tokens: int | None = None) -> float:
    """Caches alive at the peak of generation: two where the model's own code or a
    transformers before 4.36 returns a new tuple cache each step (old and new alive
    together), else one (constants/memory.py). `new_tokens`: generated so far (None: all
    the request's)."""
    own_code = shape.remote_code and wl.decode_framework == "transformers"
    generated = wl.new_tokens if new_tokens is None else new_tokens
    legacy = generated > 0 and (wl.tuple_kv_cache or own_code)
    return c.LEGACY_KV_CACHE_COPIES.value if legacy else 1.0
