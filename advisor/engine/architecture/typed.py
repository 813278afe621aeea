"""A plausible shape around a parameter count typed by the researcher (or found on the Hub).

The count is kept as given; the shape is borrowed from the nearest well-known decoder so that
activation memory and FLOPs can be estimated, and the result says it is a guess (exact=False).
"""

from __future__ import annotations

import math

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import MAX_PARAMS, Config
from advisor.engine.architecture.model import ModelArchitecture
from advisor.engine.errors import ConfigError

# Decoder shapes of well-known models (hidden size, layers), from which a typed count borrows the
# nearest: GPT-2 124M/355M/774M/1.5B, Llama-2 7B/13B/70B, GPT-3 175B (Brown et al. 2020, table 2.1).
_REFERENCE_SHAPES = [
    (768, 12),
    (1024, 24),
    (1280, 36),
    (1600, 48),
    (2048, 24),
    (2560, 32),
    (4096, 32),
    (5120, 40),
    (6656, 60),
    (8192, 80),
    (12288, 96),
    (16384, 126),
]


def architecture_from_params(params: int, *, hint: dict | None = None) -> ModelArchitecture:
    """A plausible decoder for a typed-in count, so activations can be estimated (exact=False).

    `hint` may fix any of hidden_size, num_hidden_layers, num_attention_heads, vocab_size,
    intermediate_size, max_position_embeddings and params_active (MoE).
    """
    if isinstance(params, bool) or not isinstance(params, int) or params <= 0:
        raise ConfigError(
            f"The parameter count must be a positive integer, got {params!r}", field="params"
        )
    if params > MAX_PARAMS:
        raise ConfigError(
            f"{float(params):.3g} parameters is beyond any real model (limit {MAX_PARAMS:.0e})",
            field="params",
        )
    hint = dict(hint or {})
    h_cfg = Config(hint)
    vocab = h_cfg.int("vocab_size", default=32000)
    d = h_cfg.opt_int("hidden_size")
    if d is None:
        # Blocks hold ~12 d^2 parameters each; pick the reference shape whose size is nearest.
        def size(shape: tuple[int, int]) -> int:
            dd, ll = shape
            return 12 * dd * dd * ll + 2 * vocab * dd

        d = min(_REFERENCE_SHAPES, key=lambda s: abs(math.log(size(s) / params)))[0]
    layers = h_cfg.opt_int("num_hidden_layers")
    if layers is None:
        layers = max(1, round((params - 2 * vocab * d) / (12 * d * d)))
    h = h_cfg.int("num_attention_heads", default=max(1, d // 128))
    if d % h:
        raise ConfigError(
            f"hint field 'num_attention_heads' ({h}) must divide the hidden size ({d})",
            field="num_attention_heads",
        )
    inter = h_cfg.int("intermediate_size", default=4 * d)
    active = h_cfg.int("params_active", default=params)
    block = [*b.attention(d, h, h, d // h), *b.mlp(d, inter, bias=False)]
    return ModelArchitecture(
        family="unknown",
        architecture=None,
        num_layers=layers,
        hidden_size=d,
        num_attention_heads=h,
        num_kv_heads=h,
        head_dim=d // h,
        intermediate_size=inter,
        gated_mlp=False,
        vocab_size=vocab,
        max_position_embeddings=h_cfg.opt_int("max_position_embeddings"),
        tied_embeddings=False,
        layer_linears=block,
        params_total=params,
        params_active=min(active, params),
        params_embedding=vocab * d,
        params_lm_head=vocab * d,
        source="typed by researcher",
        exact=False,
        notes=[
            f"The count {params:,} is as typed; the shape ({layers} layers of width {d}) is "
            "a guess derived from it, so activation memory and FLOPs are approximate."
        ],
    )
