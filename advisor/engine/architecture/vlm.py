"""Vision-language models built as a vision tower, a projector and a decoder of families/:
LLaVA 1.5 (llava), LLaVA-NeXT (llava_next), LLaVA-OneVision (llava_onevision), PaliGemma
(paligemma), Idefics3 and SmolVLM (idefics3, smolvlm), InternVL 3 / 3.5 "-hf" (internvl) and
Idefics2 (idefics2); BLIP-2 (blip-2) and InstructBLIP (instructblip), whose Q-Former stands
between the tower and the language model, are in blip.py.

Each reader counts the language model with the text_config's row of DECODERS and adds the
vision tower and projector to `outside` (as multimodal.py does for Gemma 3). A text_config may
omit the fields its model class defaults (llava-1.5's names only its vocabulary); those
defaults are filled from transformers' configuration classes for the text models listed in
TEXT_DEFAULTS. The LM head is tied when the top-level tie_word_embeddings says so or, where
it does not, when the text model's own default ties it (transformers forwards the text
config's flag to the wrapper).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, check_int, heads
from advisor.engine.architecture.decoders import Decoder, flag
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.architecture.multimodal import siglip_vision_params
from advisor.engine.errors import ConfigError

# Fields transformers' LlamaConfig / MistralConfig default when a text_config omits them.
TEXT_DEFAULTS = {
    "llama": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "vocab_size": 32000,
    },
    "mistral": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
    },
    # OPTConfig's defaults (BLIP-2's text_config names no max_position_embeddings: 2048).
    "opt": {
        "vocab_size": 50272,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "ffn_dim": 3072,
        "num_attention_heads": 12,
        "max_position_embeddings": 2048,
    },
    # T5Config's defaults (t5-small's shape).
    "t5": {
        "vocab_size": 32128,
        "d_model": 512,
        "d_kv": 64,
        "d_ff": 2048,
        "num_layers": 6,
        "num_heads": 8,
    },
}

# CLIP ViT-L/14 at 336 px, the vision tower transformers' LlavaConfig defaults to.
_CLIP_DEFAULTS = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "image_size": 336,
    "patch_size": 14,
    "num_channels": 3,
}
# SigLIP-So400m at 384 px, LLaVA-OneVision's default tower (vision_use_head false).
_SIGLIP_384 = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 26,
    "num_attention_heads": 16,
    "image_size": 384,
    "patch_size": 14,
    "vision_use_head": False,
}
# PaliGemma's default tower: SigLIP-So400m at 224 px without its pooling head.
_SIGLIP_224 = {**_SIGLIP_384, "num_hidden_layers": 27, "image_size": 224}
# Idefics3 / SmolVLM vision transformer defaults (Idefics3VisionConfig, SmolVLMVisionConfig).
_IDEFICS3_VISION = {
    "hidden_size": 1152,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 32,
    "num_channels": 3,
}
_DEFAULT_TEXT = {
    "llava": "llama",
    "llava_next": "llama",
    "llava_onevision": "qwen2",
    "paligemma": "gemma",
    "idefics3": "llama",
    "smolvlm": "llama",
    "internvl": "qwen2",
    "idefics2": "mistral",
}


def _block(d: int, inter: int) -> int:
    """A pre-LN ViT block: q/k/v/o and a two-layer MLP, all with bias, two LayerNorms."""
    h = b.attention(d, 1, 1, d, qkv_bias=True, out_bias=True)
    return b.total([*h, *b.mlp(d, inter, bias=True)]) + 2 * b.ln(d)


def clip_vision_params(raw: dict) -> int:
    """CLIPVisionModel: class token, patch conv (no bias), positions (patches + 1), pre-LN,
    blocks, post-LN. Every layer is built even where the projector reads layer -2."""
    v = Config({**_CLIP_DEFAULTS, **raw})
    d = v.int("hidden_size")
    heads(v, d, ("num_attention_heads",))
    patch = v.int("patch_size")
    patches = (v.int("image_size") // patch) ** 2
    embeddings = d + v.int("num_channels") * patch * patch * d + (patches + 1) * d
    block = _block(d, v.int("intermediate_size"))
    return embeddings + 2 * b.ln(d) + v.int("num_hidden_layers") * block


def _siglip(raw: dict, defaults: dict) -> int:
    """SiglipVisionModel, with its attention-pooling head where vision_use_head is true."""
    merged = {**defaults, **raw}
    v = Config(merged)
    tower = siglip_vision_params(merged)
    if not v.bool("vision_use_head", default=True):
        return tower
    d = v.int("hidden_size")
    # probe, MultiheadAttention (in_proj 3d x d + bias, out_proj), LayerNorm, MLP
    head = d + 3 * d * d + 3 * d + d * d + d + b.ln(d)
    return tower + head + b.total(b.mlp(d, v.int("intermediate_size"), bias=True))


def idefics3_vision_params(raw: dict, defaults: dict = _IDEFICS3_VISION) -> int:
    """Idefics3VisionTransformer / SmolVLMVisionTransformer (and Idefics2VisionTransformer,
    whose defaults differ): patch conv with bias, a position table of (image_size /
    patch_size)^2, SigLIP blocks, post-LN; no head."""
    v = Config({**defaults, **raw})
    d = v.int("hidden_size")
    heads(v, d, ("num_attention_heads",))
    patch = v.int("patch_size")
    patches = (v.int("image_size") // patch) ** 2
    embeddings = v.int("num_channels") * patch * patch * d + d + patches * d
    block = _block(d, v.int("intermediate_size"))
    return embeddings + v.int("num_hidden_layers") * block + b.ln(d)


def text_model(text: dict, text_type: str, family: str) -> tuple[Decoder, Config]:
    """The language model's row of DECODERS and its text_config over the defaults of its
    configuration class (TEXT_DEFAULTS); a language model the engine does not count is refused."""
    if text_type not in DECODERS:
        raise ConfigError(
            f"The estimator cannot count a {family} model whose language model is "
            f"'{text_type}'. Enter the parameter count from the model card instead.",
            field="text_config",
        )
    return DECODERS[text_type], Config({**TEXT_DEFAULTS.get(text_type, {}), **text})


def _text(c: Config, family: str) -> tuple[b.Blueprint, str]:
    text = c.raw.get("text_config") or {}
    vision = c.raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise ConfigError(
            f"config.json of a {family} vision-language model needs text_config and "
            "vision_config objects",
            field="text_config",
        )
    text_type = text.get("model_type") or _DEFAULT_TEXT[family]
    spec, t = text_model(text, text_type, family)
    tied = c.bool("tie_word_embeddings", default=False) or flag(t, spec.tied)
    if family == "paligemma":
        tied = c.bool("tie_word_embeddings", default=True)
    if family == "idefics2":
        # Idefics2Config's own tie_word_embeddings (false by default) governs its lm_head; the
        # text_config's flag is not read.
        tied = c.bool("tie_word_embeddings", default=False)
    bp = decoder_blueprint(Config({**t.raw, "tie_word_embeddings": tied}), text_type, spec)
    return bp, text_type


def _with(bp: b.Blueprint, family: str, tower: int, projector: int, what: str, tokens: str):
    return replace(
        bp,
        family=family,
        outside=bp.outside + tower + projector,
        input_towers=bp.input_towers + tower + projector,
        notes=[
            *bp.notes,
            f"Includes the {what} ({tower:,} parameters) and its projector ({projector:,}); "
            f"{tokens}, which the sequence length should include.",
        ],
    )


def llava_blueprint(c: Config, family: str) -> b.Blueprint:
    """LlavaForConditionalGeneration, LlavaNextForConditionalGeneration and
    LlavaOnevisionForConditionalGeneration: vision tower, a two-layer MLP projector (vision
    width x number of feature layers -> text width -> text width, biased unless
    multimodal_projector_bias is false) and, for NeXT and OneVision, an image_newline vector."""
    bp, _ = _text(c, family)
    vision = c.raw.get("vision_config") or {}
    vision_type = vision.get("model_type") or (
        "siglip_vision_model" if family == "llava_onevision" else "clip_vision_model"
    )
    if vision_type == "clip_vision_model":
        tower = clip_vision_params(vision)
        v = Config({**_CLIP_DEFAULTS, **vision})
        what = "CLIP vision tower"
    elif vision_type == "siglip_vision_model":
        defaults = _SIGLIP_384 if family == "llava_onevision" else {}
        tower = _siglip(vision, defaults)
        v = Config({**_SIGLIP_384, **vision}) if defaults else Config(vision)
        what = "SigLIP vision tower"
    else:
        raise ConfigError(
            f"The estimator cannot count a {family} model whose vision tower is "
            f"'{vision_type}'. Enter the parameter count from the model card instead.",
            field="vision_config",
        )
    vision_d = v.int("hidden_size")
    layers = c.raw.get("vision_feature_layer", -2 if family != "llava_onevision" else -1)
    feature_layers = len(layers) if isinstance(layers, list) and layers else 1
    bias = c.bool("multimodal_projector_bias", default=True)
    text_d = bp.d
    projector = vision_d * feature_layers * text_d + text_d * text_d + (2 * text_d if bias else 0)
    side = v.int("image_size") // v.int("patch_size")
    if family == "llava":
        tokens = (
            f"an image adds {side * side} tokens ({side} x {side} patches of the resized image)"
        )
    else:
        projector += text_d  # image_newline
        tokens = (
            f"an image adds {side * side} tokens per {v.int('image_size')} px tile (anyres: "
            "the resized base image plus one tile per grid cell of the best-fitting "
            "image_grid_pinpoints resolution, and one image_newline token per row of the "
            "tile grid)"
        )
    return _with(bp, family, tower, projector, what, tokens)


def paligemma_blueprint(c: Config, family: str) -> b.Blueprint:
    """PaliGemmaForConditionalGeneration: a SigLIP tower without head, one biased Linear to
    projection_dim (the text width) and the Gemma / Gemma 2 decoder, its head tied."""
    bp, _ = _text(c, family)
    vision = c.raw.get("vision_config") or {}
    tower = _siglip(vision, _SIGLIP_224)
    v = Config({**_SIGLIP_224, **vision})
    vision_d = v.int("hidden_size")
    out = v.int("projection_dim", default=c.int("projection_dim", default=bp.d))
    projector = vision_d * out + out
    side = v.int("image_size") // v.int("patch_size")
    tokens = f"an image adds {side * side} tokens at {v.int('image_size')} px"
    return _with(bp, "paligemma", tower, projector, "SigLIP vision tower", tokens)


def idefics3_blueprint(c: Config, family: str) -> b.Blueprint:
    """Idefics3ForConditionalGeneration and SmolVLMForConditionalGeneration: the vision
    transformer, a pixel-shuffle connector (one Linear, no bias, from vision width x
    scale_factor^2 to the text width) and the text_config's decoder."""
    bp, _ = _text(c, family)
    vision = c.raw.get("vision_config") or {}
    tower = idefics3_vision_params(vision)
    v = Config({**_IDEFICS3_VISION, **vision})
    scale = c.int("scale_factor", default=2)
    projector = v.int("hidden_size") * scale * scale * bp.d
    side = v.int("image_size") // v.int("patch_size")
    per_tile = side * side // (scale * scale)
    tokens = (
        f"an image adds {per_tile} tokens per {v.int('image_size')} px tile after the "
        f"{scale} x {scale} pixel shuffle (the processor splits a large image into tiles plus "
        "a downscaled global view)"
    )
    return _with(bp, family, tower, projector, "vision transformer", tokens)


# InternVLVisionConfig's defaults (InternViT-300M-448px): the tower of every InternVL3 / 3.5
# "-hf" release up to 14B (transformers configuration_internvl.py).
_INTERNVL_VISION = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "image_size": 448,
    "patch_size": 14,
    "num_channels": 3,
}


def _pair(v: Config, name: str) -> tuple[int, int]:
    """image_size / patch_size: one int or an [height, width] pair."""
    value = v.raw.get(name)
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise ConfigError(
                f"config.json field 'vision_config.{name}' must be an integer or a pair",
                field="vision_config",
            )
        return check_int(value[0], name), check_int(value[1], name)
    side = v.int(name)
    return side, side


def internvl_vision_params(raw: dict) -> int:
    """InternVLVisionModel (transformers modeling_internvl.py): a class token, a patch Conv2d
    with bias, a position table of patches + 1 (use_absolute_position_embeddings), an optional
    mask token; blocks of q/k/v (biased where attention_bias) and a biased output projection,
    RMSNorm over the width on q and k where use_qk_norm, a two-layer biased GELU MLP, two norms
    (LayerNorm, or RMSNorm where norm_type is rms_norm) and two layer-scale vectors (lambda_1,
    lambda_2); a final LayerNorm only where use_mean_pooling is false."""
    v = Config({**_INTERNVL_VISION, **raw})
    d = v.int("hidden_size")
    heads(v, d, ("num_attention_heads",))
    height, width = _pair(v, "image_size")
    patch_h, patch_w = _pair(v, "patch_size")
    patches = (height // patch_h) * (width // patch_w)
    embeddings = d + v.int("num_channels") * patch_h * patch_w * d + d
    if v.bool("use_absolute_position_embeddings", default=True):
        embeddings += (patches + 1) * d
    if v.bool("use_mask_token", default=False):
        embeddings += d
    qkv_bias = v.bool("attention_bias", default=False)
    norm = d if v.str("norm_type", "layer_norm") == "rms_norm" else b.ln(d)
    block = (
        b.total(b.attention(d, 1, 1, d, qkv_bias=qkv_bias, out_bias=True))
        + (2 * d if v.bool("use_qk_norm", default=False) else 0)
        + b.total(b.mlp(d, v.int("intermediate_size"), bias=True))
        + 2 * norm
        + 2 * d  # lambda_1, lambda_2
    )
    final = 0 if v.bool("use_mean_pooling", default=True) else b.ln(d)
    return embeddings + v.int("num_hidden_layers") * block + final


def internvl_blueprint(c: Config, family: str) -> b.Blueprint:
    """InternVLForConditionalGeneration: the InternViT tower, a projector (LayerNorm over the
    pixel-shuffled width, vision width x (1 / downsample_ratio)^2, then Linear to the text
    width, GELU, Linear; both biased) and the text_config's decoder (Qwen2 by default). The LM
    head is untied unless config.json ties it: transformers 5's InternVLConfig defaults
    tie_word_embeddings to true, so a model built from a config.json that omits it ties it, but
    from_pretrained unties it again where the checkpoint stores lm_head.weight apart from the
    embedding (InternVL3-8B-hf's 7.94B counts both), as for Mistral 3."""
    bp, _ = _text(c, family)
    vision = c.raw.get("vision_config") or {}
    tower = internvl_vision_params(vision)
    v = Config({**_INTERNVL_VISION, **vision})
    ratio = c.raw.get("downsample_ratio", 0.5)
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not 0 < ratio <= 1:
        raise ConfigError(
            f"config.json field 'downsample_ratio' must be a number in (0, 1], got {ratio!r}",
            field="downsample_ratio",
        )
    scale = int(1 / ratio)
    vision_d = v.int("hidden_size")
    shuffled = vision_d * scale * scale
    text_d = bp.d
    projector = b.ln(shuffled) + shuffled * text_d + text_d + text_d * text_d + text_d
    height, width = _pair(v, "image_size")
    patch_h, patch_w = _pair(v, "patch_size")
    per_tile = (height // patch_h) * (width // patch_w) // (scale * scale)
    tokens = (
        f"an image adds {per_tile} tokens per {height} px tile after the {scale} x {scale} "
        "pixel shuffle, plus two (<img>, </img>); the processor splits an image into 1 to "
        "max_patches (12) tiles and adds a thumbnail tile when it splits"
    )
    return _with(bp, family, tower, projector, "InternViT vision tower", tokens)


# Idefics2VisionConfig's defaults (transformers configuration_idefics2.py); idefics2-8b names
# its own SigLIP-So400m shape at 980 px.
_IDEFICS2_VISION = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "image_size": 224,
    "patch_size": 32,
    "num_channels": 3,
}
# Idefics2PerceiverConfig's defaults: 64 latents, 3 layers, 16 query heads of 96, 4 K/V heads.
_PERCEIVER = {
    "resampler_n_latents": 64,
    "resampler_depth": 3,
    "resampler_n_heads": 16,
    "resampler_head_dim": 96,
    "num_key_value_heads": 4,
}


def sub_config(c: Config, name: str, family: str) -> dict:
    value = c.raw.get(name)
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise ConfigError(
            f"config.json field '{name}' of a {family} model must be an object", field=name
        )
    return value


def idefics2_blueprint(c: Config, family: str) -> b.Blueprint:
    """Idefics2ForConditionalGeneration (transformers modeling_idefics2.py): the SigLIP vision
    transformer (Idefics2VisionTransformer, no pooling head), the connector and the Mistral
    text model with its own lm_head (tied only where tie_word_embeddings says so, false by
    default). The connector is a gated MLP without biases (vision width -> the text model's
    intermediate_size -> text width) and a perceiver resampler at the text width
    (Idefics2Config forces the perceiver's hidden_size to the text model's): resampler_n_latents
    learned latents, resampler_depth layers of three RMSNorms, grouped-query attention without
    biases (resampler_n_heads x resampler_head_dim queries, num_key_value_heads keys and values,
    attending over the image's states and the latents) and a gated MLP of 4 x the width, then a
    final RMSNorm."""
    sub_config(c, "perceiver_config", family)
    bp, _ = _text(c, family)
    vision = sub_config(c, "vision_config", family)
    tower = idefics3_vision_params(vision, _IDEFICS2_VISION)
    v = Config({**_IDEFICS2_VISION, **vision})
    p = Config({**_PERCEIVER, **sub_config(c, "perceiver_config", family)})
    text = Config({**TEXT_DEFAULTS["mistral"], **(c.raw.get("text_config") or {})})
    d = bp.d
    inter = text.int("intermediate_size")
    modality = 2 * v.int("hidden_size") * inter + inter * d  # gate, up, down: no biases
    h = p.int("resampler_n_heads")
    kv = p.int("num_key_value_heads")
    if h % kv:
        raise ConfigError(
            f"config.json field 'perceiver_config.num_key_value_heads' ({kv}) must divide "
            f"resampler_n_heads ({h})",
            field="perceiver_config",
        )
    latents = p.int("resampler_n_latents")
    layer = (
        b.total(b.attention(d, h, kv, p.int("resampler_head_dim")))
        + b.total(b.gated_mlp(d, 4 * d))
        + 3 * d
    )
    resampler = latents * d + p.int("resampler_depth") * layer + d
    tokens = (
        f"an image adds {latents} tokens (the perceiver's latents), {5 * latents} where the "
        "processor splits it (do_image_splitting: four crops and the whole image)"
    )
    return _with(bp, family, tower, modality + resampler, "SigLIP vision transformer", tokens)
