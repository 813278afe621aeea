"""Encoder-only families after BERT: ModernBERT, DeBERTa-v2/v3, ESM-2, DINOv2 and ELECTRA.

Each is counted as the class config["architectures"][0] names (the bare model when the config
names none, as DeBERTa-v3's configs do), following transformers 5's modeling_<family>.py; a head
the reader does not know leaves the bare model, a note and exact=False. The masked-LM decoders
share the word embedding (tie_word_embeddings, true by default in all of them) and add only
their output bias; an untied decoder adds its vocabulary x width matrix.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, encoder_dims, heads
from advisor.engine.architecture.encoders import encoder_block, label_count
from advisor.engine.errors import ConfigError


def _head(c: Config, family: str, heads_of: dict[str, tuple[int, str]]) -> tuple[int, str, bool]:
    """(parameters, note, exact) of the head architectures[0] names, from `heads_of` (suffix ->
    (parameters, what)); the bare model when it names none or one the reader does not know."""
    name = c.architecture() or ""
    for suffix, (params, what) in heads_of.items():
        if name.endswith(suffix):
            return params, f"Counted as {name} with {what} ({params:,} parameters).", True
    bare, what = heads_of["Model"]
    if not name:
        return bare, f"Counted as the bare {family} model ({what}).", True
    return bare, f"Counted as the bare {family} model; the head of {name} is not counted.", False


def _untied(c: Config, vocab: int, width: int) -> int:
    """The decoder matrix of a masked-LM head whose config unties it from the embedding."""
    return 0 if c.bool("tie_word_embeddings", default=True) else vocab * width


def _blueprint(c: Config, family: str, **fields) -> b.Blueprint:
    return b.Blueprint(family=family, gated=False, lm_head=0, **fields)


# ModernBERT (modeling_modernbert.py): token embeddings and a LayerNorm, blocks of a fused Wqkv
# and Wo (bias: attention_bias), a GeGLU MLP whose Wi emits 2 x intermediate_size (bias:
# mlp_bias), LayerNorms whose bias is norm_bias, and no attention norm in the first block (an
# Identity). No position table: rotary positions, every global_attn_every_n_layers-th block
# attends globally (theta global_rope_theta) and the others within a local_attention window.
def modernbert_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    vocab = c.int("vocab_size")
    norm = 2 * d if c.bool("norm_bias", default=False) else d
    attn_bias = c.bool("attention_bias", default=False)
    mlp_bias = c.bool("mlp_bias", default=False)
    dense = d * d + (d if c.bool("classifier_bias", default=False) else 0)
    transform = dense + norm  # ModernBertPredictionHead: dense, activation, LayerNorm
    labels = label_count(c)
    decoder = (vocab if c.bool("decoder_bias", default=True) else 0) + _untied(c, vocab, d)
    head, note, exact = _head(
        c,
        family,
        {
            "Model": (0, "no pooler"),
            "ForMaskedLM": (transform + decoder, "its masked-LM head"),
            "ForSequenceClassification": (
                transform + labels * d + labels,
                f"its {labels}-label classification head",
            ),
            "ForTokenClassification": (
                transform + labels * d + labels,
                f"its {labels}-label token classifier",
            ),
            "ForQuestionAnswering": (transform + labels * d + labels, "its span head"),
            "ForMultipleChoice": (transform + d + 1, "its multiple-choice head"),
        },
    )
    every = c.int("global_attn_every_n_layers", default=3)
    window = c.int("local_attention", default=128)
    return _blueprint(
        c,
        "modernbert",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        vocab=vocab,
        positions=c.int("max_position_embeddings", default=8192),
        tied=True,
        attention=b.fused_attention(d, h, h, hd, qkv="Wqkv", out="Wo", bias=attn_bias),
        mlp=[
            b.lin("Wi", d, 2 * inter, mlp_bias, "mlp_in"),
            b.lin("mlp.Wo", inter, d, mlp_bias, "mlp_out"),
        ],
        block_norms=2 * norm,
        embedding=vocab * d + norm,
        # The final norm stands in for the attention norm the first block lacks.
        outside=head,
        notes=[
            note,
            f"Every {every}rd block attends to the whole sequence, the others to a "
            f"{window}-token window; rotary positions, no position table.",
        ],
        exact=exact,
    )


def _pos_att_types(c: Config) -> list:
    """pos_att_type as a list: a list, or a "p2c|c2p" string split at its bars."""
    pos_types = c.raw.get("pos_att_type") or []
    if isinstance(pos_types, str):
        pos_types = [x.strip() for x in pos_types.lower().split("|")]
    if not isinstance(pos_types, list):
        raise ConfigError("config.json field 'pos_att_type' must be a list", field="pos_att_type")
    return pos_types


def _deberta_encoder_extra(c: Config, d: int, positions: int, relative: bool) -> int:
    """What DeBERTa-v2's encoder holds beside its blocks: the relative embeddings (with
    relative_attention), their LayerNorm (norm_rel_ebd) and the convolution after the first
    block (conv_kernel_size)."""
    encoder_extra = 0
    if relative:
        max_rel = c.raw.get("max_relative_positions", -1)
        max_rel = max_rel if isinstance(max_rel, int) and max_rel >= 1 else positions
        buckets = c.raw.get("position_buckets", -1)
        size = buckets if isinstance(buckets, int) and buckets > 0 else max_rel
        encoder_extra += 2 * size * d
    norm_rel = str(c.raw.get("norm_rel_ebd") or "none").lower().split("|")
    if "layer_norm" in [x.strip() for x in norm_rel]:
        encoder_extra += b.ln(d)
    kernel = c.int("conv_kernel_size", default=0, minimum=0)
    if kernel:
        groups = c.int("conv_groups", default=1)
        encoder_extra += d * (d // groups) * kernel + d + b.ln(d)
    return encoder_extra


# DeBERTa-v2 and -v3 (modeling_deberta_v2.py, model_type deberta-v2): word embeddings of
# embedding_size (projected to hidden_size without bias when they differ), a position table
# only where position_biased_input, token types only where type_vocab_size > 0, a LayerNorm;
# BERT's blocks (q/k/v/o and MLP with bias, two LayerNorms); then, with relative_attention, a
# table of 2 x position_buckets (or 2 x max_relative_positions) relative embeddings and, where
# norm_rel_ebd says layer_norm, its LayerNorm; a 1-D convolution after the first block where
# conv_kernel_size > 0 (DeBERTa-v2 xlarge/xxlarge); and per-block position projections for c2p
# / p2c where share_att_key is false. DeBERTa-v3 shares them and has no position table.
def deberta_v2_blueprint(c: Config, family: str) -> b.Blueprint:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h = c.int("num_attention_heads")
    hd = (
        c.int("attention_head_size", default=0, minimum=0)
        or heads(c, d, ("num_attention_heads",))[2]
    )
    inter = c.int("intermediate_size")
    vocab = c.int("vocab_size")
    e = c.int("embedding_size", default=d)
    positions = c.int("max_position_embeddings", default=512)
    types = c.int("type_vocab_size", default=0, minimum=0)
    embedding = vocab * e + types * e
    if c.bool("position_biased_input", default=True):
        embedding += positions * e
    embedding += (e * d if e != d else 0) + b.ln(d)
    relative = c.bool("relative_attention", default=False)
    pos_types = _pos_att_types(c)
    block = encoder_block(
        d, h, hd, inter, ("query_proj", "key_proj", "value_proj", "attention.output.dense")
    )
    attention, mlp = block[:4], block[4:]
    if relative and not c.bool("share_att_key", default=False):
        if "c2p" in pos_types:
            attention.append(b.lin("pos_key_proj", d, h * hd, True, "attn_pos_k"))
        if "p2c" in pos_types:
            attention.append(b.lin("pos_query_proj", d, h * hd, True, "attn_pos_q"))
    encoder_extra = _deberta_encoder_extra(c, d, positions, relative)
    labels = label_count(c)
    pooled = c.int("pooler_hidden_size", default=d)
    pooler = pooled * pooled + pooled  # ContextPooler: dense over the first token
    transform = d * e + e + b.ln(e)  # the masked-LM head's dense and LayerNorm
    head, note, exact = _head(
        c,
        "deberta-v2",
        {
            "Model": (0, "no pooler"),
            # Untied, the decoder keeps its own bias beside the head's.
            "ForMaskedLM": (
                transform + vocab + (_untied(c, vocab, e) and vocab * e + vocab),
                "its masked-LM head",
            ),
            "ForSequenceClassification": (
                pooler + pooled * labels + labels,
                f"its pooler and {labels}-label classifier",
            ),
            "ForTokenClassification": (d * labels + labels, f"its {labels}-label classifier"),
            "ForQuestionAnswering": (d * labels + labels, "its span head"),
            "ForMultipleChoice": (pooler + pooled + 1, "its pooler and multiple-choice head"),
        },
    )
    return _blueprint(
        c,
        "deberta",
        d=d,
        layers=layers,
        h=h,
        kv=h,
        hd=hd,
        inter=inter,
        vocab=vocab,
        positions=positions,
        tied=True,
        attention=attention,
        mlp=mlp,
        block_norms=2 * b.ln(d),
        embedding=embedding,
        outside=encoder_extra + head,
        notes=[
            note,
            "Relative positions (disentangled attention): the position table does not bound "
            "the sequence length.",
        ]
        if relative
        else [note],
        exact=exact,
    )


# ESM and ESM-2 (modeling_esm.py): word embeddings, a position table only where
# position_embedding_type is absolute (ESM-1b; ESM-2 is rotary), a LayerNorm before the blocks
# only where emb_layer_norm_before; pre-LayerNorm BERT blocks (q/k/v/o and MLP with bias, two
# LayerNorms); a LayerNorm after them; the contact-prediction regression (one weight per layer
# and head, and a bias) in every model; the pooler only in the bare EsmModel.
def esm_blueprint(c: Config, family: str) -> b.Blueprint:
    if c.bool("is_folding_model", default=False) or (c.architecture() or "").endswith("Folding"):
        raise ConfigError(
            "The estimator cannot count ESMFold (EsmForProteinFolding): its folding trunk is not "
            "an encoder it counts. Enter the parameter count from the model card instead.",
            field="is_folding_model",
        )
    d, layers, h, kv, hd, inter = encoder_dims(c)
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings", default=1026)
    absolute = c.str("position_embedding_type", "absolute") == "absolute"
    embedding = vocab * d + (positions * d if absolute else 0)
    embedding += b.ln(d) if c.bool("emb_layer_norm_before", default=False) else 0
    contact = layers * h + 1
    labels = label_count(c)
    pooler = d * d + d
    head, note, exact = _head(
        c,
        "esm",
        {
            "Model": (pooler, "its pooler"),
            "ForMaskedLM": (
                d * d + d + b.ln(d) + vocab + _untied(c, vocab, d),
                "its masked-LM head",
            ),
            "ForSequenceClassification": (
                d * d + d + d * labels + labels,
                f"its {labels}-label classification head",
            ),
            "ForTokenClassification": (d * labels + labels, f"its {labels}-label classifier"),
        },
    )
    block = encoder_block(d, h, hd, inter)
    return _blueprint(
        c,
        "esm",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        vocab=vocab,
        positions=positions,
        tied=True,
        attention=block[:4],
        mlp=block[4:],
        block_norms=2 * b.ln(d),
        embedding=embedding,
        outside=b.ln(d) + contact + head,
        notes=[note] + ([] if absolute else ["Rotary positions: no position table."]),
        exact=exact,
    )


# DINOv2 (modeling_dinov2.py): a [CLS] token, a mask token (use_mask_token), a position per
# patch at image_size and one for [CLS] (interpolated to other sizes), the patch Conv2d with
# bias; blocks of q/k/v (bias: qkv_bias) and o (bias), two LayerNorms, two LayerScale vectors
# and a GELU MLP of mlp_ratio x width, or where use_swiglu_ffn a SwiGLU whose width is
# 2/3 x mlp_ratio x width rounded up to a multiple of 8 (the giant model); a final LayerNorm.
# No pooler; the image classifier reads [CLS] and the mean patch (2 x width inputs).
def dinov2_blueprint(c: Config, family: str) -> b.Blueprint:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",))
    ratio = c.raw.get("mlp_ratio", 4)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 64:
        raise ConfigError(
            f"config.json field 'mlp_ratio' must be a positive number, got {ratio!r}",
            field="mlp_ratio",
        )
    inter = int(d * ratio)
    swiglu = c.bool("use_swiglu_ffn", default=False)
    if swiglu:
        inter = (int(inter * 2 / 3) + 7) // 8 * 8
        mlp = b.gated_mlp(d, inter, bias=True)
    else:
        mlp = b.mlp(d, inter, bias=True)
    image = c.int("image_size", default=224)
    patch = c.int("patch_size", default=14)
    channels = c.int("num_channels", default=3)
    patches = (image // patch) ** 2
    embedding = (
        d
        + (d if c.bool("use_mask_token", default=True) else 0)
        + (patches + 1) * d
        + channels * patch * patch * d
        + d
    )
    labels = label_count(c)
    head, note, exact = _head(
        c,
        "dinov2",
        {
            "Model": (0, "no pooler"),
            "ForImageClassification": (2 * d * labels + labels, f"its {labels}-class classifier"),
        },
    )
    return _blueprint(
        c,
        "dinov2",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        vocab=0,
        positions=patches + 1,
        tied=False,
        attention=b.attention(
            d, h, h, hd, qkv_bias=c.bool("qkv_bias", default=True), out_bias=True
        ),
        mlp=mlp,
        block_norms=2 * b.ln(d) + 2 * d,  # two LayerNorms and two LayerScale vectors
        embedding=embedding,
        outside=b.ln(d) + head,
        notes=[
            note,
            f"One {image}-pixel image is {patches + 1} tokens ({image // patch} x "
            f"{image // patch} patches of {patch} px and [CLS]); the position table is "
            "interpolated to other sizes (224 px: 257 tokens).",
        ],
        exact=exact,
    )


# ELECTRA (modeling_electra.py): BERT's embeddings at embedding_size (projected to hidden_size
# with bias when they differ) and BERT's blocks, no pooler. ElectraForPreTraining is the
# discriminator: a dense layer and one logit per token (not a vocabulary head);
# ElectraForMaskedLM is the generator: a dense layer to embedding_size, a LayerNorm and the
# tied vocabulary projection with its bias.
def electra_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    vocab = c.int("vocab_size")
    e = c.int("embedding_size", default=d)
    positions = c.int("max_position_embeddings", default=512)
    types = c.int("type_vocab_size", default=2, minimum=0)
    embedding = (vocab + positions + types) * e + b.ln(e) + (e * d + d if e != d else 0)
    labels = label_count(c)
    # ElectraSequenceSummary: a dense layer over the first token where summary_use_proj, to
    # num_labels outputs only where the config sets summary_proj_to_labels.
    summary_out = labels if c.bool("summary_proj_to_labels", default=False) else d
    summary = d * summary_out + summary_out if c.bool("summary_use_proj", default=True) else 0
    head, note, exact = _head(
        c,
        "electra",
        {
            "Model": (0, "no pooler"),
            "ForPreTraining": (d * d + d + d + 1, "its replaced-token discriminator head"),
            "ForMaskedLM": (
                d * e + e + b.ln(e) + vocab + _untied(c, vocab, e),
                "its generator's masked-LM head",
            ),
            "ForSequenceClassification": (
                d * d + d + d * labels + labels,
                f"its {labels}-label classification head",
            ),
            "ForTokenClassification": (d * labels + labels, f"its {labels}-label classifier"),
            "ForQuestionAnswering": (d * labels + labels, "its span head"),
            "ForMultipleChoice": (summary + d + 1, "its sequence summary and choice scorer"),
        },
    )
    block = encoder_block(d, h, hd, inter)
    return _blueprint(
        c,
        "electra",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        vocab=vocab,
        positions=positions,
        tied=True,
        attention=block[:4],
        mlp=block[4:],
        block_norms=2 * b.ln(d),
        embedding=embedding,
        outside=head,
        notes=[note],
        exact=exact,
    )


# ALBERT (modeling_albert.py) runs one block (or num_hidden_groups blocks) num_hidden_layers
# times: albert-base-v2's 12 layers are one set of weights. The engine derives compute from the
# parameter count (ModelShape.flop_params) and weight memory from the same count, so it cannot
# hold both "11.7M parameters" and "the FLOPs of 12 layers" without a broader change: counted
# once, its training and inference time would be 12-24x too short; counted per layer, its
# weights and optimizer 12-24x too large. Refused, with that reason.
def albert_refused(c: Config, family: str) -> b.Blueprint:
    layers = c.int("num_hidden_layers", default=12)
    groups = c.int("num_hidden_groups", default=1)
    raise ConfigError(
        f"The estimator cannot count ALBERT (model_type 'albert') yet: it shares {groups} "
        f"block{'s' if groups > 1 else ''} of weights across its {layers} layers, and the "
        "estimator derives compute and weight memory from one parameter count, so it would "
        f"get either the time ({layers // groups}x too short) or the memory ({layers // groups}"
        "x too large) wrong. A typed parameter count would understate its compute the same "
        "way.",
        field="model_type",
    )


# Families registered only to be refused with their own reason (never listed as counted).
REFUSED_FAMILIES = frozenset({"albert"})

MODERN_ENCODERS = {
    "modernbert": modernbert_blueprint,
    "deberta-v2": deberta_v2_blueprint,
    "esm": esm_blueprint,
    "dinov2": dinov2_blueprint,
    "electra": electra_blueprint,
    "albert": albert_refused,
}
MODERN_ARCHITECTURES = {
    "ModernBertModel": "modernbert",
    "ModernBertForMaskedLM": "modernbert",
    "DebertaV2Model": "deberta-v2",
    "DebertaV2ForMaskedLM": "deberta-v2",
    "EsmModel": "esm",
    "EsmForMaskedLM": "esm",
    "Dinov2Model": "dinov2",
    "ElectraModel": "electra",
    "ElectraForPreTraining": "electra",
    "ElectraForMaskedLM": "electra",
    "AlbertModel": "albert",
    "AlbertForMaskedLM": "albert",
    "AlbertForPreTraining": "albert",
}
