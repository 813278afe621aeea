"""The byte terms of peak memory, component by component: weights (base, quantisation
constants, dequantisation workspace, LoRA adapters), logits and the KV cache, for one request
(`Workload`) and model (`ModelShape`); the activations, kept for backward or used in prefill,
are in activations.py.

Each term is bytes on one GPU before the parallel layout shards it; memory.py's `MemoryModel`
adds the training state, lays the terms out per strategy and finds the peak phase. The
constants they use are in constants/memory.py, with their sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.engine import constants as c
from advisor.engine.shape import ModelShape

ENCODER_ONLY_FAMILIES = frozenset(
    {"bert", "roberta", "distilbert", "vit", "deberta", "electra", "modernbert", "esm", "dinov2"}
    | {"clip", "siglip"}  # dual encoders (architecture/dual_encoders.py)
    | {"mpnet", "longformer"}  # BERT-like encoders (architecture/encoders.py)
    | {"deit", "beit", "vit_mae", "videomae"}  # vision encoders (architecture/vision.py)
    | {"wav2vec2", "hubert", "wavlm", "data2vec-audio"}  # speech (architecture/speech.py)
)


@dataclass(frozen=True, slots=True)
class Rollout:
    """What a GRPO step generates before it trains (rollouts.py): prompts of `prompt_tokens`,
    completions of up to `completion_tokens`, `generations` completions a prompt, and `batch`
    completions per optimizer step over all GPUs (TRL's generation batch)."""

    prompt_tokens: int
    completion_tokens: int
    generations: int
    batch: int


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
    # The loss runs over this many tokens at a time, each chunk recomputed in backward (TRL's
    # chunked_nll): one chunk's logits exist at a time, whatever the micro-batch.
    loss_chunk_tokens: int | None = None
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
    # Adapters on a 4-/8-bit base kept in bf16 by the library (frameworks.Framework
    # .sixteen_bit_kbit_adapters): 16-bit weights, gradients and optimizer moments.
    sixteen_bit_adapters: bool = False
    # Whether the gradients of the last step still exist during the forward pass: False for
    # PyTorch >= 2.0 stacks (zero_grad(set_to_none=True) frees them), True for PyTorch 1.x
    # (zero_grad zeroed in place) and for stacks with a persistent gradient buffer.
    keeps_gradients: bool = False
    # The library clips the gradient norm every optimizer step (frameworks.Framework
    # .clips_gradients): more traffic in each step (optimizer_step.py).
    clips_gradients: bool = False
    # The model runs under torch.compile (training): its elementwise kernels are fused
    # (constants COMPILE_ELEMENTWISE_SHARE); memory is counted as eager, an upper bound.
    compiled: bool = False
    # The library that generates (frameworks.py key): its decoding speed (decode_speed.py).
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
    # What fine-tuning optimises (preference.py): "sft", "dpo", "reference_free_preference" or
    # "kto". A pair objective's sample is a pair whose two sequences run in one pass
    # (`sequences_per_sample` 2): batch_size and every micro-batch count samples. DPO and KTO
    # keep a frozen reference copy when they train every weight (`reference_copy`) and run the
    # reference's forward pass `reference_passes` times per token trained on (DPO 1, KTO 2 with
    # every step; divided by the epochs when its log-probabilities are computed once before
    # training, `reference_precomputed`). KTO's policy also runs `policy_passes` forward passes
    # without gradients per token trained on (its KL sequences), every step.
    objective: str = "sft"
    sequences_per_sample: int = 1
    reference_copy: bool = False
    reference_passes: float = 0.0
    reference_precomputed: bool = False
    policy_passes: float = 0.0
    # GRPO (rollouts.py): every step first generates its completions with vLLM, then trains on
    # prompt + completion (`seq_len` is their sum); None for a job that does not generate.
    rollout: Rollout | None = None
    # Bytes per parameter of the reference copy where the library loads it afresh rather than
    # copying the policy as held (GRPO's from_pretrained in the checkpoint's 16-bit dtype);
    # 0: as held (memory.reference_copy_bytes).
    reference_param_bytes: float = 0.0

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
    def sample_tokens(self) -> int:
        """Tokens one sample of the batch puts through the model: its sequences' together."""
        return self.seq_len * self.sequences_per_sample

    @property
    def reference_in_step(self) -> bool:
        """DPO's or KTO's reference runs forward passes in every step (not precomputed)."""
        return self.reference_passes > 0 and not self.reference_precomputed

    @property
    def forward_only_passes(self) -> float:
        """Forward passes without gradients per token trained on, besides the policy's own
        forward and backward: the reference's and KTO's KL pass (each 2 FLOPs per parameter
        and token, one more 4-bit dequantisation)."""
        return self.reference_passes + self.policy_passes

    @property
    def step_forward_passes(self) -> float:
        """Of those, the ones every step runs (a precomputed reference's run before training):
        each gathers ZeRO-3's sharded weights once more per micro-batch."""
        return (self.reference_passes if self.reference_in_step else 0.0) + self.policy_passes

    @property
    def generates(self) -> bool:
        """Each training step generates its own data first (GRPO)."""
        return self.rollout is not None

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
    return [lin for lin in shape.linears if lora_target_name(lin.name) in targets]


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


def lora_target_name(name: str) -> str:
    """The part of a linear layer's dotted name that PEFT's target_modules match."""
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


def logits_never_formed(logits_per_entry: float | None, loss_chunk_tokens: int | None) -> bool:
    """Whether a training loss never holds the whole logits (a fused loss: Liger's, Unsloth's
    Cut Cross-Entropy), as Workload.logits_per_entry and loss_chunk_tokens say: TRL's chunked
    loss keeps none per token either, but forms each chunk's in full."""
    return logits_per_entry == 0.0 and not loss_chunk_tokens


def loss_chunk_bytes(shape: ModelShape, wl: Workload) -> float:
    """What one chunk of a chunked loss holds (a fixed buffer, not per sample): the chunk's
    tokens against the vocabulary at the bytes Transformers' fp32 loss keeps, and the fp32 copy
    of the LM head weight each chunk multiplies by (TRL's chunked_nll computes
    `h.float() @ w.float().t()` inside each checkpointed chunk); 0 where the loss is not
    chunked."""
    if not (wl.training and wl.loss_chunk_tokens and shape.vocab_head):
        return 0.0
    tokens = min(wl.loss_chunk_tokens, wl.decoder_len or wl.seq_len)
    head_fp32 = shape.vocab_size * shape.hidden_size * 4
    return tokens * shape.vocab_size * c.LOGITS_TRAINING_BYTES.value + head_fp32


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
    """The KV cache one decoding step's attention reads once `new_tokens` are generated: the
    cache itself, except where layers differ (AttentionGroup). There a sparse layer
    (DeepSeek-V3.2) reads only its top-k keys and values while its indexer group scores every
    cached key, and a layer that caches nothing (Gemma 4's and 3n's KV-shared layers) still
    reads the cache it shares: each group reads its own width over the tokens it attends to.
    A hybrid's recurrent state is not a cache the attention reads (recurrent_state_bytes).
    What the library moves besides (a cache grown by concatenation, keys repeated per query
    head) is inference_reads.decode_cache_seconds'."""
    if wl.training or shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    generated = wl.new_tokens if new_tokens is None else new_tokens
    if not shape.attention_groups:
        return _one_cache_bytes(shape, wl, tp, generated)
    tokens = (wl.encoder_len or wl.seq_len) + generated
    values = sum(
        g.layers
        * (g.cache_width or 2 * math.ceil(g.kv_heads / tp) * g.head_dim)
        * (g.cross_tokens or min(tokens, g.reads or g.window or tokens))
        for g in shape.attention_groups
    )
    return values * wl.batch_size * wl.act_bytes


def kv_held_bytes(
    shape: ModelShape, wl: Workload, *, tp: int = 1, new_tokens: int | None = None
) -> float:
    """One copy of the softmax layers' KV cache once `new_tokens` are generated: what a
    library that grows the cache by concatenation (torch.cat) reads and writes again each
    step."""
    if wl.training or shape.family in ENCODER_ONLY_FAMILIES:
        return 0.0
    generated = wl.new_tokens if new_tokens is None else new_tokens
    return _one_cache_bytes(shape, wl, tp, generated)


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
