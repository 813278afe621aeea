"""Vision-language models whose vision tower the engine counts exactly: Gemma 3 (SigLIP).

Gemma3ForConditionalGeneration (transformers modeling_gemma3.py) is the gemma3_text decoder, a
SigLIP vision encoder without its attention-pooling head (vision_use_head false) and a projector
(an RMS-normalised vision_hidden x text_hidden matrix). The vision tokens are counted as
parameters, not as sequence length: an image adds mm_tokens_per_image tokens to the prompt.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
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
        notes=[
            *bp.notes,
            f"Includes the SigLIP vision tower ({tower:,} parameters) and its projector "
            f"({projector:,}).",
        ],
    )
