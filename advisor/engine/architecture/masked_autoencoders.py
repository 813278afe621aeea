"""A masked autoencoder's pre-training model (ViTMAEForPreTraining, VideoMAEForPreTraining)
counted as one of the engine's encoder-decoders: the encoder reads only the tokens the mask
leaves visible, at its own widths (StackWidths), and the narrower decoder, with its norm and
pixel head, reconstructs every token. vision.py's readers give each family's encoder and
decoder blocks; this module gives the mask ratio, the decoder's widths and the Blueprint.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.model import StackWidths
from advisor.engine.errors import ConfigError


def mask_ratio(c: Config, default: float) -> float:
    ratio = c.raw.get("mask_ratio", default)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio < 1:
        raise ConfigError(
            f"config.json field 'mask_ratio' must be a number from 0 to below 1, got {ratio!r}",
            field="mask_ratio",
        )
    return float(ratio)


def decoder_dims(c: Config) -> tuple[int, int, int, int, int]:
    """A masked autoencoder's decoder: (width, layers, heads, head dim, MLP width)."""
    dd = c.int("decoder_hidden_size")
    dh = c.int("decoder_num_attention_heads")
    if dd % dh:
        raise ConfigError(
            f"config.json field 'decoder_num_attention_heads' ({dh}) must divide the decoder's "
            f"hidden size ({dd})",
            field="decoder_num_attention_heads",
        )
    return dd, c.int("decoder_num_hidden_layers"), dh, dd // dh, c.int("decoder_intermediate_size")


def autoencoder_blueprint(
    c: Config,
    family: str,
    *,
    d: int,
    h: int,
    hd: int,
    inter: int,
    layers: int,
    block: tuple[list[b.LinearShape], list[b.LinearShape]],
    decoder_block,
    embedding: int,
    encoder_extra: int,
    decoder_inputs: int,
    pixels: int,
    tokens: int,
    visible: int,
    notes: list[str],
) -> b.Blueprint:
    """A masked autoencoder's pre-training model as an encoder-decoder: the encoder (blocks,
    `encoder_extra`: its final norm and the projection to the decoder's width) over `visible`
    tokens, the decoder (blocks, norm, pixel head) over all `tokens`."""
    dd, dec_layers, dh, dhd, dinter = decoder_dims(c)
    attention, mlp = block
    enc_norms = 2 * b.ln(d)
    encoder = layers * (b.total(attention) + b.total(mlp) + enc_norms) + encoder_extra
    dec_attention, dec_mlp = decoder_block(dd, dh, dhd, dinter)
    return b.Blueprint(
        family=family,
        d=dd,
        layers=dec_layers,
        h=dh,
        kv=dh,
        hd=dhd,
        inter=dinter,
        gated=False,
        vocab=0,
        positions=tokens,
        tied=False,
        attention=dec_attention,
        mlp=dec_mlp,
        block_norms=2 * b.ln(dd),
        # the encoder's patch projection and tables, the decoder's mask token and positions
        embedding=embedding + decoder_inputs,
        lm_head=0,
        outside=b.ln(dd) + dd * pixels + pixels,  # the decoder's norm and pixel head
        encoder=encoder,
        encoder_layers=layers,
        encoder_positions=visible,
        encoder_widths=StackWidths(
            hidden_size=d, num_attention_heads=h, head_dim=hd, intermediate_size=inter
        ),
        notes=notes,
    )
