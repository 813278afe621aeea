"""Qwen's vision-language and audio-language models: Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5
(their own vision transformers, `qwen_vl_blueprint`) and Qwen2-Audio (Whisper's encoder,
`qwen2_audio_blueprint`).

Each tower and its merger or projector sits in `outside`, as multimodal.py counts Gemma 3's;
omni.py and qwen3_omni.py reuse these towers for Qwen2.5-Omni and Qwen3-Omni.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.errors import ConfigError

# Qwen2-VL's and Qwen2.5-VL's vision transformer (transformers modeling_qwen2_vl.py and
# modeling_qwen2_5_vl.py): a Conv3d patch embedding without bias over temporal_patch_size x
# patch_size^2 pixels, `depth` blocks with a fused qkv and an output projection (both with
# bias) and rotary positions (no table), then a merger that concatenates spatial_merge_size^2
# patches and projects them to the language model's width through a two-layer MLP. Qwen2-VL's
# blocks use LayerNorm and a plain GELU MLP of mlp_ratio x embed_dim; Qwen2.5-VL's use RMSNorm
# and a SwiGLU MLP of intermediate_size, all with bias. Defaults: the 7B models' configs.
_QWEN_VISION_DEFAULTS = {
    "qwen2_vl": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16},
    "qwen2_5_vl": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16},
}
_QWEN_VISION_SHARED = {
    "patch_size": 14,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "in_channels": 3,
}


def qwen_vision_params(raw: dict, family: str, text_width: int) -> tuple[int, int]:
    """(parameters of the vision tower and merger, pixels per side of one language-model
    token) of a Qwen2-VL or Qwen2.5-VL model."""
    v = Config({**_QWEN_VISION_SHARED, **_QWEN_VISION_DEFAULTS[family], **raw})
    if family == "qwen2_vl":
        d = v.int("embed_dim")
        inter = d * v.int("mlp_ratio")
        mlp = b.mlp(d, inter, bias=True)
        norms = 2 * b.ln(d)
        merger_norm = b.ln(d)
        out = v.int("hidden_size", default=text_width)  # Qwen2VLVisionConfig: the LLM's width
    else:
        d = v.int("hidden_size")
        inter = v.int("intermediate_size")
        mlp = b.gated_mlp(d, inter, bias=True)
        norms = 2 * d  # RMSNorm: weight only
        merger_norm = d
        out = v.int("out_hidden_size", default=text_width)
    v.int("num_heads")  # validated like any other field; the projections do not depend on it
    attention = [
        b.lin("qkv", d, 3 * d, True, "attn_qkv"),
        b.lin("proj", d, d, True, "attn_out"),
    ]
    block = b.total([*attention, *mlp]) + norms
    patch = v.int("patch_size")
    channels = v.int("in_channels", "in_chans")
    embedding = channels * v.int("temporal_patch_size") * patch * patch * d
    merge = v.int("spatial_merge_size")
    merged = d * merge**2
    merger = merger_norm + merged * merged + merged + merged * out + out
    return embedding + v.int("depth") * block + merger, patch * merge


def qwen_vl_blueprint(c: Config, family: str) -> b.Blueprint:
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5 (dense or MoE): their language model (its
    fields at the top level of the Hub's config.json, or in text_config where newer
    transformers, Qwen3-VL and Qwen3.5 save them) and their vision tower."""
    vision = c.raw.get("vision_config") or {}
    text = c.raw.get("text_config")
    if not isinstance(vision, dict) or not isinstance(text, dict | None):
        raise ConfigError(
            f"config.json of a {family} vision-language model needs vision_config (and, where "
            "given, text_config) objects",
            field="vision_config",
        )
    decoder = _QWEN_VL_DECODERS[family]
    outer = {k: v for k, v in c.raw.items() if k not in ("vision_config", "text_config")}
    bp = decoder_blueprint(Config({**outer, **(text or {})}), decoder, DECODERS[decoder])
    if family.startswith("qwen3"):
        tower, side = qwen3_vision_params(vision, bp.d)
    else:
        tower, side = qwen_vision_params(vision, family, bp.d)
    return replace(
        bp,
        family=family,
        outside=bp.outside + tower,
        input_towers=bp.input_towers + tower,
        notes=[
            *bp.notes,
            f"Includes the vision transformer and its mergers ({tower:,} parameters); an "
            f"image adds about (height / {side}) x (width / {side}) tokens to the sequence, "
            "which the sequence length should include.",
        ],
    )


# The language model inside each: Qwen2's (q/k/v biases) or Qwen3's (q/k norms; the MoE's
# experts as parameter tensors).
_QWEN_VL_DECODERS = {
    "qwen2_vl": "qwen2",
    "qwen2_5_vl": "qwen2",
    "qwen3_vl": "qwen3",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    # Qwen3.5 (modeling_qwen3_5.py): Qwen3-VL's vision tower without deepstack mergers, the
    # gated DeltaNet hybrid as language model.
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
}


# Qwen3-VL's vision transformer (transformers modeling_qwen3_vl.py): a Conv3d patch embedding
# with bias, a learned position table (num_position_embeddings x width, interpolated to the
# image's grid), `depth` blocks with LayerNorm, a fused qkv and output projection and a plain
# MLP (all with bias), the merger of Qwen2-VL's form (LayerNorm before the 2 x 2 patches are
# concatenated), and one more merger per deepstack layer (deepstack_visual_indexes), whose
# LayerNorm comes after the concatenation: their outputs are added to the language model's
# first layers. Defaults: Qwen3-VL-8B's config.
_QWEN3_VISION_DEFAULTS = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_heads": 16,
    "patch_size": 16,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "in_channels": 3,
    "num_position_embeddings": 2304,
}


def qwen3_vision_params(raw: dict, text_width: int) -> tuple[int, int]:
    """(parameters of the vision tower, its merger and its deepstack mergers, pixels per side
    of one language-model token) of a Qwen3-VL model."""
    v = Config({**_QWEN3_VISION_DEFAULTS, **raw})
    d = v.int("hidden_size")
    inter = v.int("intermediate_size")
    v.int("num_heads")  # validated like any other field; the projections do not depend on it
    block = b.total(
        [
            b.lin("qkv", d, 3 * d, True, "attn_qkv"),
            b.lin("proj", d, d, True, "attn_out"),
            *b.mlp(d, inter, names=("linear_fc1", "linear_fc2"), bias=True),
        ]
    ) + 2 * b.ln(d)
    patch = v.int("patch_size")
    embedding = v.int("in_channels") * v.int("temporal_patch_size") * patch * patch * d + d
    positions = v.int("num_position_embeddings") * d
    out = v.int("out_hidden_size", default=text_width)
    merge = v.int("spatial_merge_size")
    merged = d * merge**2
    projection = merged * merged + merged + merged * out + out
    merger = b.ln(d) + projection
    deepstack = len(v.int_list("deepstack_visual_indexes")) * (b.ln(merged) + projection)
    params = embedding + positions + v.int("depth") * block + merger + deepstack
    return params, patch * merge


# Qwen2-Audio (transformers modeling_qwen2_audio.py): Whisper's encoder (Qwen2AudioEncoder: two
# Conv1d over num_mel_bins mel channels, max_source_positions fixed positions kept as an
# nn.Embedding parameter, encoder_layers blocks of q/k/v/out (k without bias) and fc1/fc2 with
# biases and two LayerNorms, a final LayerNorm, then a 2x average pool), a biased Linear from
# d_model to the language model's width, and Qwen2 (text_config) with its LM head. Defaults:
# transformers' Qwen2AudioEncoderConfig.
_QWEN2_AUDIO_DEFAULTS = {
    "num_mel_bins": 128,
    "encoder_layers": 32,
    "encoder_attention_heads": 20,
    "encoder_ffn_dim": 5120,
    "d_model": 1280,
    "max_source_positions": 1500,
}


def qwen2_audio_encoder_params(raw: dict) -> tuple[int, int, int]:
    """(parameters of the Whisper-style audio encoder, its width, its output tokens per 30 s)."""
    a = Config({**_QWEN2_AUDIO_DEFAULTS, **raw})
    d = a.int("d_model")
    heads(a, d, ("encoder_attention_heads",))  # validated; the projections are d x d
    inter = a.int("encoder_ffn_dim")
    positions = a.int("max_source_positions")
    block = 4 * d * d + 3 * d + 2 * d * inter + inter + d + 2 * b.ln(d)
    convs = a.int("num_mel_bins") * d * 3 + d + d * d * 3 + d
    params = convs + positions * d + a.int("encoder_layers") * block + b.ln(d)
    return params, d, positions // 2


def qwen2_audio_blueprint(c: Config, family: str) -> b.Blueprint:
    """Qwen2AudioForConditionalGeneration: the Qwen2 language model, the audio encoder and its
    projector; the audio's tokens join the text's in the language model's sequence."""
    text = c.raw.get("text_config")
    audio = c.raw.get("audio_config") or {}
    if not isinstance(text, dict) or not isinstance(audio, dict):
        raise ConfigError(
            "config.json of a Qwen2-Audio model needs text_config and audio_config objects",
            field="text_config",
        )
    text_type = text.get("model_type", "qwen2")
    if text_type != "qwen2":
        raise ConfigError(
            f"The estimator cannot count a Qwen2-Audio model whose language model is "
            f"'{text_type}': it counts only qwen2. Enter the parameter count from the model "
            "card instead.",
            field="text_config",
        )
    # Qwen2AudioForConditionalGeneration declares no tied weights: its lm_head is its own
    # whatever tie_word_embeddings says.
    bp = decoder_blueprint(
        Config({**text, "tie_word_embeddings": False}), "qwen2", DECODERS["qwen2"]
    )
    encoder, width, tokens = qwen2_audio_encoder_params(audio)
    projector = width * bp.d + bp.d
    return replace(
        bp,
        family=family,
        outside=bp.outside + encoder + projector,
        input_towers=bp.input_towers + encoder + projector,
        notes=[
            *bp.notes,
            f"Includes the Whisper-style audio encoder ({encoder:,} parameters) and its projector "
            f"({projector:,}); 30 s of audio adds {tokens:,} tokens to the sequence, which the "
            "sequence length should include.",
        ],
    )
