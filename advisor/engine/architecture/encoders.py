"""Encoder-only (BERT, RoBERTa, CamemBERT, DistilBERT, MPNet, Longformer, ViT) and
encoder-decoder (T5, BART, Whisper) families.

Encoder-only models are counted as the class config["architectures"][0] names (design.md): the
bare model with its pooler, or the masked-LM / classification head the name says; a head the
engine does not know leaves the bare model and a note. Encoder-decoders count both stacks; the
decoder is the block the formula repeats, the encoder is added whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, check_int, encoder_dims, heads
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.architecture.seq2seq import token_tables
from advisor.engine.errors import ConfigError


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
    # RoBERTa's habits: positions numbered from padding_idx + 1, and a sequence-classification
    # head of dense + out_proj over the first token instead of the pooler.
    roberta_like: bool = False
    # MPNet: one table of relative_attention_num_buckets x heads position biases, shared by
    # every block (MPNetEncoder.relative_attention_bias).
    relative_bias: bool = False
    # Longformer: every block also has query_global / key_global / value_global projections for
    # the tokens given global attention, and attends locally within attention_window.
    local_attention: bool = False


ENCODERS = {
    "bert": Encoder("bert"),
    "roberta": Encoder("roberta", roberta_like=True),
    "xlm-roberta": Encoder("roberta", roberta_like=True),
    # CamemBERT (modeling_camembert.py) is RoBERTa's code under another name, as XLM-R is.
    "camembert": Encoder("roberta", roberta_like=True),
    # MPNet (modeling_mpnet.py): RoBERTa's embeddings without token types, blocks whose
    # projections are named q/k/v/o, the relative position bias table.
    "mpnet": Encoder(
        "mpnet",
        attn_names=("q", "k", "v", "o"),
        token_types=False,
        roberta_like=True,
        relative_bias=True,
    ),
    # Longformer (modeling_longformer.py): RoBERTa with the global projections and local
    # attention (allenai/longformer-*-4096 were initialised from RoBERTa).
    "longformer": Encoder("longformer", roberta_like=True, local_attention=True),
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
            if family in ("roberta", "distilbert", "mpnet", "longformer")
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
    if spec.roberta_like:
        # RoBERTa numbers positions from padding_idx + 1 (transformers'
        # create_position_ids_from_input_ids): its table of 514 holds 512 tokens.
        usable = positions - (c.int("pad_token_id", default=1, minimum=0) + 1)
    types = c.int("type_vocab_size", default=2, minimum=0) if spec.token_types else 0
    block = encoder_block(d, h, hd, inter, spec.attn_names, spec.mlp_names)
    head, note = _encoder_head(c, spec.label, d, vocab)
    notes = [note]
    extra = 0
    if spec.relative_bias:
        extra += c.int("relative_attention_num_buckets", default=32) * h
    groups: list[AttentionGroup] = []
    if spec.local_attention:
        block[3:3] = [
            b.lin(f"{name}_global", d, h * hd, True, f"attn_global_{name[0]}")
            for name in ("query", "key", "value")
        ]
        groups, window_note = _local_attention_groups(c, layers, h * hd, h, hd)
        notes.append(window_note)
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
        attention=block[:-2],
        mlp=block[-2:],
        block_norms=2 * b.ln(d),
        embedding=(vocab + positions + types) * d,
        lm_head=0,
        outside=b.ln(d) + extra + head,  # the embedding LayerNorm, position biases, the head
        notes=notes,
        attention_groups=groups,
    )


def _local_attention_groups(
    c: Config, layers: int, width: int, h: int, hd: int
) -> tuple[list[AttentionGroup], str]:
    """Longformer's local attention: a block's attention_window (one for all blocks, or one per
    block) is the whole window, attention_window / 2 tokens on each side of each token
    (LongformerSelfAttention.one_sided_attn_window_size). The groups' `window` is that one-sided
    half, so a token reads about attention_window keys (ModelShape.attention_reads). The tokens
    given global attention (a classifier's <s>, a QA question) attend to and are attended by
    all; they are few and not counted. transformers computes the band in overlapping chunks,
    which does up to ~1.75x the band's score FLOPs; the band is what is counted."""
    raw = c.raw.get("attention_window", 512)
    windows = raw if isinstance(raw, list) else [raw] * layers
    if len(windows) != layers or not all(
        isinstance(w, int) and not isinstance(w, bool) and w > 0 and w % 2 == 0 for w in windows
    ):
        raise ConfigError(
            "config.json field 'attention_window' must be an even positive integer or a list "
            f"of one per layer ({layers}), got {str(raw)[:80]}",
            field="attention_window",
        )
    for w in windows:
        check_int(w, "attention_window")
    groups = [
        AttentionGroup(
            layers=windows.count(w), query_width=width, kv_heads=h, head_dim=hd, window=w // 2
        )
        for w in sorted(set(windows))
    ]
    shown = ", ".join(f"{w:,}" for w in sorted(set(windows)))
    return groups, (
        f"Local attention: each token attends to a window of {shown} tokens around it (plus the "
        "few tokens given global attention), so attention grows linearly with the sequence."
    )


def vit_blueprint(c: Config, family: str) -> b.Blueprint:
    d, layers, h, kv, hd, inter = encoder_dims(c)
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
    lm_head = 0 if tied else vocab * d  # Whisper: proj_out, tied to the decoder's embed_tokens

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
        architecture = c.architecture() or ""
        tables, lm_head = token_tables(
            d, vocab, vocab, tied=tied, shared=True, bare=architecture.endswith("Model")
        )
        embedding = tables + 2 * (positions + 2) * d
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
        lm_head=lm_head,
        outside=outside,
        encoder=encoder,
        encoder_layers=enc_layers,
        encoder_positions=source_positions if whisper else None,
        notes=notes,
    )
