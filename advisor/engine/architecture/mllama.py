"""Llama 3.2 Vision (transformers modeling_mllama.py, configuration_mllama.py): 11B and 90B.

MllamaForConditionalGeneration is a Llama 3.1 decoder with cross-attention layers inserted,
a vision model of two transformers and a one-Linear projector:

- Language model (MllamaTextModel): num_hidden_layers blocks, of which those whose index is in
  text_config.cross_attention_layers are MllamaCrossAttentionDecoderLayer and the others
  Llama self-attention blocks. Both kinds have q/k/v/o without bias (head_dim = hidden /
  heads; config.head_dim is not read), a gated MLP of intermediate_size and two RMSNorms; a
  cross-attention block adds q and k RMSNorms of head_dim and two tanh gates (one value
  each). Its keys and values come from the image's vision states, not from the text.
  embed_tokens holds vocab_size + 8 rows (Meta's learnable image-token embeddings appended);
  lm_head is vocab_size x hidden and never tied (the class declares no tied weights).
- Vision model (MllamaVisionModel): a patch Conv2d without bias, a class embedding, a gated
  position table of (image_size / patch_size)^2 + 1 patches plus its per-aspect-ratio tile
  table ((len(supported_aspect_ratios) + 1) x max_num_tiles x patches x width), two gated
  per-aspect-ratio tile embeddings (pre and post), LayerNorms before and after, a local
  transformer of num_hidden_layers blocks and a global one of num_global_layers blocks with
  two gates each (q/k/v/o without bias, a biased GELU MLP, two LayerNorms).
- multi_modal_projector: Linear(vision_output_dim, text hidden, bias): the final state and
  the intermediate_layers_indices states concatenated (1280 x 6 = 7680 in both releases).

For the engine: the vision model and the projector sit in `outside` (as the other vision
towers do); their FLOPs are approximated as those weights applied once per text token (a
real image runs them over max_num_tiles x 1,601 patches once). The cross-attention layers'
q/o projections and MLP run per text token like any block; their k/v projections are counted
per text token too (really once over the image's tokens). Their KV cache and attention are
the image's: an `AttentionGroup` with cross_tokens = max_num_tiles x patches (6,404 for one
560 px image of 4 tiles), cached once per sequence however long the text; one image per
sequence is assumed (the released models are trained on one).

MllamaForCausalLM (a text_config alone, model_type mllama_text_model) builds the same
language model, cross-attention layers included (skipped in the forward pass without images),
and the same untied head. Checked to the parameter against transformers 5 on the meta device
and, for 11B-Vision-Instruct, the Hub's safetensors total (10,670,220,835).
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.errors import ConfigError

# transformers' MllamaTextConfig defaults (the 11B model's language model).
_TEXT_DEFAULTS = {
    "vocab_size": 128_256,
    "hidden_size": 4096,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14_336,
    "max_position_embeddings": 131_072,
}
_CROSS_DEFAULT = [3, 8, 13, 18, 23, 28, 33, 38]
# transformers' MllamaVisionConfig defaults; the released configs set image_size 560.
_VISION_DEFAULTS = {
    "hidden_size": 1280,
    "num_hidden_layers": 32,
    "num_global_layers": 8,
    "attention_heads": 16,
    "num_channels": 3,
    "intermediate_size": 5120,
    "vision_output_dim": 7680,
    "image_size": 448,
    "patch_size": 14,
    "max_num_tiles": 4,
}
_ASPECT_RATIOS = 8  # [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]
# Values the released models store that transformers does not build: none (the Hub's
# 10,670,220,835 for 11B-Vision-Instruct is this count exactly).


def mllama_vision_params(raw: dict) -> tuple[int, int, int]:
    """(parameters of MllamaVisionModel, vision tokens one image gives the cross-attention
    layers (max_num_tiles x patches with the class token), its output width for the
    projector (vision_output_dim))."""
    v = Config({**_VISION_DEFAULTS, **raw})
    d = v.int("hidden_size")
    heads = v.int("attention_heads", "num_attention_heads")
    inner = heads * (d // heads)  # q/k/v width: heads x (hidden // heads), as transformers
    if not inner:
        raise ConfigError(
            f"config.json field 'vision_config.attention_heads' ({heads}) exceeds the vision "
            f"hidden size ({d})",
            field="vision_config",
        )
    inter = v.int("intermediate_size")
    patch = v.int("patch_size")
    side = v.int("image_size") // patch
    if not side:
        raise ConfigError(
            "config.json field 'vision_config.image_size' must be at least its patch_size",
            field="vision_config",
        )
    patches = side * side + 1  # with the class token
    tiles = v.int("max_num_tiles")
    ratios = v.raw.get("supported_aspect_ratios")
    if ratios is None:
        aspect_ids = _ASPECT_RATIOS + 1
    elif isinstance(ratios, list):
        aspect_ids = len(ratios) + 1
    else:
        raise ConfigError(
            "config.json field 'vision_config.supported_aspect_ratios' must be a list",
            field="vision_config",
        )
    embeddings = (
        v.int("num_channels") * patch * patch * d  # patch_embedding, no bias
        + d  # class_embedding
        + 1
        + patches * d
        + aspect_ids * tiles * patches * d  # gated_positional_embedding
        + 2 * (aspect_ids * tiles * d + 1)  # pre/post_tile_positional_embedding, gated
        + 2 * b.ln(d)  # layernorm_pre, layernorm_post
    )
    block = (
        3 * d * inner
        + inner * d  # q/k/v/o, no bias
        + b.total(b.mlp(d, inter, bias=True))
        + 2 * b.ln(d)
    )
    local = v.int("num_hidden_layers")
    global_ = v.int("num_global_layers", minimum=0)
    params = embeddings + local * block + global_ * (block + 2)  # gate_attn, gate_ffn
    return params, tiles * patches, v.int("vision_output_dim")


def _cross_layers(c: Config, layers: int) -> int:
    """Blocks built as cross-attention blocks: the indices in cross_attention_layers that
    exist (transformers tests `layer_idx in cross_attention_layers` for each block)."""
    listed = c.raw.get("cross_attention_layers")
    indices = _CROSS_DEFAULT if listed is None else c.int_list("cross_attention_layers")
    return len({i for i in indices if 0 <= i < layers})


def _text_blueprint(c: Config, family: str) -> tuple[b.Blueprint, int]:
    """The language model and its LM head; (blueprint, cross-attention blocks)."""
    t = Config({**_TEXT_DEFAULTS, **c.raw})
    d = t.int("hidden_size")
    layers = t.int("num_hidden_layers")
    h = t.int("num_attention_heads")
    kv = t.int("num_key_value_heads")
    if h % kv:
        raise ConfigError(
            f"config.json field 'num_key_value_heads' ({kv}) must divide "
            f"'num_attention_heads' ({h}): each key/value head serves a whole group of query "
            "heads",
            field="num_key_value_heads",
        )
    hd = d // h  # MllamaText*Attention: hidden // heads, whatever config.head_dim says
    if not hd:
        raise ConfigError(
            f"config.json field 'num_attention_heads' ({h}) exceeds the hidden size ({d})",
            field="num_attention_heads",
        )
    inter = t.int("intermediate_size")
    vocab = t.int("vocab_size")
    cross = _cross_layers(t, layers)
    own = layers - cross
    self_attn = b.in_layers(b.attention(d, h, kv, hd), own)
    cross_attn = b.in_layers(
        b.attention(d, h, kv, hd, prefix="cross_attn.", role="cross_attn"), cross
    )
    cross_extras = cross * (2 * hd + 2)  # q_norm, k_norm, cross_attn_attn_gate, _mlp_gate
    bp = b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=True,
        vocab=vocab,
        positions=t.opt_int("max_position_embeddings"),
        tied=False,
        attention=[*(self_attn if own else []), *(cross_attn if cross else [])],
        mlp=b.gated_mlp(d, inter),
        block_norms=2 * d,
        embedding=(vocab + 8) * d,
        lm_head=vocab * d,
        outside=d + cross_extras,  # final norm, the cross blocks' norms and gates
        notes=[
            f"{cross} of {layers} decoder layers are cross-attention layers reading the "
            "image's vision states."
        ],
    )
    return bp, cross


def mllama_blueprint(c: Config, family: str) -> b.Blueprint:
    """MllamaForConditionalGeneration (mllama) or MllamaForCausalLM (mllama_text_model)."""
    if family == "mllama_text_model":
        bp, cross = _text_blueprint(c, family)
        own = bp.layers - cross  # without an image only the self-attention layers attend
        group = AttentionGroup(layers=own, query_width=bp.h * bp.hd, kv_heads=bp.kv, head_dim=bp.hd)
        bp.attention_groups = [group]
        bp.notes.append(
            "Text only: the cross-attention layers are built and counted but skipped without "
            "an image; their weights are counted in each token's compute."
        )
        return bp
    text = {} if c.raw.get("text_config") is None else c.raw["text_config"]
    vision = {} if c.raw.get("vision_config") is None else c.raw["vision_config"]
    for name, value in (("text_config", text), ("vision_config", vision)):
        if not isinstance(value, dict):
            raise ConfigError(
                f"config.json of a Llama 3.2 Vision model needs {name} as an object",
                field=name,
            )
    bp, cross = _text_blueprint(Config(text), "mllama")
    tower, image_tokens, vision_out = mllama_vision_params(vision)
    projector = vision_out * bp.d + bp.d
    width = bp.h * bp.hd
    groups = [
        AttentionGroup(layers=bp.layers - cross, query_width=width, kv_heads=bp.kv, head_dim=bp.hd),
        AttentionGroup(
            layers=cross,
            query_width=width,
            kv_heads=bp.kv,
            head_dim=bp.hd,
            cross_tokens=image_tokens,
        ),
    ]
    bp.attention_groups = groups
    bp.outside += tower + projector
    bp.input_towers += tower + projector
    bp.notes.append(
        f"Includes the vision model ({tower:,} parameters) and its projector ({projector:,}). "
        f"An image adds no tokens to the text: its {image_tokens:,} vision states are the "
        f"keys and values of the {cross} cross-attention layers, cached once per sequence "
        "(one image assumed); the vision model's compute is approximated per text token."
    )
    return bp
