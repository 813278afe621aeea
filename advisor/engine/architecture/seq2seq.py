"""Translation and summarisation encoder-decoders after BART: Marian (OPUS-MT), M2M-100 and
NLLB-200 (model_type m2m_100), and Pegasus.

All three are fairseq-style stacks as transformers 5 builds them (modeling_marian.py,
modeling_m2m_100.py, modeling_pegasus.py): biased q/k/v/out projections, a plain fc1/fc2 MLP
with biases, a LayerNorm per sub-layer (two in an encoder block, three in a decoder block), one
token embedding shared by both stacks and tied to the LM head. They differ in where the norms
sit and what their sinusoidal positions are:

* Marian: post-norm like BART, but no embedding LayerNorm and no final LayerNorm. Its
  sinusoidal positions (MarianSinusoidalPositionalEmbedding) are a frozen nn.Embedding of
  max_position_embeddings rows in each stack: parameters (requires_grad False) that
  num_parameters() counts, though the checkpoints do not store them. Where
  share_encoder_decoder_embeddings is false, the encoder reads its own vocab_size table and
  the decoder its decoder_vocab_size one, which the LM head is tied to.
* M2M-100 / NLLB-200: pre-norm, a final LayerNorm after each stack, and sinusoidal positions
  kept as a non-persistent buffer (M2M100SinusoidalPositionalEmbedding): no parameters.
* Pegasus: pre-norm with a final LayerNorm per stack like M2M-100, and frozen nn.Embedding
  positions like Marian.

Marian and Pegasus add `final_logits_bias`, a (1, vocabulary) buffer, to the logits: a buffer,
not a parameter, so it is not counted (the checkpoints store it: the Hub's totals exceed the
count by one vocabulary row).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.errors import ConfigError


@dataclass(frozen=True)
class Seq2Seq:
    label: str
    pre_norm: bool  # a final LayerNorm after each stack (pre-norm blocks)
    position_parameters: bool  # sinusoids kept as a frozen nn.Embedding (counted) or a buffer
    split_vocab: bool = False  # Marian: share_encoder_decoder_embeddings may be false


SEQ2SEQ = {
    "marian": Seq2Seq("marian", pre_norm=False, position_parameters=True, split_vocab=True),
    "m2m_100": Seq2Seq("m2m_100", pre_norm=True, position_parameters=False),
    "pegasus": Seq2Seq("pegasus", pre_norm=True, position_parameters=True),
}
SEQ2SEQ_ARCHITECTURES = {
    "MarianMTModel": "marian",
    "MarianModel": "marian",
    "M2M100ForConditionalGeneration": "m2m_100",
    "M2M100Model": "m2m_100",
    "PegasusForConditionalGeneration": "pegasus",
    "PegasusModel": "pegasus",
}


def _attention(d: int, h: int, hd: int, prefix: str, role: str) -> list[b.LinearShape]:
    return b.attention(
        d,
        h,
        h,
        hd,
        names=("q_proj", "k_proj", "v_proj", "out_proj"),
        prefix=prefix,
        qkv_bias=True,
        out_bias=True,
        role=role,
    )


def token_tables(
    d: int, vocab: int, dec_vocab: int, *, tied: bool, shared: bool, bare: bool
) -> tuple[int, int]:
    """(token embedding parameters, LM head parameters) of a BART-style encoder-decoder.

    transformers 5 ties weights only where tie_word_embeddings is true
    (PreTrainedModel.get_expanded_tied_weights_keys returns nothing otherwise), and that one
    flag governs every tie in `_tied_weights_keys`: the encoder's and decoder's embed_tokens to
    `shared` as well as the LM head. Tied, the model holds one table (Marian without shared
    embeddings: the encoder's and the decoder's, the head tied to the decoder's); untied, the
    shared table, each stack's own and the head are four separate matrices (the bare model has
    no head)."""
    if tied:
        return vocab * d + (0 if shared else dec_vocab * d), 0
    tables = (vocab * d if shared else 0) + vocab * d + dec_vocab * d
    return tables, 0 if bare else dec_vocab * d


def seq2seq_blueprint(c: Config, family: str) -> b.Blueprint:
    spec = SEQ2SEQ[family]
    d = c.int("d_model")
    enc_layers = c.int("encoder_layers")
    dec_layers = c.int("decoder_layers")
    _, _, enc_hd = heads(c, d, ("encoder_attention_heads",))
    enc_h = c.int("encoder_attention_heads")
    h, kv, hd = heads(c, d, ("decoder_attention_heads",))
    enc_inter = c.int("encoder_ffn_dim")
    inter = c.int("decoder_ffn_dim")
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings")
    tied = c.bool("tie_word_embeddings", default=True)
    shared = not spec.split_vocab or c.bool("share_encoder_decoder_embeddings", default=True)
    dec_vocab = vocab if shared else c.int("decoder_vocab_size", default=vocab)
    architecture = c.architecture() or ""
    if architecture and not architecture.endswith(("ForConditionalGeneration", "MTModel", "Model")):
        raise ConfigError(
            f"The estimator cannot count {architecture}: it counts the {family} translation / "
            "generation model (and the bare model), not this head. Enter the parameter count "
            "from the model card instead.",
            field="architectures",
        )
    bare = architecture.endswith("Model") and not architecture.endswith("MTModel")

    enc_block = b.total(_attention(d, enc_h, enc_hd, "self_attn.", "attn"))
    enc_block += b.total(b.mlp(d, enc_inter, bias=True)) + 2 * b.ln(d)
    final_norm = b.ln(d) if spec.pre_norm else 0
    table = positions * d if spec.position_parameters else 0
    # Each stack has its own position table; the encoder's is counted with the embeddings.
    encoder = enc_layers * enc_block + final_norm
    tables, lm_head = token_tables(d, vocab, dec_vocab, tied=tied, shared=shared, bare=bare)
    embedding = tables + 2 * table
    notes = [
        f"{enc_layers} encoder and {dec_layers} decoder layers; the decoder's length is the "
        "target's (new_tokens when training)."
    ]
    if spec.position_parameters:
        notes.append(
            f"Sinusoidal positions: a frozen table of {positions:,} rows per stack (counted, "
            "never trained); inputs are limited to that length."
        )
    else:
        notes.append(
            f"Sinusoidal positions computed on the fly (a buffer, not counted); trained on "
            f"inputs of up to {positions:,} tokens."
        )
    if family != "m2m_100":
        notes.append("final_logits_bias (one value per vocabulary entry) is a buffer: not counted.")
    return b.Blueprint(
        family=family,
        d=d,
        layers=dec_layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=dec_vocab,
        positions=positions,
        tied=tied,
        attention=[
            *_attention(d, h, hd, "self_attn.", "attn"),
            *_attention(d, h, hd, "encoder_attn.", "cross_attn"),
        ],
        mlp=b.mlp(d, inter, bias=True),
        block_norms=3 * b.ln(d),
        embedding=embedding,
        lm_head=lm_head,
        outside=final_norm,
        encoder=encoder,
        encoder_layers=enc_layers,
        notes=notes,
    )
