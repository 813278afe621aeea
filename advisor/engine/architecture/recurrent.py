"""Recurrent and state-space hybrids: Google RecurrentGemma (recurrent_gemma, the Griffin
architecture) and IBM Bamba (bamba), as transformers 5 builds them (modeling_recurrent_gemma.py,
modeling_bamba.py; defaults from their configuration classes). Zyphra's Zamba and Zamba2 are
registered only to be refused, with their reason (`zamba_refused`).

Their recurrent mixers take the "linear attention" slot hybrids.py uses (`LinearAttention`): no
KV cache, a fixed state per sequence and layer, their own tensors for backward.

- RecurrentGemma (Botev et al. 2024, arXiv:2404.07839; De et al. 2024, arXiv:2402.19427): each
  block is RMSNorm, a temporal block, RMSNorm, a gated GELU MLP. The temporal block follows
  `block_types` cycled over the layers (recurrent, recurrent, attention in every release): an
  RG-LRU recurrent block or local multi-query attention over the last attention_window_size
  tokens. Its KV cache never holds more than the window (transformers' DynamicCache builds a
  sliding-window layer for every attention block), so the engine sees its attention layers as
  one windowed `AttentionGroup` and its recurrent layers as `LinearAttention`.
- Bamba: each block is a Mamba-2 mixer (mamba2_mixer.py's, BambaMixer) or q/k/v/o
  attention on the layers `attn_layer_indices` lists, then its SwiGLU MLP: Granite 4.0's dense
  layout under its own config keys.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.mamba2_mixer import TRAINING_KERNELS, granite_mamba2, state_note
from advisor.engine.architecture.model import AttentionGroup, LinearAttention
from advisor.engine.errors import ConfigError

# --- Google RecurrentGemma ---------------------------------------------------------------------

_GRIFFIN = ("recurrent", "recurrent", "attention")  # RecurrentGemmaConfig's block_types default


def _block_types(c: Config, layers: int) -> list[str]:
    """RecurrentGemmaConfig.layers_block_type: block_types repeated to num_hidden_layers. The
    released config.json files spell it `_block_types` (transformers 4.40's private field),
    which transformers 5 no longer reads: they get the default, the same Griffin pattern."""
    raw = c.raw.get("block_types")
    if raw is None:
        pattern = list(_GRIFFIN)
    elif isinstance(raw, list) and raw and all(t in ("recurrent", "attention") for t in raw):
        pattern = raw
    else:
        raise ConfigError(
            "config.json field 'block_types' must list 'recurrent' and 'attention' blocks, "
            "repeated over the layers",
            field="block_types",
        )
    return [pattern[i % len(pattern)] for i in range(layers)]


def _griffin_heads(c: Config, d: int) -> tuple[int, int, int]:
    """(query heads, key/value heads, head_dim), checked."""
    h = c.int("num_attention_heads", default=10)
    kv = c.int("num_key_value_heads", default=h)
    if h % kv:
        raise ConfigError(
            f"config.json field 'num_key_value_heads' ({kv}) must divide 'num_attention_heads' "
            f"({h}): each key/value head serves a whole group of query heads",
            field="num_key_value_heads",
        )
    # The config class sets head_dim to hidden // heads, but a head_dim in config.json is set
    # after it (PreTrainedConfig's extra keys) and wins; the releases agree (256).
    hd = c.int("head_dim", default=d // h) if d >= h else 0
    if not hd:
        raise ConfigError(
            f"config.json field 'num_attention_heads' ({h}) exceeds the hidden size ({d})",
            field="num_attention_heads",
        )
    return h, kv, hd


def _lru_width(c: Config, d: int, h: int) -> int:
    """lru_width, which the heads must divide (the RG-LRU gates' blocks)."""
    width = c.int("lru_width", default=d)
    if width % h:
        raise ConfigError(
            f"config.json field 'num_attention_heads' ({h}) must divide 'lru_width' ({width}): "
            "the RG-LRU gates are that many diagonal blocks",
            field="lru_width",
        )
    return width


def _griffin_mlp_width(c: Config, d: int) -> int:
    inter = c.int("intermediate_size", default=3 * d) // 2  # RecurrentGemmaMlp halves it
    if not inter:
        raise ConfigError(
            "config.json field 'intermediate_size' must be at least 2 (the MLP takes half of it)",
            field="intermediate_size",
        )
    return inter


def _recurrent_block(d: int, width: int, h: int) -> list[b.LinearShape]:
    block = width // h
    return [
        b.lin("linear_y", d, width, True, "linear_attn_gate"),
        b.lin("linear_x", d, width, True, "linear_attn_in"),
        # The RG-LRU's input and recurrence gates: `heads` diagonal blocks, each a
        # block x block matmul with a bias (baddbmm over parameter tensors).
        b.lin("rg_lru.input_gate_weight", block, block, True, "linear_attn_gate", h, False),
        b.lin("rg_lru.recurrent_gate_weight", block, block, True, "linear_attn_gate", h, False),
        b.lin("linear_out", width, d, True, "linear_attn_out"),
    ]


def _rg_lru_state(width: int, kernel: int, layers: int) -> LinearAttention | None:
    """What the recurrent layers keep per sequence and for backward; None without any."""
    if not layers:
        return None
    return LinearAttention(
        layers=layers,
        # conv1d_state: the last conv1d_width - 1 inputs, in the activation dtype;
        # recurrent_states: one value per channel, always float32.
        state_values=width * (kernel - 1),
        state_fp32_values=width,
        # What autograd keeps per token in lru_width units (the PyTorch path, no kernel):
        # linear_y's output and its GELU, the convolution's input and output (and the
        # gates' reshaped copy), both gates' sigmoids, the decay exp(log a), a^2 and
        # 1 - a^2 (the bounded sqrt), the gated input and its multiplier, the reset-masked
        # decay, the loop's float32 decay and state per step (two units each), the scan
        # output and the product linear_out reads.
        saved_per_token=18 * width,
    )


def recurrent_gemma_blueprint(c: Config, family: str) -> b.Blueprint:
    """RecurrentGemma 2B / 9B and their -it variants (RecurrentGemmaDecoderLayer).

    Attention: q/k/v projections with attention_bias, o_proj always with a bias; head_dim
    from the config, else hidden_size // num_attention_heads; half of each head rotates
    (partial_rotary_factor 0.5, a buffer). Recurrent block:
    linear_x and linear_y (hidden -> lru_width) and linear_out (back), all with biases, a
    depthwise conv1d of conv1d_width taps with a bias, and the RG-LRU: a recurrence parameter
    per channel and two block-diagonal gates (num_attention_heads blocks of
    lru_width / heads squared, each with a bias), kept as parameter tensors, not nn.Linear.
    MLP: gate_proj, up_proj, down_proj of intermediate_size // 2, all with biases. Norms are
    Gemma's (1 + weight) RMSNorms; the embedding scale is a buffer; the head is tied by
    default (every release leaves it tied) and its logits soft-capped (no parameter)."""
    d, layers = c.int("hidden_size", default=2560), c.int("num_hidden_layers", default=26)
    h, kv, hd = _griffin_heads(c, d)
    width = _lru_width(c, d, h)
    kernel = c.int("conv1d_width", default=4)
    window = c.int("attention_window_size", default=2048)
    types = _block_types(c, layers)
    n_attention = types.count("attention")
    n_recurrent = layers - n_attention
    vocab = c.int("vocab_size", default=256000)
    tied = c.bool("tie_word_embeddings", default=True)
    qkv_bias = c.bool("attention_bias", default=False)
    inter = _griffin_mlp_width(c, d)
    notes = [
        f"{n_recurrent} of {layers} layers run an RG-LRU recurrence: they keep no KV cache but "
        f"a fixed state of {(width * (kernel - 1) * 2 + width * 4) / 2**10:.1f} KiB per "
        f"sequence each; the other {n_attention} attend to the last {window:,} tokens only, "
        "so the cache stops growing there.",
        "Training through transformers runs the RG-LRU scan as a Python loop over the "
        "sequence's tokens (no fused kernel): long sequences train far slower than the "
        "matmul FLOPs suggest.",
    ]
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=True,
        vocab=vocab,
        positions=None,  # rotary, no trained length in the config; the window bounds attention
        tied=tied,
        attention=b.attention(d, h, kv, hd, qkv_bias=qkv_bias, out_bias=True),
        mlp=b.gated_mlp(d, inter, bias=True),
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,  # final_norm
        notes=notes,
        linear_attention=_recurrent_block(d, width, h) if n_recurrent else [],
        # conv1d weight and bias, the recurrence parameter
        linear_attention_norms=width * kernel + width + width,
        hybrid=_rg_lru_state(width, kernel, n_recurrent),
        attention_groups=(
            [
                AttentionGroup(
                    layers=n_attention, query_width=h * hd, kv_heads=kv, head_dim=hd, window=window
                )
            ]
            if n_attention
            else []
        ),
    )


# --- IBM Bamba ---------------------------------------------------------------------------------


def bamba_blueprint(c: Config, family: str) -> b.Blueprint:
    """Bamba-9B (v1, v2) (BambaDecoderLayer): RMSNorm, a Mamba-2 mixer (BambaMixer: inner =
    mamba_expand x hidden, mamba_n_heads heads of mamba_d_head ("auto": inner / heads), in/out
    projections with mamba_proj_bias, a conv bias with mamba_conv_bias, a gated RMSNorm) or
    q/k/v/o attention (attention_bias; head_dim from the config, else hidden / heads) on the
    layers attn_layer_indices names (indices past the last layer are ignored, as transformers
    does), RMSNorm, a SwiGLU MLP (mlp_bias). The head is untied by default; mamba_dt_rank and
    attn_rotary_emb in the released configs build nothing."""
    d, layers = c.int("hidden_size", default=4096), c.int("num_hidden_layers", default=32)
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    indices = set(c.int_list("attn_layer_indices"))
    n_attention = sum(1 for i in range(layers) if i in indices)
    n_mamba = layers - n_attention
    vocab = c.int("vocab_size", default=128000)
    tied = c.bool("tie_word_embeddings", default=False)
    bias = c.bool("attention_bias", default=False)
    inter = c.int("intermediate_size", default=14336)
    notes: list[str] = []
    mamba = None
    if n_mamba:
        mamba = granite_mamba2(c, d)
        notes += [state_note("Mamba-2", n_mamba, layers, mamba.state_mib()), TRAINING_KERNELS]
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=True,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        attention=b.attention(d, h, kv, hd, qkv_bias=bias, out_bias=bias),
        mlp=b.gated_mlp(d, inter, bias=c.bool("mlp_bias", default=False)),
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,  # final_layernorm
        notes=notes,
        linear_attention=mamba.linears() if mamba else [],
        linear_attention_norms=mamba.other_params if mamba else 0,
        hybrid=mamba.linear_attention(n_mamba) if mamba else None,
    )


# --- Zyphra Zamba and Zamba2: refused ----------------------------------------------------------


def _hybrid_layers(c: Config, family: str) -> int | None:
    """How many layers run the shared block, where the config says."""
    raw = c.raw.get("layers_block_type")
    if isinstance(raw, list):
        return sum(1 for t in raw if t == "hybrid")
    if family == "zamba":
        layers = c.int("num_hidden_layers", default=76)
        period = c.int("attn_layer_period", default=6)
        offset = c.int("attn_layer_offset", default=4, minimum=0)
        return sum(1 for i in range(layers) if i % period == offset)
    return None


# Zamba (modeling_zamba.py) and Zamba2 (modeling_zamba2.py) run one shared attention + MLP
# block (Zamba2: num_mem_blocks of them, alternating) at every hybrid layer, each use with its
# own input projection (and in Zamba2 its own LoRA adapters on the shared q/k/v and MLP): the
# shared weights are stored and counted once, but compute and the KV cache are paid at every
# use. The engine derives compute from the parameter count (ModelShape.flop_params) and weight
# memory, quantised bytes and LoRA sizes from the same layers, so it cannot hold "counted once"
# and "run at N depths" together without a broader change: refused, as ALBERT is.
def zamba_refused(c: Config, family: str) -> b.Blueprint:
    name = {"zamba": "Zamba", "zamba2": "Zamba2"}[family]
    shared = c.int("num_mem_blocks", default=1) if family == "zamba2" else 1
    uses = _hybrid_layers(c, family)
    where = f"at {uses} depths" if uses else "at several depths"
    raise ConfigError(
        f"The estimator cannot count {name} (model_type '{family}') yet: it runs {shared} "
        f"shared attention block{'s' if shared > 1 else ''} of weights {where}, with "
        "per-use projections, and the estimator derives compute and weight memory from one "
        "parameter count, so it would get either the time and KV cache (the shared block "
        "counted once) or the memory (its weights counted at every use) wrong. A typed "
        "parameter count would understate its compute the same way.",
        field="model_type",
    )


# Families registered only to be refused with their own reason (never listed as counted).
RECURRENT_REFUSED = frozenset({"zamba", "zamba2"})
