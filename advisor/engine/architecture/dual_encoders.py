"""Dual encoders: CLIPModel (clip), SiglipModel (siglip) and Siglip2Model (siglip2), a vision and
a text transformer side by side, each embedding its input for a contrastive score.

- CLIPModel (transformers modeling_clip.py): CLIPTextModel (token and position tables,
  pre-LN blocks of q/k/v/o and a two-layer MLP, all biased, a final LayerNorm),
  CLIPVisionModel (class token, patch Conv2d without bias, a position per patch and the class
  token, pre- and post-LayerNorm), visual_projection and text_projection (to projection_dim,
  no bias) and logit_scale.
- SiglipModel (modeling_siglip.py): SiglipTextModel (token and position tables, the same
  blocks, a final LayerNorm and a biased head to projection_size, the hidden size by
  default), SiglipVisionModel (patch Conv2d with bias, a position per patch, post-LayerNorm
  and, where vision_use_head, the attention-pooling head), logit_scale and logit_bias. SigLIP 2's
  fixed-resolution releases (google/siglip2-base-patch16-224, -so400m-patch14-384,
  -giant-opt-patch16-256 ...) are SiglipModel checkpoints (model_type siglip).
- Siglip2Model (modeling_siglip2.py, SigLIP 2's NaFlex releases): SigLIP's towers, but the
  patch embedding is a biased Linear over num_channels x patch_size^2 pixels (as many
  parameters as the Conv2d) and the position table has num_patches rows (256 by default),
  resized to each image's patch grid; an image is at most num_patches patches (the processor's
  max_num_patches), whatever its aspect ratio.

What a token is: one position of either tower. One image-text pair is the image's patches
(with CLIP's class token) plus the text's max_position_embeddings tokens (77 for CLIP, 64 for
SigLIP, which the processors pad to), and that sum is the model's sequence length
(max_position_embeddings of the count). The Blueprint's blocks are the vision tower's (its
width, heads and layers drive attention and activations); the text tower sits in `outside`.
A patch passes through the vision tower only and a text token through the text tower only,
so the parameters active per token are their token-weighted mean (`Blueprint.idle`); the
matmul FLOPs of a pair are then exact, while attention and activations are approximated as
the vision tower's over the whole pair. Encoders: no KV cache, no generation, no vocabulary
projection (vocab 0, as ViT).
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.vlm import _block, _siglip, clip_vision_params
from advisor.engine.errors import ConfigError

# transformers' CLIPTextConfig / CLIPVisionConfig defaults (ViT-B/32).
_CLIP_TEXT = {
    "vocab_size": 49_408,
    "hidden_size": 512,
    "intermediate_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 8,
    "max_position_embeddings": 77,
}
_CLIP_VISION = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 32,
}
# SiglipTextConfig / SiglipVisionConfig defaults (base, patch 16, 224 px).
_SIGLIP_TEXT = {
    "vocab_size": 32_000,
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "max_position_embeddings": 64,
}
_SIGLIP_VISION = {**_CLIP_VISION, "patch_size": 16, "vision_use_head": True}
# Siglip2VisionConfig: no image_size; num_patches positions (16 x 16).
_SIGLIP2_VISION = {**_SIGLIP_VISION, "num_patches": 256}


def _sub(c: Config, name: str, defaults: dict) -> Config:
    value = c.raw.get(name)
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise ConfigError(f"config.json field '{name}' must be an object", field=name)
    return Config({**defaults, **value})


def _text_tower(t: Config) -> tuple[int, int, int]:
    """(tables, blocks and final LayerNorm, positions) of a CLIP or SigLIP text transformer."""
    d = t.int("hidden_size")
    heads(t, d, ("num_attention_heads",))
    positions = t.int("max_position_embeddings")
    tables = (t.int("vocab_size") + positions) * d
    body = t.int("num_hidden_layers") * _block(d, t.int("intermediate_size")) + b.ln(d)
    return tables, body, positions


def _vision_block(d: int, h: int, kv: int, hd: int, inter: int) -> list[b.LinearShape]:
    """A vision tower block's linears: q/k/v/out_proj, then the two-layer MLP, all biased."""
    return [
        *b.attention(
            d,
            h,
            kv,
            hd,
            names=("q_proj", "k_proj", "v_proj", "out_proj"),
            qkv_bias=True,
            out_bias=True,
        ),  # fmt: skip
        *b.mlp(d, inter, bias=True),
    ]


def dual_encoder_blueprint(c: Config, family: str) -> b.Blueprint:
    clip = family == "clip"
    naflex = family == "siglip2"
    text = _sub(c, "text_config", _CLIP_TEXT if clip else _SIGLIP_TEXT)
    vision_defaults = _CLIP_VISION if clip else _SIGLIP2_VISION if naflex else _SIGLIP_VISION
    vision = _sub(c, "vision_config", vision_defaults)
    d = vision.int("hidden_size")
    h, kv, hd = heads(vision, d, ("num_attention_heads",))
    inter = vision.int("intermediate_size")
    patch = vision.int("patch_size")
    side = 0 if naflex else vision.int("image_size") // patch
    patches = vision.int("num_patches") if naflex else side * side
    if not patches:
        raise ConfigError(
            "config.json field 'vision_config.image_size' must be at least its patch_size",
            field="vision_config",
        )
    text_d = text.int("hidden_size")
    text_tables, text_body, text_tokens = _text_tower(text)
    if clip:
        image_tokens = patches + 1  # and the class token
        tower = clip_vision_params(vision.raw)
        vision_tables = d + image_tokens * d  # class embedding, positions
        projection = c.int("projection_dim", default=512)
        text_head = text_d * projection  # text_projection, no bias
        vision_head = d * projection  # visual_projection, no bias
        scalars = 1  # logit_scale
    else:
        image_tokens = patches
        if naflex:
            # SigLIP's tower at one patch per image, then the num_patches-row position table.
            one = _siglip({**vision.raw, "image_size": patch}, {})
            tower = one - d + patches * d
        else:
            tower = _siglip(vision.raw, {})
        vision_tables = patches * d
        projection = text.int("projection_size", default=text_d)
        text_head = text_d * projection + projection  # head, biased
        vision_head = 0  # the pooling head is part of the tower
        scalars = 2  # logit_scale, logit_bias
    block = _vision_block(d, h, kv, hd, inter)
    layers = vision.int("num_hidden_layers")
    in_blocks = layers * (b.total(block) + 2 * b.ln(d))
    embedding = vision_tables + text_tables
    params = tower + vision_head + text_tables + text_body + text_head + scalars
    # Matmul parameters a patch and a text token pass through; their token-weighted mean is
    # what is active per token (the tables are looked up, not multiplied).
    per_patch = tower - vision_tables + vision_head
    per_text = text_body + text_head
    pair = image_tokens + text_tokens
    active = (per_patch * image_tokens + per_text * text_tokens) // pair + embedding
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=0,
        positions=pair,
        tied=False,
        attention=block[:4],
        mlp=block[4:],
        block_norms=2 * b.ln(d),
        embedding=embedding,
        lm_head=0,
        outside=params - embedding - in_blocks,
        idle=params - active,
        notes=[
            f"A dual encoder: its vision tower ({layers} layers of width {d}) embeds an image "
            f"as {image_tokens} patch tokens and its text tower ({text.int('num_hidden_layers')} "
            f"layers of width {text_d}) a text of up to {text_tokens} tokens; one image-text "
            f"pair is {pair} tokens, each passing through one tower only."
        ],
    )
