"""Dense decoders in Llama's line: RMSNorm (or LayerNorm) blocks of q/k/v/o attention and a
gated MLP, varied by biases, q/k norms, head sizes, fused projections, parallel blocks and
sliding-window layers (Llama, Mistral, Granite, Qwen2/3, Gemma 1-3, OLMo 1-3, Phi 1-3,
Ministral 3, SmolLM3, Seed-OSS, EXAONE 4.0, Apertus, StarCoder2, Command R, StableLM, GLM-4,
Hunyuan dense).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.decoders import Decoder, Dims
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.errors import ConfigError

# --- Local (windowed) attention layers ----------------------------------------------------------


def _window_groups(bp: b.Blueprint, windows: list[int | None]) -> list[AttentionGroup]:
    """One AttentionGroup per distinct window (None: the whole context), so that the KV cache
    and the attention reads of windowed layers stop at their window (memory_terms.kv_cache_bytes,
    ModelShape.attention_reads)."""
    counts: dict[int | None, int] = {}
    for window in windows:
        counts[window] = counts.get(window, 0) + 1
    return [
        AttentionGroup(
            layers=n, query_width=bp.h * bp.hd, kv_heads=bp.kv, head_dim=bp.hd, window=window
        )
        for window, n in counts.items()
    ]


def _layer_types(c: Config, layers: int) -> list[str] | None:
    """config.json's `layer_types` (recent transformers), checked, or None when absent."""
    types = c.raw.get("layer_types")
    if not isinstance(types, list) or not types:
        return None
    if len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
        raise ConfigError(
            f"config.json field 'layer_types' must name {layers} layers, each "
            "'sliding_attention' or 'full_attention'",
            field="layer_types",
        )
    return types


def _starcoder2(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """StarCoder2 (modeling_starcoder2.py): every layer attends within `sliding_window` tokens
    when the config sets one (create_sliding_window_causal_mask; transformers' DynamicCache
    then keeps a sliding-window layer per block), else the whole context."""
    window = c.opt_int("sliding_window")
    if window is None:
        return bp
    return replace(
        bp,
        attention_groups=_window_groups(bp, [window] * bp.layers),
        notes=[*bp.notes, f"Every layer attends within a {window:,}-token sliding window."],
    )


def _cohere2(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Command R7B / Command A (configuration_cohere2.py): `layer_types`, else every
    sliding_window_pattern-th layer (4) attends to the whole context and the others within
    `sliding_window` tokens (a sliding-window cache layer each); a null window: all global."""
    types = _layer_types(c, bp.layers)
    if types is None:
        pattern = c.int("sliding_window_pattern", default=4)
        types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(bp.layers)
        ]
    window = c.opt_int("sliding_window") if "sliding_window" in c.raw else 4096
    if window is None:
        return bp
    local = types.count("sliding_attention")
    return replace(
        bp,
        attention_groups=_window_groups(
            bp, [window if t == "sliding_attention" else None for t in types]
        ),
        notes=[
            *bp.notes,
            f"{local} of {bp.layers} layers attend within a {window:,}-token window.",
        ],
    )


# --- Norms, activations and head sizes the config decides ---------------------------------------


def _cohere_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Command R / Aya (modeling_cohere.py): where use_qk_norm (Command R+), a bias-free
    LayerNorm weight over (heads, head_dim) on q and over (kv heads, head_dim) on k."""
    if not c.bool("use_qk_norm", default=False):
        return bp
    return replace(bp, block_norms=bp.block_norms + (bp.h + bp.kv) * bp.hd)


def _stablelm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """StableLM (modeling_stablelm.py): input_layernorm, and post_attention_layernorm only
    without use_parallel_residual (LayerNorms with bias); where qk_layernorm, one bias-free
    LayerNorm(head_dim) per query head and per key head. Partial rotary has no parameters."""
    norms = (1 if c.bool("use_parallel_residual", default=False) else 2) * b.ln(bp.d)
    if c.bool("qk_layernorm", default=False):
        norms += (bp.h + bp.kv) * bp.hd
    return replace(bp, block_norms=norms)


def _xielu(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Apertus (modeling_apertus.py): its MLP's xIELU activation (hidden_act "xielu", the
    default) learns two scalars per block (alpha_p, alpha_n) and keeps two scalar buffers
    (beta, eps) that the checkpoint stores."""
    if c.str("hidden_act", "xielu") != "xielu":
        return bp
    return replace(
        bp,
        block_norms=bp.block_norms + 2,
        stored_extras={"the xIELU activations' beta and eps (buffers)": 2 * bp.layers},
    )


def _ministral3_heads(c: Config, x: Dims) -> Dims:
    """Ministral 3 (Ministral3Config): head_dim is 128 when config.json omits it, not
    hidden_size // heads."""
    return replace(x, hd=c.int("head_dim", default=128))


def _glm_heads(c: Config, x: Dims) -> Dims:
    """GLM-4 (GlmConfig, Glm4Config): head_dim defaults to 128, not hidden_size // heads."""
    return replace(x, hd=c.int("head_dim", default=128))


def _hunyuan_dense_heads(c: Config, x: Dims) -> Dims:
    """Hunyuan dense (modeling_hunyuan_v1_dense.py) sizes its heads by config.head_dim alone:
    HunYuanDenseV1Config keeps head_dim None when config.json omits it and the attention then
    fails to build (None ** -0.5), so a config without it is refused rather than guessed. The
    released configs all give it (128), beside an `attention_head_dim` transformers ignores."""
    if c.raw.get("head_dim") is None:
        raise ConfigError(
            "config.json of a Hunyuan dense model needs 'head_dim': transformers builds its "
            "attention from that field alone and fails without it",
            field="head_dim",
        )
    return replace(x, hd=c.int("head_dim"))


def _hunyuan_dense(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Hunyuan dense: transformers always builds the RMSNorm(head_dim) on q and on k (the row's
    qk_norm), whatever use_qk_norm says, and ignores use_cla (cross-layer KV sharing in
    Tencent's own code): every layer keeps its own KV cache here, as transformers runs it."""
    if c.bool("use_cla", default=False):
        return replace(
            bp,
            notes=[
                *bp.notes,
                "use_cla (cross-layer KV sharing) is set, but transformers ignores it: every "
                "layer is counted with its own KV cache, as transformers runs the model.",
            ],
        )
    return bp


# --- The rows ------------------------------------------------------------------------------------

_LLAMA = Decoder()

DECODERS: dict[str, Decoder] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    # IBM Granite 3.x: Llama's layers; its embedding, residual and logit multipliers are
    # scalars in the config, not parameters (modeling_granite.py).
    "granite": _LLAMA,
    # Qwen2's q/k/v projections always have biases (modeling_qwen2.py: bias=True).
    "qwen2": Decoder(qkv_bias=True),
    "qwen3": Decoder(qk_norm="head"),
    "gemma": Decoder(tied=("tie_word_embeddings", True)),
    # Gemma 2 and 3 add post-attention and post-feedforward norms: four per block.
    "gemma2": Decoder(tied=("tie_word_embeddings", True), norms_per_block=4),
    "gemma3_text": Decoder(tied=("tie_word_embeddings", True), norms_per_block=4, qk_norm="head"),
    # OLMo (v1) uses LayerNorm without learnable parameters (modeling_olmo.py OlmoLayerNorm).
    "olmo": Decoder(norm="none"),
    # OLMo 2: post-attention and post-feedforward RMSNorms, q/k norms over all heads.
    "olmo2": Decoder(qk_norm="full"),
    "phi3": Decoder(
        attention="fused",
        attn_names=("qkv_proj", "o_proj"),
        qkv_bias=False,
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
    ),
    # Phi-1/1.5/2: attention and MLP in parallel after one LayerNorm, biases everywhere.
    "phi": Decoder(
        attn_names=("q_proj", "k_proj", "v_proj", "dense"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("fc1", "fc2"),
        mlp_bias=True,
        norm="ln",
        norms_per_block=1,
        qk_norm="ln_head",
        lm_head_bias=True,
    ),
    # Ministral 3 (3B, 8B, 14B; modeling_ministral3.py) and Devstral 2: Mistral's layers (q/k/v/o
    # and a gated MLP without biases, two RMSNorms a block) with head_dim 128 by default and
    # Llama 4's position-dependent query scaling (no parameters); every layer attends within
    # `sliding_window` tokens where the config sets one (the releases: null). Head untied by
    # default (the 3B ties it).
    "ministral3": Decoder(shape=_ministral3_heads, adjust=_starcoder2),
    # SmolLM3 (modeling_smollm3.py): Llama's layers; every no_rope_layer_interval-th layer skips
    # the rotary embedding (no parameters change); the head is tied by default.
    "smollm3": Decoder(tied=("tie_word_embeddings", True)),
    # OLMo 3 (modeling_olmo3.py): OLMo 2's layers (post-attention and post-feedforward norms,
    # q/k norms over all heads); three of four layers attend in a 4,096-token window (no
    # parameters change; layer_types names them).
    "olmo3": Decoder(qk_norm="full"),
    # Seed-OSS (modeling_seed_oss.py): Llama's layers with q/k/v biases (attention_bias, on by
    # default) and an output-projection bias only where attention_out_bias.
    "seed_oss": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=("attention_out_bias", False),
    ),
    # EXAONE 4.0 (modeling_exaone4.py): Llama's projections without biases, RMSNorm(head_dim)
    # on q and k, norms after attention and after the MLP (two a block, none before); three
    # of four layers attend in a sliding window (layer_types; no parameters change).
    "exaone4": Decoder(qk_norm="head"),
    # Apertus (modeling_apertus.py): q/k/v/o with attention_bias, RMSNorm(head_dim) on q and k,
    # a non-gated MLP (up_proj, xIELU, down_proj) without biases.
    "apertus": Decoder(
        mlp="plain",
        mlp_names=("up_proj", "down_proj"),
        mlp_bias=False,
        qk_norm="head",
        adjust=_xielu,
    ),
    # StarCoder2 (modeling_starcoder2.py): q/k/v/o and a non-gated MLP (c_fc, c_proj) with
    # biases where use_bias (the default), LayerNorms with bias, grouped-query attention, every
    # layer within `sliding_window` tokens; head tied by default.
    "starcoder2": Decoder(
        qkv_bias=("use_bias", True),
        out_bias=("use_bias", True),
        mlp="plain",
        mlp_names=("c_fc", "c_proj"),
        mlp_bias=("use_bias", True),
        norm="ln",
        tied=("tie_word_embeddings", True),
        adjust=_starcoder2,
    ),
    # Command R / Aya 23 / Aya Expanse (modeling_cohere.py): attention and gated MLP run in
    # parallel after one bias-free LayerNorm (CohereLayerNorm: a weight only), biases where
    # attention_bias, optional q/k norms; logit_scale is a scalar; head tied by default.
    "cohere": Decoder(
        qkv_bias=("attention_bias", False),
        out_bias=("attention_bias", False),
        norm="ln",
        norm_bias=False,
        norms_per_block=1,
        tied=("tie_word_embeddings", True),
        adjust=_cohere_qk_norm,
    ),
    # StableLM 2 / 3B-4E1T (modeling_stablelm.py): q/k/v biases where use_qkv_bias, o_proj
    # without, a gated MLP, LayerNorms with bias, the norms `_stablelm` says; head untied.
    "stablelm": Decoder(
        qkv_bias=("use_qkv_bias", False),
        out_bias=False,
        norm="ln",
        adjust=_stablelm,
    ),
    # GLM-4-0414 (modeling_glm4.py): q/k/v biases where attention_bias (default on), o_proj
    # without, a fused gate_up_proj, four RMSNorms a block (before and after attention and the
    # MLP), partial rotary (no parameters), head_dim 128 by default; head untied.
    "glm4": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
        norms_per_block=4,
        shape=_glm_heads,
    ),
    # GLM-4 (glm-4-9b-chat-hf; modeling_glm.py): GLM-4-0414's layers with two norms a block.
    "glm": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
        shape=_glm_heads,
    ),
    # Hunyuan 0.5B-7B dense (modeling_hunyuan_v1_dense.py): Llama's layers (q/k/v/o with
    # attention_bias, a gated MLP never with bias) plus RMSNorm(head_dim) on q and k
    # (query_layernorm, key_layernorm); head_dim from the config only; head untied by default
    # (the releases tie it).
    "hunyuan_v1_dense": Decoder(
        qk_norm="head",
        mlp_bias=False,
        shape=_hunyuan_dense_heads,
        adjust=_hunyuan_dense,
    ),
}
# Command R7B / Command A (modeling_cohere2.py): Cohere's parallel block without q/k norms,
# three sliding-window layers to one global.
DECODERS["cohere2"] = replace(DECODERS["cohere"], adjust=_cohere2)
