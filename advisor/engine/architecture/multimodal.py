"""Vision-language models whose vision tower the engine counts exactly: Gemma 3 (SigLIP), Llama 4,
Mistral 3 (Pixtral) and GLM-4V; Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5 (their own vision
transformers, `qwen_vl_blueprint`) and Qwen2-Audio are in qwen_multimodal.py.

Gemma3ForConditionalGeneration (transformers modeling_gemma3.py) is the gemma3_text decoder, a
SigLIP vision encoder without its attention-pooling head (vision_use_head false) and a projector
(an RMS-normalised vision_hidden x text_hidden matrix). The vision tokens are counted as
parameters, not as sequence length: an image adds mm_tokens_per_image tokens to the prompt.
The tower's weights are in `outside`, so its compute is approximated as those parameters
applied once per token of the sequence (ModelShape.flop_params), not per image patch.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import Decoder, Dims, Moe
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.errors import ConfigError

# SigLIP-So400m at 896 px, the vision tower every Gemma 3 4B/12B/27B config names (the defaults
# of transformers' Gemma3Config: SiglipVisionConfig(hidden_size=1152, intermediate_size=4304,
# num_hidden_layers=27, num_attention_heads=16, image_size=896, patch_size=14)).
_SIGLIP_DEFAULTS = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "image_size": 896,
    "patch_size": 14,
    "num_channels": 3,
}


def siglip_vision_params(raw: dict) -> int:
    """SiglipVisionTransformer without its head: patch conv, positions, blocks, final LN."""
    v = Config({**_SIGLIP_DEFAULTS, **raw})
    d = v.int("hidden_size")
    layers = v.int("num_hidden_layers")
    h, _, hd = heads(v, d, ("num_attention_heads",))
    inter = v.int("intermediate_size")
    patch = v.int("patch_size")
    channels = v.int("num_channels")
    patches = (v.int("image_size") // patch) ** 2
    block = b.total(
        [
            *b.attention(d, h, h, hd, qkv_bias=True, out_bias=True),
            *b.mlp(d, inter, bias=True),
        ]
    )
    embeddings = channels * patch * patch * d + d + patches * d
    return embeddings + layers * (block + 2 * b.ln(d)) + b.ln(d)


def gemma3_blueprint(c: Config, family: str) -> b.Blueprint:
    text = c.raw.get("text_config")
    vision = c.raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ConfigError(
            "config.json of a Gemma 3 vision-language model needs text_config and "
            "vision_config objects",
            field="text_config",
        )
    bp = decoder_blueprint(Config(text), "gemma3", DECODERS["gemma3_text"])
    vision_d = Config({**_SIGLIP_DEFAULTS, **vision}).int("hidden_size")
    tower = siglip_vision_params(vision)
    projector = vision_d * bp.d + vision_d  # mm_input_projection_weight + mm_soft_emb_norm
    return replace(
        bp,
        family="gemma3",
        outside=bp.outside + tower + projector,
        input_towers=bp.input_towers + tower + projector,
        notes=[
            *bp.notes,
            f"Includes the SigLIP vision tower ({tower:,} parameters) and its projector "
            f"({projector:,}).",
        ],
    )


# Llama 4's vision encoder (transformers modeling_llama4.py, Llama4VisionModel): patches
# unfolded and projected without bias, a class token and a learned position table, LayerNorms
# before and after `num_hidden_layers` blocks (q/k/v/o and a GELU MLP, all with bias, two
# LayerNorms), a pixel-shuffle MLP without bias (intermediate_size -> projector_input_dim ->
# projector_output_dim), then the multi-modal projector to the language model's width.
# Defaults: Llama 4 Scout's and Maverick's config.
_LLAMA4_VISION_DEFAULTS = {
    "hidden_size": 1408,
    "num_hidden_layers": 34,
    "num_attention_heads": 16,
    "intermediate_size": 5632,
    "image_size": 336,
    "patch_size": 14,
    "num_channels": 3,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
    "vision_output_dim": 4096,
}


def llama4_vision_params(raw: dict, text_width: int) -> int:
    v = Config({**_LLAMA4_VISION_DEFAULTS, **raw})
    d = v.int("hidden_size")
    inter = v.int("intermediate_size")
    v.int("num_attention_heads")  # validated like any other field
    patch = v.int("patch_size")
    positions = (v.int("image_size") // patch) ** 2 + 1
    embedding = v.int("num_channels") * patch * patch * d + d + positions * d + 2 * b.ln(d)
    attention = b.attention(d, 1, 1, d, qkv_bias=True, out_bias=True)  # q/k/v/o, d x d each
    block = b.total([*attention, *b.mlp(d, inter, bias=True)]) + 2 * b.ln(d)
    adapter = inter * v.int("projector_input_dim") + v.int("projector_output_dim") ** 2
    projector = v.int("vision_output_dim") * text_width
    return embedding + v.int("num_hidden_layers") * block + adapter + projector


def llama4_blueprint(c: Config, family: str) -> b.Blueprint:
    """Llama4ForConditionalGeneration: the llama4_text decoder (text_config) and the vision
    encoder with its projector."""
    text = c.raw.get("text_config")
    vision = c.raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ConfigError(
            "config.json of a Llama 4 model needs text_config and vision_config objects",
            field="text_config",
        )
    outer = {k: v for k, v in c.raw.items() if k not in ("vision_config", "text_config")}
    bp = decoder_blueprint(Config({**outer, **text}), "llama4_text", DECODERS["llama4_text"])
    tower = llama4_vision_params(vision, bp.d)
    return replace(
        bp,
        family="llama4",
        outside=bp.outside + tower,
        input_towers=bp.input_towers + tower,
        notes=[
            *bp.notes,
            f"Includes the vision encoder and its projector ({tower:,} parameters).",
        ],
    )


# Mistral Small 3.1 / 3.2 and Magistral Small 1.2 (transformers modeling_mistral3.py and
# modeling_pixtral.py): a Pixtral vision encoder (a patch Conv2d without bias, an RMSNorm
# ln_pre, num_hidden_layers blocks of q/k/v/o (hidden x hidden each, no bias, 2-D rotary
# positions: no table) and a gated MLP without bias, two RMSNorms a block, no final norm), then
# the multi-modal projector: an RMSNorm over the vision width, a patch merger (one Linear from
# spatial_merge_size^2 x vision width to the vision width, no bias) and two Linears (vision
# width x number of feature layers -> text width -> text width, biased where
# multimodal_projector_bias). Defaults: transformers' PixtralVisionConfig.
_PIXTRAL_DEFAULTS = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_channels": 3,
    "patch_size": 16,
}
# The language models a Mistral3ForConditionalGeneration wraps that the engine counts: Mistral
# Small 3.1 / 3.2's (mistral) and Ministral 3's (ministral3: Mistral's layers, head_dim 128 by
# default).
_MISTRAL3_TEXT = {"mistral": "mistral", "ministral3": "ministral3"}


def pixtral_vision_params(raw: dict) -> tuple[int, int]:
    """(parameters of the Pixtral encoder, its width)."""
    v = Config({**_PIXTRAL_DEFAULTS, **raw})
    d = v.int("hidden_size")
    inter = v.int("intermediate_size")
    v.int("num_attention_heads")  # validated; q/k/v/o are hidden x hidden whatever the heads
    patch = v.int("patch_size")
    block = 4 * d * d + 3 * d * inter + 2 * d
    return v.int("num_channels") * patch * patch * d + d + v.int("num_hidden_layers") * block, d


def mistral3_blueprint(c: Config, family: str) -> b.Blueprint:
    """Mistral3ForConditionalGeneration: the text_config's decoder, the Pixtral encoder and the
    projector. The LM head is untied unless config.json says otherwise: transformers 5's
    Mistral3Config defaults tie_word_embeddings to true, so a model built from a config.json
    that omits it (Mistral Small 3.1's) ties it, but from_pretrained unties it again because the
    checkpoint stores lm_head.weight apart from the embedding (the Hub totals count both)."""
    text = c.raw.get("text_config")
    vision = c.raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ConfigError(
            "config.json of a Mistral 3 vision-language model needs text_config and "
            "vision_config objects",
            field="text_config",
        )
    text_type = text.get("model_type", "mistral")
    if text_type not in _MISTRAL3_TEXT:
        raise ConfigError(
            f"The estimator cannot count a Mistral 3 model whose language model is "
            f"'{text_type}': it counts only {', '.join(sorted(_MISTRAL3_TEXT))}. Enter the "
            "parameter count from the model card instead.",
            field="text_config",
        )
    t = Config(text)
    tied = c.bool("tie_word_embeddings", default=t.bool("tie_word_embeddings", default=False))
    decoder = _MISTRAL3_TEXT[text_type]
    bp = decoder_blueprint(
        Config({**text, "tie_word_embeddings": tied}), decoder, DECODERS[decoder]
    )
    tower, vision_d = pixtral_vision_params(vision)
    merge = c.int("spatial_merge_size", default=2)
    layers = c.raw.get("vision_feature_layer", -1)
    feature_layers = len(layers) if isinstance(layers, list) and layers else 1
    bias = c.bool("multimodal_projector_bias", default=False)
    text_d = bp.d
    projector = (
        vision_d
        + merge * merge * vision_d * vision_d
        + vision_d * feature_layers * text_d
        + text_d * text_d
        + (2 * text_d if bias else 0)
    )
    patch = Config({**_PIXTRAL_DEFAULTS, **vision}).int("patch_size")
    return replace(
        bp,
        family="mistral3",
        outside=bp.outside + tower + projector,
        input_towers=bp.input_towers + tower + projector,
        notes=[
            *bp.notes,
            f"Includes the Pixtral vision encoder ({tower:,} parameters) and its projector "
            f"({projector:,}); an image adds about (height / {patch * merge}) x "
            f"(width / {patch * merge}) tokens to the sequence, which the sequence length "
            "should include.",
        ],
    )


# GLM-4.1V-Thinking, GLM-4.5V and GLM-4.6V (transformers modeling_glm4v.py, modeling_glm4v_moe.py,
# modeling_glm46v.py). The vision transformer: a learned position table ((image_size /
# patch_size)^2 x width, interpolated to the image's grid), a Conv3d patch embedding with bias,
# `depth` blocks of two RMSNorms, a fused qkv (bias where attention_bias) and an output
# projection without bias, and a SwiGLU MLP without bias whose inner width is out_hidden_size;
# then an RMSNorm, a spatial_merge_size x spatial_merge_size Conv2d with bias from the width to
# out_hidden_size (the downsample), and the merger: a square projection, a LayerNorm and a SwiGLU
# MLP of intermediate_size (none with bias). post_conv_layernorm is built but holds only an
# RMSNorm weight. Defaults: transformers' Glm4vVisionConfig.
_GLM4V_VISION_DEFAULTS = {
    "depth": 24,
    "hidden_size": 1536,
    "num_heads": 12,
    "in_channels": 3,
    "image_size": 336,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 4096,
    "intermediate_size": 13696,
}


def glm4v_vision_params(raw: dict) -> tuple[int, int, int]:
    """(parameters of the GLM-4V vision tower with its downsample and merger, their output width,
    pixels per side of one language-model token)."""
    v = Config({**_GLM4V_VISION_DEFAULTS, **raw})
    d = v.int("hidden_size")
    out = v.int("out_hidden_size")
    inter = v.int("intermediate_size")
    v.int("num_heads")  # validated; the projections do not depend on it
    patch = v.int("patch_size")
    merge = v.int("spatial_merge_size")
    bias = v.bool("attention_bias", default=False)
    block = 2 * d + b.total(
        [
            b.lin("qkv", d, 3 * d, bias, "attn_qkv"),
            b.lin("proj", d, d, False, "attn_out"),
            *b.gated_mlp(d, out),
        ]
    )
    positions = (v.int("image_size") // patch) ** 2 * d
    embedding = v.int("in_channels") * v.int("temporal_patch_size") * patch * patch * d + d
    downsample = 2 * d + d * out * merge * merge + out  # post_conv / post_layernorm, Conv2d
    merger = out * out + b.ln(out) + 3 * out * inter
    params = positions + embedding + v.int("depth") * block + downsample + merger
    return params, out, patch * merge


def _head_from_width(c: Config, x: Dims) -> Dims:
    """GLM-4.1V's language model (Glm4vTextAttention): head_dim is hidden_size // heads whatever
    config.json says."""
    return replace(x, hd=x.d // x.h)


def _glm4v_moe_buffers(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """GLM-4.5V's router keeps e_score_correction_bias as a buffer the checkpoint stores."""
    moe = bp.experts
    assert moe is not None
    return replace(
        bp,
        stored_extras={
            "the routers' score-correction biases (buffers)": moe.sparse_layers * moe.experts
        },
    )


# The language models: GLM-4.1V's (Glm4vTextModel: GLM-4-0414's layers, q/k/v biases always,
# o_proj without, a fused gate_up_proj, four RMSNorms a block) and GLM-4.5V's (Glm4vMoeTextModel:
# GLM-4.5-Air's layers without q/k norms, biases where attention_bias (default on), the first
# first_k_dense_replace (1) blocks dense, the others n_routed_experts experts as 3-D parameters
# beside n_shared_experts shared experts, a router weight kept as a parameter).
_GLM4V_TEXT = {
    "glm4v": Decoder(
        qkv_bias=True,
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
        norms_per_block=4,
        shape=_head_from_width,
    ),
    "glm4v_moe": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=False,
        moe=Moe(
            experts="n_routed_experts",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            shared="deepseek",
            layers="first_k",
            dense_default=1,
            modules=False,
        ),
        adjust=_glm4v_moe_buffers,
    ),
}
_GLM4V_TEXT["glm46v"] = _GLM4V_TEXT["glm4v"]  # GLM-4.6V-Flash: glm4v_text and glm4v_vision


def glm4v_blueprint(c: Config, family: str) -> b.Blueprint:
    """Glm4vForConditionalGeneration, Glm4vMoeForConditionalGeneration and
    Glm46VForConditionalGeneration: the text_config's language model, the vision tower and its
    merger; the LM head untied unless config.json ties it (transformers 5 reads
    tie_word_embeddings at the top level, or where older saves put it, in text_config)."""
    text = c.raw.get("text_config")
    vision = c.raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ConfigError(
            f"config.json of a {family} vision-language model needs text_config and "
            "vision_config objects",
            field="text_config",
        )
    t = Config(text)
    tied = c.bool("tie_word_embeddings", default=False) or t.bool(
        "tie_word_embeddings", default=False
    )
    bp = decoder_blueprint(
        Config({**text, "tie_word_embeddings": tied}), family, _GLM4V_TEXT[family]
    )
    tower, out, side = glm4v_vision_params(vision)
    if out != bp.d:
        raise ConfigError(
            f"config.json vision_config.out_hidden_size ({out}) must equal the language model's "
            f"hidden_size ({bp.d}): the merger feeds its tokens to the language model",
            field="vision_config",
        )
    return replace(
        bp,
        outside=bp.outside + tower,
        input_towers=bp.input_towers + tower,
        notes=[
            *bp.notes,
            f"Includes the vision transformer and its merger ({tower:,} parameters); an image "
            f"adds about (height / {side}) x (width / {side}) tokens to the sequence, which the "
            "sequence length should include.",
        ],
    )
