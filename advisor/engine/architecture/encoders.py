"""Encoder-only (BERT, RoBERTa, DistilBERT, ViT) and encoder-decoder (T5, BART, Whisper) families.

Encoder-only models are counted as the class config["architectures"][0] names (design.md): the
bare model with its pooler, or the masked-LM / classification head the name says; a head the
engine does not know leaves the bare model and a note. Encoder-decoders count both stacks; the
decoder is the block the formula repeats, the encoder is added whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads


@dataclass(frozen=True)
class Encoder:
    label: str
    hidden: tuple[str, ...] = ("hidden_size",)
    layers: tuple[str, ...] = ("num_hidden_layers",)
    heads: tuple[str, ...] = ("num_attention_heads",)
    intermediate: tuple[str, ...] = ("intermediate_size",)
    attn_names: tuple[str, ...] = ("query", "key", "value", "attention.output.dense")
    mlp_names: tuple[str, ...] = ("intermediate.dense", "output.dense")
    token_types: bool = True
    pooler: bool = True


ENCODERS = {
    "bert": Encoder("bert"),
    "roberta": Encoder("roberta"),
    "xlm-roberta": Encoder("roberta"),
    "distilbert": Encoder(
        "distilbert",
        hidden=("dim", "hidden_size"),
        layers=("n_layers", "num_hidden_layers"),
        heads=("n_heads", "num_attention_heads"),
        intermediate=("hidden_dim", "intermediate_size"),
        attn_names=("q_lin", "k_lin", "v_lin", "out_lin"),
        mlp_names=("lin1", "lin2"),
        token_types=False,
        pooler=False,
    ),
}


def label_count(c: Config) -> int:
    """The classes a task head scores: id2label's, else num_labels (2 by default)."""
    labels = c.raw.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    return c.int("num_labels", default=2)


def _encoder_head(c: Config, family: str, d: int, vocab: int) -> tuple[int, str]:
    """Parameters of the pooler and task head that architectures[0] names, and a note."""
    name = c.architecture() or ""
    num_labels = label_count(c)
    pooler = 0 if family == "distilbert" else d * d + d
    transform = d * d + d + b.ln(d)  # dense + LayerNorm before the tied vocabulary projection
    classifier = num_labels * d + num_labels
    head_of = {
        "Model": (pooler, "its pooler"),
        "ForMaskedLM": (transform + vocab, "its masked-LM head"),
        "ForPreTraining": (
            pooler + transform + vocab + 2 * d + 2,
            "its pooler, masked-LM and next-sentence heads",
        ),
        "ForQuestionAnswering": (2 * d + 2, "its span head"),
        "ForTokenClassification": (classifier, f"its {num_labels}-label token classifier"),
        "ForImageClassification": (classifier, f"its {num_labels}-class classifier"),
        "ForSequenceClassification": (
            (d * d + d + classifier, f"its {num_labels}-label classification head")
            if family in ("roberta", "distilbert")
            else (pooler + classifier, f"its pooler and {num_labels}-label classifier")
        ),
    }
    for suffix, (params, what) in head_of.items():
        if name.endswith(suffix):
            return params, f"Counted as {name} with {what} ({params:,} parameters)."
    return pooler, (
        f"Counted as the bare {family} model"
        + (f" with its pooler ({pooler:,} parameters)" if pooler else "")
        + (f"; the head of {name} is not counted." if name else ".")
    )


def encoder_block(
    d,
    h,
    hd,
    inter,
    attn_names=("query", "key", "value", "attention.output.dense"),
    mlp_names=("intermediate.dense", "output.dense"),
    *,
    qkv_bias=True,
):
    """BERT's block: q/k/v/o and a plain MLP, every projection with a bias."""
    up, down = mlp_names
    return [
        *b.attention(d, h, h, hd, names=attn_names, qkv_bias=qkv_bias, out_bias=True),
        b.lin(up, d, inter, True, "mlp_in"),
        b.lin(down, inter, d, True, "mlp_out"),
    ]


def encoder_blueprint(c: Config, family: str, spec: Encoder) -> b.Blueprint:
    d = c.int(*spec.hidden)
    layers = c.int(*spec.layers)
    h, kv, hd = heads(c, d, spec.heads)
    inter = c.int(*spec.intermediate)
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings")
    usable = positions
    if spec.label == "roberta":
        # RoBERTa numbers positions from padding_idx + 1 (transformers'
        # create_position_ids_from_input_ids): its table of 514 holds 512 tokens.
        usable = positions - (c.int("pad_token_id", default=1, minimum=0) + 1)
    types = c.int("type_vocab_size", default=2, minimum=0) if spec.token_types else 0
    block = encoder_block(d, h, hd, inter, spec.attn_names, spec.mlp_names)
    head, note = _encoder_head(c, spec.label, d, vocab)
    return b.Blueprint(
        family=spec.label,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=usable,
        tied=True,
        attention=block[:4],
        mlp=block[4:],
        block_norms=2 * b.ln(d),
        embedding=(vocab + positions + types) * d,
        lm_head=0,
        outside=b.ln(d) + head,  # the embedding LayerNorm, then the head
        notes=[note],
    )


def vit_blueprint(c: Config, family: str) -> b.Blueprint:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",))
    inter = c.int("intermediate_size")
    image = c.int("image_size", default=224)
    patch = c.int("patch_size", default=16)
    channels = c.int("num_channels", default=3)
    patches = (image // patch) ** 2
    block = encoder_block(d, h, hd, inter, qkv_bias=c.bool("qkv_bias", default=True))
    head, note = _encoder_head(c, family, d, 0)
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
        positions=patches + 1,
        tied=False,
        attention=block[:4],
        mlp=block[4:],
        block_norms=2 * b.ln(d),
        # [CLS] token, a position per patch and [CLS], the patch projection (a strided Conv2d).
        embedding=d + (patches + 1) * d + channels * patch * patch * d + d,
        lm_head=0,
        outside=b.ln(d) + head,
        notes=[note, f"One image is {patches + 1} tokens."],
    )


def t5_blueprint(c: Config, family: str) -> b.Blueprint:
    d = c.int("d_model")
    enc_layers = c.int("num_layers")
    dec_layers = c.int("num_decoder_layers", default=enc_layers)
    h = c.int("num_heads")
    hd = c.int("d_kv")
    inter = c.int("d_ff")
    vocab = c.int("vocab_size")
    buckets = c.int("relative_attention_num_buckets", default=32)
    tied = c.bool("tie_word_embeddings", default=True)
    gated = c.str("feed_forward_proj", "relu").startswith("gated-")
    mlp = (
        b.gated_mlp(d, inter, names=("wi_0", "wi_1", "wo"))
        if gated
        else b.mlp(d, inter, names=("wi", "wo"), bias=False)
    )
    self_attn = b.attention(d, h, h, hd, names=("q", "k", "v", "o"), prefix="SelfAttention.")
    cross_attn = b.attention(
        d, h, h, hd, names=("q", "k", "v", "o"), prefix="EncDecAttention.", role="cross_attn"
    )
    # RMSNorm without bias; the relative position bias lives in the first block of each stack
    # (every block in UMT5).
    rel_enc = enc_layers if family == "umt5" else 1
    rel_dec = dec_layers if family == "umt5" else 1
    encoder = enc_layers * (b.total(self_attn) + b.total(mlp) + 2 * d) + rel_enc * buckets * h + d
    return b.Blueprint(
        family=family,
        d=d,
        layers=dec_layers,
        h=h,
        kv=h,
        hd=hd,
        inter=inter,
        gated=gated,
        vocab=vocab,
        positions=c.opt_int("n_positions"),
        tied=tied,
        attention=[*self_attn, *cross_attn],
        mlp=mlp,
        block_norms=3 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=rel_dec * buckets * h + d,
        encoder=encoder,
        encoder_layers=enc_layers,
        notes=["T5 uses relative position buckets: sequence length is not fixed by the config."],
    )


def bart_blueprint(c: Config, family: str) -> b.Blueprint:
    """BART, mBART and Whisper: post-2019 fairseq encoder-decoders with biased projections."""
    d = c.int("d_model")
    enc_layers = c.int("encoder_layers")
    dec_layers = c.int("decoder_layers")
    heads(c, d, ("encoder_attention_heads",))
    h, kv, hd = heads(c, d, ("decoder_attention_heads",))
    enc_inter = c.int("encoder_ffn_dim")
    inter = c.int("decoder_ffn_dim")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=True)
    whisper = family == "whisper"

    def attn(prefix: str, role: str) -> list[b.LinearShape]:
        names = ("q_proj", "k_proj", "v_proj", "out_proj")
        linears = b.attention(
            d, h, kv, hd, names=names, prefix=prefix, qkv_bias=True, out_bias=True, role=role
        )
        if whisper:  # Whisper's k_proj has no bias
            linears[1] = linears[1].model_copy(update={"bias": False})
        return linears

    enc_block = b.total(attn("self_attn.", "attn")) + b.total(b.mlp(d, enc_inter, bias=True))
    encoder = enc_layers * (enc_block + 2 * b.ln(d))
    notes: list[str] = []
    source_positions = None
    if whisper:
        mels = c.int("num_mel_bins")
        source_positions = c.int("max_source_positions")
        positions = c.int("max_target_positions")
        # Two 1-D convolutions (kernel 3) over the mel spectrogram, then fixed sinusoidal
        # positions stored as an embedding (counted with the embeddings), and a final LayerNorm.
        encoder += (mels * d * 3 + d) + (d * d * 3 + d) + b.ln(d)
        embedding = vocab * d + positions * d + source_positions * d
        outside = b.ln(d)  # decoder final LayerNorm
        notes.append("Whisper's encoder always sees 30 s of audio: 1500 positions.")
    else:
        positions = c.int("max_position_embeddings")
        # Learned positions with 2 extra rows (fairseq offset) in each stack, and a LayerNorm
        # after each stack's embeddings; mBART adds a final LayerNorm per stack.
        encoder += b.ln(d)
        embedding = vocab * d + 2 * (positions + 2) * d
        outside = b.ln(d)
        if family == "mbart":
            encoder += b.ln(d)
            outside += b.ln(d)
    return b.Blueprint(
        family=family,
        d=d,
        layers=dec_layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=tied,
        attention=[*attn("self_attn.", "attn"), *attn("encoder_attn.", "cross_attn")],
        mlp=b.mlp(d, inter, bias=True),
        block_norms=3 * b.ln(d),
        embedding=embedding,
        lm_head=0 if tied else vocab * d,
        outside=outside,
        encoder=encoder,
        encoder_layers=enc_layers,
        encoder_positions=source_positions if whisper else None,
        notes=notes,
    )
