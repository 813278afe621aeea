"""BLIP-2 (blip-2) and InstructBLIP (instructblip): the EVA ViT-g vision model, a Q-Former
whose learned query tokens read the image, a projection to the language model and the language
model itself (a decoder of families/, or Flan-T5's encoder-decoder).

The text_config defaults (TEXT_DEFAULTS, text_model) and the sub-config check (sub_config) are
vlm.py's, shared with the other vision-language models.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.decoders import flag
from advisor.engine.architecture.encoders import t5_blueprint
from advisor.engine.architecture.vlm import TEXT_DEFAULTS, sub_config, text_model

# BLIP-2's and InstructBLIP's EVA ViT-g (Blip2VisionConfig / InstructBlipVisionConfig defaults)
# and Q-Former (Blip2QFormerConfig / InstructBlipQFormerConfig defaults, a BERT-base).
_EVA_VIT_G = {
    "hidden_size": 1408,
    "intermediate_size": 6144,
    "num_hidden_layers": 39,
    "num_attention_heads": 16,
    "image_size": 224,
    "patch_size": 14,
}
_QFORMER = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "cross_attention_frequency": 2,
}


def blip_vision_params(raw: dict) -> tuple[int, int]:
    """(parameters, width) of Blip2VisionModel / InstructBlipVisionModel: a class token, a
    patch Conv2d over 3 channels with bias (in_channels is fixed at 3 whatever num_channels
    says), a position table of patches + 1, blocks of a fused qkv without bias of its own (where
    qkv_bias, a 3 x width bias holding q's and v's biases and zeros for k) and a biased
    projection, a biased two-layer MLP and two LayerNorms, then a post-LayerNorm."""
    v = Config({**_EVA_VIT_G, **raw})
    d = v.int("hidden_size")
    heads(v, d, ("num_attention_heads",))
    patch = v.int("patch_size")
    patches = (v.int("image_size") // patch) ** 2
    embeddings = d + 3 * patch * patch * d + d + (patches + 1) * d
    qkv = 3 * d * d + (3 * d if v.bool("qkv_bias", default=True) else 0)
    block = qkv + d * d + d + b.total(b.mlp(d, v.int("intermediate_size"), bias=True))
    return embeddings + v.int("num_hidden_layers") * (block + 2 * b.ln(d)) + b.ln(d), d


def qformer_params(raw: dict, vision_d: int, instruct: bool) -> tuple[int, int]:
    """(parameters, width) of the Q-Former (Blip2QFormerModel / InstructBlipQFormerModel), a
    BERT encoder whose every cross_attention_frequency-th layer (from the first) also
    cross-attends to the vision states (keys and values from the vision width, set to the
    tower's by the config class). Each attention: biased query/key/value, a biased output dense
    and a LayerNorm; each feed-forward: two biased Linears and a LayerNorm. BLIP-2's layers
    have the queries' feed-forward only (and the text's too where use_qformer_text_input) and a
    LayerNorm before the stack; InstructBLIP's have both and word, position and LayerNorm
    embeddings for the instruction text."""
    q = Config({**_QFORMER, **raw})
    d = q.int("hidden_size")
    heads(q, d, ("num_attention_heads",))
    inter = q.int("intermediate_size")
    layers = q.int("num_hidden_layers")
    every = q.int("cross_attention_frequency")
    output = d * d + d + b.ln(d)
    self_attention = 3 * (d * d + d) + output
    cross_attention = d * d + d + 2 * (vision_d * d + d) + output
    ffn = d * inter + inter + inter * d + d + b.ln(d)
    text_ffn = instruct or q.bool("use_qformer_text_input", default=False)
    crossing = (layers + every - 1) // every
    body = layers * (self_attention + ffn * (2 if text_ffn else 1)) + crossing * cross_attention
    if instruct:
        top = (q.int("vocab_size") + q.int("max_position_embeddings")) * d + b.ln(d)
    else:
        top = b.ln(d)
    return body + top, d


def _blip_text(c: Config, family: str) -> b.Blueprint:
    """The language model: a decoder of DECODERS (AutoModelForCausalLM: OPT for BLIP-2,
    Vicuna's Llama for InstructBLIP) with its head tied as its own config says, or T5
    (AutoModelForSeq2SeqLM: Flan-T5), counted by the engine's T5 reader."""
    text = sub_config(c, "text_config", family)
    text_type = text.get("model_type") or "opt"
    if text_type == "t5":
        return t5_blueprint(Config({**TEXT_DEFAULTS["t5"], **text}), "t5")
    spec, t = text_model(text, text_type, family)
    # Blip2Config / InstructBlipConfig hold no tie flag of their own: the language model ties
    # its head as its own config says (OPT: tied by default; Llama: untied).
    tied = flag(t, spec.tied)
    return decoder_blueprint(Config({**t.raw, "tie_word_embeddings": tied}), text_type, spec)


def blip2_blueprint(c: Config, family: str) -> b.Blueprint:
    """Blip2ForConditionalGeneration (transformers modeling_blip_2.py) and
    InstructBlipForConditionalGeneration (modeling_instructblip.py): the EVA ViT-g vision
    model, num_query_tokens learned query tokens, the Q-Former, language_projection (a biased
    Linear from the Q-Former's width to the language model's) and the language model. The
    Q-Former's outputs for the query tokens, projected, are prepended to the text's embeddings
    (the encoder's input, for Flan-T5). transformers keeps the query tokens and the Q-Former in
    float32 (_keep_in_fp32_modules) whatever the model's dtype."""
    instruct = family == "instructblip"
    bp = _blip_text(c, family)
    tower, vision_d = blip_vision_params(sub_config(c, "vision_config", family))
    qformer, qd = qformer_params(sub_config(c, "qformer_config", family), vision_d, instruct)
    queries = c.int("num_query_tokens", default=32)
    projector = queries * qd + qformer + qd * bp.d + bp.d
    where = "encoder's input" if bp.encoder_layers else "sequence"
    tokens = (
        f"an image adds {queries} tokens (the Q-Former's query tokens) to the language "
        f"model's {where}; the query tokens and the Q-Former are kept in float32"
    )
    what = "T5 encoder-decoder" if bp.encoder_layers else f"{bp.family} decoder"
    return replace(
        bp,
        family=family,
        outside=bp.outside + tower + projector,
        input_towers=bp.input_towers + tower + projector,
        notes=[
            *bp.notes,
            f"Includes the EVA ViT-g vision model ({tower:,} parameters), the Q-Former with its "
            f"query tokens and language projection ({projector:,}) beside the {what}; {tokens}.",
        ],
    )
