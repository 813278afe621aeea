"""The few numbers of a model's shape the memory and FLOP formulas need.

`ModelShape` is a plain, fast dataclass (the ranking loop touches it thousands of times) built
from the `ModelArchitecture` that `advisor.engine.architecture` counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# The roles of an encoder-decoder's cross-attention key and value projections: in the decoder,
# but reading the encoder's output, so they run over the input's tokens.
CROSS_KV_ROLES = frozenset({"cross_attn_k", "cross_attn_v"})


@dataclass(frozen=True, slots=True)
class Linear:
    name: str
    in_features: int
    out_features: int
    count_per_layer: int = 1
    role: str = ""  # "attn_q", "mlp_down", ... as architecture.LinearShape.role
    module: bool = True  # an nn.Linear, which PEFT's "all-linear" adapts
    layers: int | None = None  # blocks that have it, when not all (LinearShape.layers)


@dataclass(frozen=True, slots=True)
class ModelShape:
    params_total: int
    params_active: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool = True
    family: str = "llama"
    architecture: str | None = None
    encoder_layers: int = 0
    is_encoder_decoder: bool = False
    # The encoder stack's parameters, and the fixed length of its input where the model has
    # one (architecture.ModelArchitecture.params_encoder / encoder_positions).
    params_encoder: int = 0
    encoder_positions: int | None = None
    tied_embeddings: bool = False
    params_embedding: int = 0
    params_lm_head: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    # Values cached per token and layer when not 2 x KV heads x head dim (DeepSeek MLA).
    kv_cache_width: int | None = None
    # Sliding-window attention: the window in tokens and how many decoder layers use it (the
    # others attend to the whole context). Their KV cache never holds more than the window.
    sliding_window: int | None = None
    sliding_layers: int = 0
    linears: tuple[Linear, ...] = field(default_factory=tuple)
    # A hybrid's linear-attention blocks: no KV cache, a fixed recurrent state per sequence,
    # and their own saved tensors (architecture.model.LinearAttention); None: none.
    linear_attention: Any = None
    # Softmax layers that differ in widths, window or caching (architecture.model.
    # AttentionGroup, Gemma 4); empty: every layer as the fields above say.
    attention_groups: tuple[Any, ...] = ()
    # Runs its repository's own modelling code (architecture.registry.runs_remote_code).
    remote_code: bool = False
    # The encoder stack's widths where they differ from the decoder's (a masked autoencoder:
    # architecture.model.StackWidths); None: the fields above (encoder_view).
    encoder_widths: Any = None
    # A convolutional stem in front of the blocks (architecture.model.Frontend: a speech
    # encoder's feature encoder), whose FLOPs and activations per token the block formulas
    # do not see; None: none. `eager_attention`: the model keeps its attention scores
    # whatever kernel is asked for (WavLM).
    frontend: Any = None
    eager_attention: bool = False
    # Copies of the hidden state between blocks (Gemma 3n's AltUp: 4); 1 otherwise.
    residual_streams: int = 1
    # Multimodal encoders run once per image or audio clip, never in a decoding step
    # (architecture.ModelArchitecture.params_input_towers).
    params_input_towers: int = 0
    # Whether the job's forward pass projects onto the vocabulary (the LM head's matmul and
    # logits): language models do; an encoder only in masked-LM training
    # (workload.resolve_shape; fine-tuning trains a task head, inference reads embeddings).
    vocab_head: bool = True
    source: str = ""
    exact: bool = True
    notes: tuple[str, ...] = ()

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def attn_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def total_layers(self) -> int:
        return self.num_layers + self.encoder_layers

    @property
    def cross_attends(self) -> bool:
        """The decoder reads the encoder's output through cross-attention (T5, BART, Whisper);
        a masked autoencoder's decoder (ViT-MAE, VideoMAE) takes it as its input instead."""
        return any(lin.role in CROSS_KV_ROLES for lin in self.linears)

    def encoder_view(self) -> ModelShape:
        """This shape with the encoder stack's widths, for the formulas that size one layer of
        it (activations, attention): itself where both stacks share them."""
        w = self.encoder_widths
        if w is None:
            return self
        return replace(
            self,
            hidden_size=w.hidden_size,
            num_attention_heads=w.num_attention_heads,
            num_kv_heads=w.num_attention_heads,
            head_dim=w.head_dim,
            intermediate_size=w.intermediate_size,
            linears=(),
            encoder_widths=None,
        )

    @property
    def softmax_layers(self) -> int:
        """Layers whose attention scores every pair of tokens (all but a hybrid's linear
        attention, and its MLP-only blocks; Falcon-H1's linear blocks attend as well): the
        quadratic FLOPs and the KV cache are theirs."""
        hybrid = self.linear_attention
        if not hybrid:
            return self.total_layers
        softmax = self.total_layers - hybrid.layers - hybrid.mlp_only_layers
        return softmax + (hybrid.layers if hybrid.parallel_attention else 0)

    @property
    def linear_attention_layers(self) -> int:
        return self.linear_attention.layers if self.linear_attention else 0

    @property
    def sliding_chunked(self) -> bool:
        """The local layers attend within fixed chunks of `sliding_window` tokens (Llama 4's
        chunked attention, sliding_window_of) rather than a window sliding with each token."""
        return self.family.startswith("llama4")

    def attention_reads(self, seq: int) -> float:
        """Query width x tokens one token's attention reads, summed over the softmax layers, in
        the count the FLOP formulas use for a full layer: the sequence length, as Megatron's
        and PaLM's MFU formulas count causal attention (a causal read averages half of it). A
        sliding-window layer's causal reads average w - w^2/2s, which is 2w - w^2/s in that
        count; a chunked layer's (Llama 4) average half a chunk: c in that count. Gemma 3 27B
        at 32,768 tokens (52 of 62 layers within 1,024 tokens) reads a fifth of what 62 full
        layers would."""
        if self.attention_groups:
            # A cross-attention group (AttentionGroup.cross_tokens) reads all of its n image
            # tokens from every query: 2n in this count, as a window read in full.
            return sum(
                g.layers
                * g.query_width
                * (
                    2 * g.cross_tokens
                    if g.cross_tokens
                    # a sparse layer's top-k reads average as a window of that size does
                    else _reads(seq, g.reads or g.window, chunked=False)
                )
                for g in self.attention_groups
            )
        full = self.softmax_layers
        window = self.sliding_window
        local = min(self.sliding_layers, full) if window else 0
        per_local = _reads(seq, window, chunked=self.sliding_chunked)
        return self.attn_dim * ((full - local) * seq + local * per_local)

    def blocks_with(self, lin: Linear) -> int:
        """How many blocks have this linear layer."""
        return self.total_layers if lin.layers is None else lin.layers

    @property
    def params_linear(self) -> int:
        """Weights inside the transformer blocks' linear layers: what int8/int4 quantises."""
        if self.linears:
            weights = sum(
                lin.in_features * lin.out_features * lin.count_per_layer * self.blocks_with(lin)
                for lin in self.linears
            )
            return min(weights, self.params_total)
        kept = self.params_embedding + self.params_lm_head
        return max(self.params_total - kept, 0)

    @property
    def params_quantisable(self) -> int:
        """Weights in the blocks' nn.Linear modules: what bitsandbytes, GPTQ and the fp8 stacks
        replace with quantised layers. A family's parameter-tensor experts (gpt-oss) stay in
        16-bit."""
        if self.linears and not all(lin.module for lin in self.linears):
            weights = sum(
                lin.in_features * lin.out_features * lin.count_per_layer * self.blocks_with(lin)
                for lin in self.linears
                if lin.module
            )
            return min(weights, self.params_total)
        return self.params_linear

    @property
    def largest_linear(self) -> int:
        if self.linears:
            return max(lin.in_features * lin.out_features for lin in self.linears)
        ffn = self.moe_intermediate_size or self.intermediate_size
        return self.hidden_size * max(ffn, self.hidden_size)

    @property
    def params_per_layer(self) -> int:
        return max(self.params_linear // max(self.total_layers, 1), 1)

    @property
    def head_flop_params(self) -> int:
        """The LM head's matmul parameters (the vocabulary projection, tied to the embedding
        or not); 0 where the job has no vocabulary projection (`vocab_head`)."""
        if not self.vocab_head:
            return 0
        return self.params_lm_head or self.vocab_size * self.hidden_size

    @property
    def flop_params(self) -> int:
        """Parameters that do matmuls per token: active weights, minus the embedding lookup,
        plus the LM head's matmul even when its weight is tied to the embedding (none where
        the job has no vocabulary projection: `vocab_head`)."""
        head = self.head_flop_params
        return max(self.params_active - self.params_embedding - self.params_lm_head + head, 1)


def _reads(seq: int, window: int | None, *, chunked: bool) -> float:
    """Tokens a layer's attention reads per token (ModelShape.attention_reads' count)."""
    if not window or seq <= window:
        return seq
    return window if chunked else 2 * window - window * window / seq


def sliding_window_of(config: dict | None, num_layers: int) -> tuple[int | None, int]:
    """(window, layers that use it) from a config.json.

    Mistral 7B v0.1: `sliding_window` 4096 on every layer (Jiang et al. 2023, arXiv:2310.06825,
    "Sliding Window Attention"; its rolling buffer cache keeps only the window). Gemma 2:
    alternating local (4,096-token window) and global layers (Gemma 2 report, arXiv:2408.00118,
    section 2). Gemma 3: `sliding_window_pattern` local layers per global one; EXAONE 4.0: a
    string of local and global layers ("LLLG"). Qwen2 and others carry a `sliding_window` they
    do not use unless `use_sliding_window` is true. A `layer_types` list (recent transformers)
    names each layer.
    """
    if not config:
        return None, 0
    if isinstance(config.get("text_config"), dict):
        # A multimodal checkpoint (Gemma 3 4B-27B, ...) keeps its language model's attention
        # settings in text_config; the vision tower holds no KV cache.
        config = config["text_config"]
    chunk = config.get("attention_chunk_size")
    if (
        str(config.get("model_type", "")).startswith("llama4")
        and isinstance(chunk, int)
        and not isinstance(chunk, bool)
        and chunk > 0
    ):
        # Llama 4: its rotary layers attend within chunks of attention_chunk_size tokens
        # (chunked attention, cached up to one chunk); one layer in no_rope_layer_interval has
        # no rotary embedding and attends to everything (`no_rope_layers`: 1 = rotary).
        flags = config.get("no_rope_layers")
        if isinstance(flags, list) and flags:
            return chunk, min(sum(1 for f in flags if f), num_layers)
        interval = config.get("no_rope_layer_interval")
        interval = interval if isinstance(interval, int) and interval > 0 else 4
        return chunk, num_layers - num_layers // interval
    window = config.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or config.get("use_sliding_window") is False:
        return None, 0
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        return window, sum(1 for t in types if t == "sliding_attention")
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:
        # EXAONE 4.0: a pattern of local (L) and global (G) layers, repeated ("LLLG").
        return window, sum(1 for i in range(num_layers) if pattern[i % len(pattern)] == "L")
    model_type = config.get("model_type", "")
    if model_type == "gemma2":
        return window, num_layers // 2
    if model_type.startswith("gemma3"):
        pattern = config.get("sliding_window_pattern") or 6
        return window, num_layers - num_layers // int(pattern)
    if model_type in ("mistral", "mixtral") or config.get("use_sliding_window") is True:
        return window, num_layers
    return None, 0


def shape_from_architecture(arch: Any) -> ModelShape:
    """Build the engine's shape from a `ModelArchitecture` (duck-typed to avoid a cycle)."""
    linears = tuple(
        Linear(
            name=lin.name,
            in_features=lin.in_features,
            out_features=lin.out_features,
            count_per_layer=lin.count_per_layer,
            role=getattr(lin, "role", "") or "",
            module=getattr(lin, "module", True),
            layers=getattr(lin, "layers", None),
        )
        for lin in (arch.layer_linears or [])
    )
    return ModelShape(
        params_total=arch.params_total,
        params_active=arch.params_active,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        num_attention_heads=arch.num_attention_heads,
        num_kv_heads=arch.num_kv_heads or arch.num_attention_heads,
        head_dim=arch.head_dim,
        intermediate_size=arch.intermediate_size,
        vocab_size=arch.vocab_size,
        gated_mlp=arch.gated_mlp,
        family=arch.family,
        architecture=arch.architecture,
        encoder_layers=arch.encoder_layers,
        is_encoder_decoder=arch.is_encoder_decoder,
        params_encoder=getattr(arch, "params_encoder", 0),
        encoder_positions=getattr(arch, "encoder_positions", None),
        tied_embeddings=arch.tied_embeddings,
        params_embedding=arch.params_embedding,
        params_lm_head=arch.params_lm_head,
        num_experts=arch.num_experts,
        experts_per_token=arch.experts_per_token,
        shared_experts=arch.shared_experts,
        moe_intermediate_size=arch.moe_intermediate_size,
        max_position_embeddings=arch.max_position_embeddings,
        kv_cache_width=getattr(arch, "kv_cache_width", None),
        linears=linears,
        linear_attention=getattr(arch, "linear_attention", None),
        attention_groups=tuple(getattr(arch, "attention_groups", ()) or ()),
        remote_code=bool(getattr(arch, "remote_code", False)),
        encoder_widths=getattr(arch, "encoder_widths", None),
        frontend=getattr(arch, "frontend", None),
        eager_attention=bool(getattr(arch, "eager_attention", False)),
        residual_streams=int(getattr(arch, "residual_streams", 1) or 1),
        params_input_towers=int(getattr(arch, "params_input_towers", 0) or 0),
        source=arch.source,
        exact=arch.exact,
        notes=tuple(arch.notes or ()),
    )


def llama_like_shape(
    *,
    params_total: int | None = None,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int | None = None,
    intermediate_size: int,
    vocab_size: int,
    tied_embeddings: bool = False,
    family: str = "llama",
) -> ModelShape:
    """A decoder-only gated-MLP shape, counted exactly (no biases, RMSNorm): tests and benches
    use it; the real counting for every family lives in `architecture.py`."""
    kv_heads = num_kv_heads or num_attention_heads
    head_dim = hidden_size // num_attention_heads
    kv_dim = kv_heads * head_dim
    linears = (
        Linear("q_proj", hidden_size, hidden_size, role="attn_q"),
        Linear("k_proj", hidden_size, kv_dim, role="attn_k"),
        Linear("v_proj", hidden_size, kv_dim, role="attn_v"),
        Linear("o_proj", hidden_size, hidden_size, role="attn_out"),
        Linear("gate_proj", hidden_size, intermediate_size, role="mlp_gate"),
        Linear("up_proj", hidden_size, intermediate_size, role="mlp_up"),
        Linear("down_proj", intermediate_size, hidden_size, role="mlp_down"),
    )
    per_layer = sum(lin.in_features * lin.out_features for lin in linears) + 2 * hidden_size
    embedding = vocab_size * hidden_size
    head = 0 if tied_embeddings else vocab_size * hidden_size
    counted = num_layers * per_layer + embedding + head + hidden_size
    total = params_total or counted
    return ModelShape(
        params_total=total,
        params_active=total,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        gated_mlp=True,
        family=family,
        tied_embeddings=tied_embeddings,
        params_embedding=embedding,
        params_lm_head=head,
        linears=linears,
        source="test shape",
    )
