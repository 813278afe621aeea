"""Vision transformers researchers fine-tune beyond ViT and DINOv2: DeiT (distilled), BEiT,
ViT-MAE and VideoMAE, counted as transformers 5 builds them (modeling_<family>.py); Swin is
refused with its own reason.

What a token is: one patch (VideoMAE: one tubelet, tubelet_size frames x patch x patch) and
each class or distillation token. One image is (image_size / patch_size)^2 patches plus those
(DeiT distilled: 196 + 2 = 198 at 224 px; BEiT: 197; VideoMAE: 16 / 2 x 14 x 14 = 1,568
tubelets of a 16-frame clip, no class token), and that is the model's max_position_embeddings,
so the default sequence length is one image's tokens. Attention is bidirectional: no KV cache,
no generation, and no vocabulary logits except BEiT's masked image modelling, which scores
every patch against its 8,192 visual tokens (vocab_size).

Masked autoencoders (ViTMAEForPreTraining, VideoMAEForPreTraining) encode only the patches the
mask leaves visible and a narrower decoder reconstructs all of them. They are counted as the
engine's encoder-decoders: the encoder (its blocks, final norm and the projection to the
decoder's width) reads `encoder_positions` visible tokens, the decoder blocks (and its norm and
pixel head) read every patch (the sequence length); no cross-attention (the decoder takes the
encoded patches as its input), and the encoder keeps its own widths (StackWidths), so compute
and activations are those of each stack at its own length and width, not a ViT over every
patch. The heads architectures[0] names are counted; one the reader does not know leaves the
bare model, a note and exact=False.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, encoder_dims
from advisor.engine.architecture.encoders import label_count
from advisor.engine.architecture.masked_autoencoders import autoencoder_blueprint, mask_ratio
from advisor.engine.errors import ConfigError


def _vit_like(
    family: str, d: int, layers: int, h: int, hd: int, inter: int, block, **fields
) -> b.Blueprint:
    """A ViT-style encoder's Blueprint: bidirectional blocks of `block` (attention, MLP) with
    two LayerNorms, no vocabulary, no LM head; `fields` give the rest (and may override)."""
    attention, mlp = block
    defaults = {"gated": False, "vocab": 0, "tied": False, "block_norms": 2 * b.ln(d), "lm_head": 0}
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=h,
        hd=hd,
        inter=inter,
        attention=attention,
        mlp=mlp,
        **{**defaults, **fields},
    )


def _head(c: Config, family: str, heads_of: dict[str, tuple[int, str]]) -> tuple[int, str, bool]:
    """(parameters, note, exact) of the head architectures[0] names, by suffix (longest
    first); the bare model ("Model") where it names none or one the reader does not know."""
    name = c.architecture() or ""
    for suffix in sorted(heads_of, key=len, reverse=True):
        if name.endswith(suffix):
            params, what = heads_of[suffix]
            return params, f"Counted as {name} with {what} ({params:,} parameters).", True
    bare, what = heads_of["Model"]
    if not name:
        return bare, f"Counted as the bare {family} model ({what}).", True
    return bare, f"Counted as the bare {family} model; the head of {name} is not counted.", False


def _patches(c: Config) -> tuple[int, int, int, int]:
    """(image size, patch size, channels, patches per image)."""
    image = c.int("image_size", default=224)
    patch = c.int("patch_size", default=16)
    channels = c.int("num_channels", default=3)
    if patch > image:
        raise ConfigError(
            f"config.json field 'patch_size' ({patch}) must not exceed image_size ({image})",
            field="patch_size",
        )
    return image, patch, channels, (image // patch) ** 2


def _classifier(d: int, labels: int) -> int:
    return d * labels + labels


def _vit_block(
    d: int,
    h: int,
    hd: int,
    inter: int,
    *,
    q_bias: bool,
    k_bias: bool,
    v_bias: bool,
    names=("q_proj", "k_proj", "v_proj", "o_proj"),
    mlp_names=("fc1", "fc2"),
) -> tuple[list[b.LinearShape], list[b.LinearShape]]:
    """(attention, MLP) of a pre-LayerNorm ViT block: q/k/v (their biases as the family has
    them), a biased output projection, a biased GELU MLP."""
    q, k, v, o = names
    attention = [
        b.lin(q, d, h * hd, q_bias, "attn_q"),
        b.lin(k, d, h * hd, k_bias, "attn_k"),
        b.lin(v, d, h * hd, v_bias, "attn_v"),
        b.lin(o, h * hd, d, True, "attn_out"),
    ]
    return attention, b.mlp(d, inter, names=mlp_names, bias=True)


def _tokens_note(image: int, patch: int, extra: int, what: str) -> str:
    side = image // patch
    return (
        f"One {image}-pixel image is {side * side + extra} tokens ({side} x {side} patches of "
        f"{patch} px{what}); the sequence length counts tokens, one image's by default."
    )


# DeiT (modeling_deit.py, model_type deit: the distilled checkpoints; the non-distilled
# facebook/deit-*-patch16-224 are ViT configs, counted by encoders.vit_blueprint): a [CLS] and
# a distillation token, a position for each patch and both, the patch Conv2d with bias; ViT's
# blocks (q/k/v bias: qkv_bias; output and MLP biased; two LayerNorms); a final LayerNorm.
# DeiTModel adds a pooler (dense to pooler_output_size over [CLS]); the classifiers do not.
# DeiTForImageClassificationWithTeacher has two heads, one on [CLS] and one on the
# distillation token (their logits averaged); DeiTForMaskedImageModeling (SimMIM) a mask
# token and a 1x1 Conv2d to encoder_stride^2 x channels pixel values per patch.
def deit_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    image, patch, channels, patches = _patches(c)
    labels = label_count(c)
    pooled = c.int("pooler_output_size", default=d)
    stride = c.int("encoder_stride", default=16)
    pixels = stride * stride * channels
    head, note, exact = _head(
        c,
        "deit",
        {
            "Model": (d * pooled + pooled, "its pooler"),
            "ForImageClassification": (_classifier(d, labels), f"its {labels}-class classifier"),
            "ForImageClassificationWithTeacher": (
                2 * _classifier(d, labels),
                f"its two {labels}-class heads (class and distillation tokens)",
            ),
            "ForMaskedImageModeling": (d + d * pixels + pixels, "its mask token and pixel decoder"),
        },
    )
    qkv = c.bool("qkv_bias", default=True)
    block = _vit_block(d, h, hd, inter, q_bias=qkv, k_bias=qkv, v_bias=qkv)
    return _vit_like(
        "deit",
        d,
        layers,
        h,
        hd,
        inter,
        block,
        positions=patches + 2,
        # [CLS] and distillation tokens, positions, the patch projection (Conv2d with bias).
        embedding=2 * d + (patches + 2) * d + channels * patch * patch * d + d,
        outside=b.ln(d) + head,
        notes=[note, _tokens_note(image, patch, 2, ", [CLS] and the distillation token")],
        exact=exact,
    )


# BEiT (modeling_beit.py): a [CLS] token, a mask token (use_mask_token), a position table only
# where use_absolute_position_embeddings (the released models use relative position biases
# instead), the patch Conv2d with bias; blocks of q (bias), k (no bias), v (bias) and o, a
# biased GELU MLP, two LayerNorms, two layer-scale vectors (lambda_1, lambda_2) where
# layer_scale_init_value > 0, and, where use_relative_position_bias, the block's own table of
# ((2W - 1)^2 + 3) x heads biases (W = image / patch; the 3 are [CLS]-to-patch, patch-to-[CLS]
# and [CLS]-to-[CLS]); one table shared by all blocks where use_shared_relative_position_bias.
# The final LayerNorm is an Identity where use_mean_pooling, whose pooler (BeitModel,
# the classifier) holds a LayerNorm over the mean patch instead; BeitForMaskedImageModeling has
# no pooler, a LayerNorm and lm_head over the vocab_size visual tokens.
def beit_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    image, patch, channels, patches = _patches(c)
    labels = label_count(c)
    mean_pooling = c.bool("use_mean_pooling", default=True)
    pooler = b.ln(d) if mean_pooling else 0
    vocab = c.int("vocab_size", default=8192)
    masked = (c.architecture() or "").endswith("ForMaskedImageModeling")
    head, note, exact = _head(
        c,
        "beit",
        {
            "Model": (pooler, "its pooler" if pooler else "no pooler parameters"),
            "ForImageClassification": (
                pooler + _classifier(d, labels),
                f"its pooler and {labels}-class classifier",
            ),
            "ForMaskedImageModeling": (
                b.ln(d),
                f"its LayerNorm and its head over {vocab:,} visual tokens",
            ),
        },
    )
    embedding = d + channels * patch * patch * d + d
    if c.bool("use_mask_token", default=False):
        embedding += d
    if c.bool("use_absolute_position_embeddings", default=False):
        embedding += (patches + 1) * d
    side = image // patch
    table = ((2 * side - 1) ** 2 + 3) * h
    block_norms = 2 * b.ln(d)
    scale = c.raw.get("layer_scale_init_value")
    if scale is None or (isinstance(scale, int | float) and scale > 0):  # default 0.1
        block_norms += 2 * d
    if c.bool("use_relative_position_bias", default=False):
        block_norms += table
    shared = table if c.bool("use_shared_relative_position_bias", default=False) else 0
    attention, mlp = _vit_block(d, h, hd, inter, q_bias=True, k_bias=False, v_bias=True)
    return b.Blueprint(
        family="beit",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        # Only the masked-image-modelling head scores patches against a vocabulary.
        vocab=vocab if masked else 0,
        positions=patches + 1,
        tied=False,
        attention=attention,
        mlp=mlp,
        block_norms=block_norms,
        embedding=embedding,
        lm_head=d * vocab + vocab if masked else 0,
        outside=(0 if mean_pooling else b.ln(d)) + shared + head,
        notes=[
            note,
            _tokens_note(image, patch, 1, " and [CLS]"),
            "Relative position biases per block: the position table does not bound the image "
            "size, but the biases are interpolated for other sizes.",
        ],
        exact=exact,
    )


# ViT-MAE (modeling_vit_mae.py): ViTMAEModel is a ViT (a [CLS] token, a fixed sin-cos
# position table stored as a frozen parameter, the patch Conv2d with bias, blocks of q/k/v
# (bias: qkv_bias) and o and a GELU MLP, two LayerNorms, a final LayerNorm, no pooler) whose
# embeddings always drop mask_ratio of the patches (random_masking keeps
# int(patches x (1 - mask_ratio)); set mask_ratio 0 to encode them all).
# ViTMAEForPreTraining adds the decoder: decoder_embed (width to decoder_hidden_size, biased),
# a mask token, a frozen decoder position table, decoder_num_hidden_layers ViT blocks of the
# decoder's widths, a LayerNorm and decoder_pred to patch x patch x channels pixels.
def vit_mae_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    image, patch, channels, patches = _patches(c)
    ratio = mask_ratio(c, 0.75)
    visible = int(patches * (1 - ratio)) + 1  # and [CLS]
    qkv = c.bool("qkv_bias", default=True)
    block = _vit_block(d, h, hd, inter, q_bias=qkv, k_bias=qkv, v_bias=qkv)
    embedding = d + (patches + 1) * d + channels * patch * patch * d + d
    name = c.architecture() or ""
    masking = (
        f"the encoder reads the {visible} tokens mask_ratio {ratio:g} leaves visible "
        f"({visible - 1} of {patches} patches and [CLS])"
    )
    if name.endswith("ForPreTraining"):
        dd = c.int("decoder_hidden_size")
        return autoencoder_blueprint(
            c,
            "vit_mae",
            d=d,
            h=h,
            hd=hd,
            inter=inter,
            layers=layers,
            block=block,
            decoder_block=lambda dd, dh, dhd, dinter: _vit_block(
                dd, dh, dhd, dinter, q_bias=qkv, k_bias=qkv, v_bias=qkv
            ),
            embedding=embedding,
            encoder_extra=b.ln(d) + d * dd + dd,  # final LayerNorm, decoder_embed
            decoder_inputs=dd + (patches + 1) * dd,
            pixels=patch * patch * channels,
            tokens=patches + 1,
            visible=visible,
            notes=[
                f"Counted as {name}: the encoder and the pixel-reconstructing decoder.",
                f"A masked autoencoder: {masking}; its decoder reads all {patches + 1} (the "
                "sequence length counts these, one image's by default).",
                "The position tables are fixed sin-cos values stored as frozen parameters.",
            ],
        )
    known = name in ("", "ViTMAEModel")
    note = (
        f"Counted as {name or 'the bare vit_mae model'} (no pooler)."
        if known
        else f"Counted as the bare vit_mae model; the head of {name} is not counted."
    )
    return _vit_like(
        "vit_mae",
        d,
        layers,
        h,
        hd,
        inter,
        block,
        positions=visible,
        embedding=embedding,
        outside=b.ln(d),
        notes=[
            note,
            f"ViTMAEModel masks its input: {masking}, and the sequence length counts those.",
        ],
        exact=known,
    )


def _tubelets(c: Config) -> tuple[int, int, int]:
    """(frames per clip, frames per tubelet, tubelets along time) of a VideoMAE clip."""
    frames = c.int("num_frames", default=16)
    tubelet = c.int("tubelet_size", default=2)
    if tubelet > frames:
        raise ConfigError(
            f"config.json field 'tubelet_size' ({tubelet}) must not exceed num_frames ({frames})",
            field="tubelet_size",
        )
    return frames, tubelet, frames // tubelet


# VideoMAE (modeling_videomae.py): a Conv3d over tubelets of tubelet_size frames x patch x
# patch (biased); fixed sin-cos positions held as a plain tensor (not a parameter); blocks of
# query and value (bias: qv_bias), key (no bias), attention.output.dense, intermediate.dense and
# output.dense (biased) and two LayerNorms; a final LayerNorm only where not use_mean_pooling.
# VideoMAEForVideoClassification adds fc_norm (where use_mean_pooling) and the classifier.
# VideoMAEForPreTraining encodes the tubelets bool_masked_pos leaves visible and adds
# encoder_to_decoder (no bias), a mask token, the decoder's blocks, a LayerNorm and a head to
# tubelet_size x patch^2 x channels pixels. The mask is the caller's: the paper's tube masking
# hides 90 % of each frame's patches (Tong et al. 2022, arXiv:2203.12602), the default here
# (mask_ratio in config.json overrides it).
def videomae_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
    image, patch, channels, per_frame = _patches(c)
    frames, tubelet, slices = _tubelets(c)
    tokens = slices * per_frame
    # Released configs say qkv_bias, which VideoMAEConfig reads as qv_bias (key has no bias).
    qv = c.bool("qkv_bias", "qv_bias", default=True)
    names = ("query", "key", "value", "attention.output.dense")
    mlp_names = ("intermediate.dense", "output.dense")

    def block(d, h, hd, inter):
        return _vit_block(
            d, h, hd, inter, q_bias=qv, k_bias=False, v_bias=qv, names=names, mlp_names=mlp_names
        )

    mean_pooling = c.bool("use_mean_pooling", default=True)
    final_norm = 0 if mean_pooling else b.ln(d)
    embedding = channels * tubelet * patch * patch * d + d
    side = image // patch
    shape_note = (
        f"One {frames}-frame clip of {image} px is {tokens:,} tokens ({slices} tubelets of "
        f"{tubelet} frames x {side} x {side} patches of {patch} px, no [CLS])"
    )
    name = c.architecture() or ""
    if name.endswith("ForPreTraining"):
        dd = c.int("decoder_hidden_size")
        ratio = mask_ratio(c, 0.9)
        visible = slices * (per_frame - int(ratio * per_frame))
        return autoencoder_blueprint(
            c,
            "videomae",
            d=d,
            h=h,
            hd=hd,
            inter=inter,
            layers=layers,
            block=block(d, h, hd, inter),
            decoder_block=block,
            embedding=embedding,
            encoder_extra=final_norm + d * dd,  # final norm (if any), encoder_to_decoder
            decoder_inputs=dd,  # the mask token (its positions are fixed, not parameters)
            pixels=tubelet * patch * patch * channels,
            tokens=tokens,
            visible=visible,
            notes=[
                f"Counted as {name}: the encoder and the pixel-reconstructing decoder.",
                f"A masked autoencoder: {shape_note}; tube masking at {ratio:g} leaves "
                f"{visible:,} visible to the encoder and the decoder reads all {tokens:,} (the "
                "sequence length counts these, one clip's by default).",
            ],
        )
    labels = label_count(c)
    head, note, exact = _head(
        c,
        "videomae",
        {
            "Model": (0, "no pooler"),
            "ForVideoClassification": (
                (b.ln(d) if mean_pooling else 0) + _classifier(d, labels),
                f"its {labels}-class classifier",
            ),
        },
    )
    return _vit_like(
        "videomae",
        d,
        layers,
        h,
        hd,
        inter,
        block(d, h, hd, inter),
        positions=tokens,
        embedding=embedding,
        outside=final_norm + head,
        notes=[note, shape_note + "; the sequence length counts tokens, one clip's by default."],
        exact=exact,
    )


# Swin (modeling_swin.py) is four stages of different widths (96, 192, 384, 768 for Swin-T)
# over 56 x 56, 28 x 28, 14 x 14 and 7 x 7 tokens, joined by patch-merging layers, each block
# attending within 7 x 7 windows (shifted every other block). The engine's shape holds one
# width and one token count for all blocks (activations, attention and per-token FLOPs are
# sized from them), so any one of them would misstate the others by up to 8x: refused, with
# that reason, until the shape can hold stages.
def swin_refused(c: Config, family: str) -> b.Blueprint:
    depths = c.raw.get("depths")
    stages = len(depths) if isinstance(depths, list) and depths else 4
    raise ConfigError(
        f"The estimator cannot count Swin (model_type 'swin') yet: its {stages} stages have "
        "different widths and token counts (each a quarter of the tokens at twice the width "
        "of the one before) and attend within local windows, while the estimator sizes every "
        "block at one width and one sequence length, so it would misstate its memory or time "
        "several-fold. Enter its parameter count from the model card only for a rough "
        "answer: it would be sized as a plain transformer.",
        field="model_type",
    )


# Families registered only to be refused with their own reason (never listed as counted).
VISION_REFUSED = frozenset({"swin"})

VISION_ENCODERS = {
    "deit": deit_blueprint,
    "beit": beit_blueprint,
    "vit_mae": vit_mae_blueprint,
    "videomae": videomae_blueprint,
    "swin": swin_refused,
}
VISION_ARCHITECTURES = {
    "DeiTModel": "deit",
    "DeiTForImageClassification": "deit",
    "DeiTForImageClassificationWithTeacher": "deit",
    "DeiTForMaskedImageModeling": "deit",
    "BeitModel": "beit",
    "BeitForImageClassification": "beit",
    "BeitForMaskedImageModeling": "beit",
    "ViTMAEModel": "vit_mae",
    "ViTMAEForPreTraining": "vit_mae",
    "VideoMAEModel": "videomae",
    "VideoMAEForVideoClassification": "videomae",
    "VideoMAEForPreTraining": "videomae",
    "SwinModel": "swin",
    "SwinForImageClassification": "swin",
    "SwinForMaskedImageModeling": "swin",
}
