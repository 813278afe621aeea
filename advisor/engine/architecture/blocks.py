"""The one parameter-count formula, and the layer builders every family shares.

A transformer is counted as Megatron's memory report does it: embeddings, then `layers` blocks
(attention + MLP or experts + norms), then what sits outside the blocks (final norm, pooler,
task head, projections), then the LM head (0 when tied). Blocks differ only where a MoE mixes
dense and sparse blocks or a hybrid mixes softmax and linear attention (Qwen3.5). Families
differ only in the Blueprint they fill in; `assemble` is the only place that adds the pieces up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from advisor.engine.architecture.config import MAX_PARAMS, Config
from advisor.engine.architecture.model import (
    AttentionGroup,
    Frontend,
    LinearAttention,
    LinearShape,
    ModelArchitecture,
    StackWidths,
)
from advisor.engine.errors import ConfigError


def lin(
    name: str, i: int, o: int, bias: bool, role: str, count: int = 1, module: bool = True
) -> LinearShape:
    return LinearShape(
        name=name,
        in_features=i,
        out_features=o,
        bias=bias,
        role=role,
        count_per_layer=count,
        module=module,
    )


def total(linears: Iterable[LinearShape]) -> int:
    return sum(x.params for x in linears)


def attention(
    d: int,
    h: int,
    kv: int,
    hd: int,
    *,
    names=("q_proj", "k_proj", "v_proj", "o_proj"),
    qkv_bias: bool = False,
    out_bias: bool = False,
    prefix: str = "",
    role: str = "attn",
) -> list[LinearShape]:
    """Separate q/k/v/o projections (grouped-query when kv < h)."""
    q, k, v, o = names
    return [
        lin(prefix + q, d, h * hd, qkv_bias, f"{role}_q"),
        lin(prefix + k, d, kv * hd, qkv_bias, f"{role}_k"),
        lin(prefix + v, d, kv * hd, qkv_bias, f"{role}_v"),
        lin(prefix + o, h * hd, d, out_bias, f"{role}_out"),
    ]


def fused_attention(
    d: int,
    h: int,
    kv: int,
    hd: int,
    *,
    qkv: str,
    out: str,
    bias: bool,
    out_bias: bool | None = None,
) -> list[LinearShape]:
    return [
        lin(qkv, d, (h + 2 * kv) * hd, bias, "attn_qkv"),
        lin(out, h * hd, d, bias if out_bias is None else out_bias, "attn_out"),
    ]


def mlp(d: int, inter: int, *, names=("fc1", "fc2"), bias: bool) -> list[LinearShape]:
    up, down = names
    return [lin(up, d, inter, bias, "mlp_in"), lin(down, inter, d, bias, "mlp_out")]


def gated_mlp(
    d: int,
    inter: int,
    *,
    names=("gate_proj", "up_proj", "down_proj"),
    bias=False,
    prefix: str = "",
    role: str = "mlp",
    count: int = 1,
    module: bool = True,
) -> list[LinearShape]:
    gate, up, down = names
    return [
        lin(prefix + gate, d, inter, bias, f"{role}_gate", count, module),
        lin(prefix + up, d, inter, bias, f"{role}_up", count, module),
        lin(prefix + down, inter, d, bias, f"{role}_down", count, module),
    ]


def ln(d: int) -> int:  # LayerNorm: weight and bias
    return 2 * d


@dataclass
class Experts:
    """The sparse part of a mixture-of-experts block, and which blocks have it."""

    router: list[LinearShape]
    routed: list[LinearShape]  # count_per_layer = number of routed experts
    shared: list[LinearShape]
    experts: int
    per_token: int
    shared_experts: int
    intermediate: int
    sparse_layers: int
    router_extra: int = 0  # per sparse block: DeepSeek-V3's expert score-correction bias

    @property
    def params(self) -> int:
        return total([*self.router, *self.routed, *self.shared]) + self.router_extra

    @property
    def idle_per_token(self) -> int:
        return (self.experts - self.per_token) * total(self.routed) // self.experts


@dataclass
class Blueprint:
    """Everything the formula needs; one per counted model."""

    family: str
    d: int
    layers: int
    h: int
    kv: int
    hd: int
    inter: int
    gated: bool
    vocab: int
    positions: int | None
    tied: bool
    attention: list[LinearShape]
    mlp: list[LinearShape]  # the dense MLP (of every block, or of the dense blocks of a MoE)
    block_norms: int  # norms (and other non-Linear parameters) of one block
    embedding: int
    lm_head: int
    outside: int = 0  # final norm, pooler, task head, projections
    encoder: int = 0
    encoder_layers: int = 0
    encoder_positions: int | None = None  # ModelArchitecture.encoder_positions
    experts: Experts | None = None
    notes: list[str] = field(default_factory=list)
    exact: bool = True
    source: str | None = None
    kv_cache_width: int | None = None
    # A hybrid (Qwen3.5): `hybrid.layers` of the blocks replace `attention` with these
    # linear-attention projections plus `linear_attention_norms` other parameters (short
    # convolution, decay and step parameters, gated norm); `attention_norms` are the softmax
    # attention's own (q/k norms), which the other blocks lack.
    linear_attention: list[LinearShape] = field(default_factory=list)
    linear_attention_norms: int = 0
    attention_norms: int = 0
    hybrid: LinearAttention | None = None
    stored_extras: dict[str, int] = field(default_factory=dict)  # ModelArchitecture's
    attention_groups: list[AttentionGroup] = field(default_factory=list)  # ModelArchitecture's
    # Parameters an average token does not pass through beyond idle experts: a dual encoder's
    # image patches skip its text tower and its text tokens its vision tower (CLIP, SigLIP).
    idle: int = 0
    # ModelArchitecture's: a masked autoencoder's encoder widths (ViT-MAE, VideoMAE).
    encoder_widths: StackWidths | None = None
    frontend: Frontend | None = None  # ModelArchitecture's (speech encoders' feature encoder)
    eager_attention: bool = False  # ModelArchitecture's (WavLM)
    residual_streams: int = 1  # ModelArchitecture's (Gemma 3n's AltUp)
    # The part of `outside` that encodes an image or audio clip once per request (vision
    # towers, audio encoders and their projectors): ModelArchitecture.params_input_towers.
    input_towers: int = 0


def in_layers(linears: Iterable[LinearShape], count: int) -> list[LinearShape]:
    """These layers, present in `count` blocks only (a hybrid's or Gemma 4's layer kinds)."""
    return [lin.model_copy(update={"layers": count}) for lin in linears]


def _in_blocks(linears: list[LinearShape], blocks: int, every: int) -> list[LinearShape]:
    """The layers, marked with how many blocks have them where that is not every block (a
    layer that already says so, as Gemma 4's per-kind projections do, keeps its own)."""
    return [
        lin.model_copy(update={"layers": blocks}) if lin.layers is None and blocks != every else lin
        for lin in linears
    ]


def _in_all(linears: list[LinearShape], blocks: int) -> int:
    """Parameters of these layers over the `blocks` that have them (or each its own count)."""
    return sum(lin.params * (blocks if lin.layers is None else lin.layers) for lin in linears)


def assemble(c: Config, bp: Blueprint) -> ModelArchitecture:
    """Total = embeddings + blocks (softmax or linear attention; dense MLP or experts) + encoder
    + outside + LM head."""
    moe = bp.experts
    sparse = moe.sparse_layers if moe else 0
    dense = bp.layers - sparse
    linear = bp.hybrid.layers if bp.hybrid else 0
    softmax = bp.layers - linear
    params = (
        bp.embedding
        + _in_all(bp.attention, softmax)
        + softmax * bp.attention_norms
        + _in_all(bp.linear_attention, linear)
        + linear * bp.linear_attention_norms
        + bp.layers * bp.block_norms
        + _in_all(bp.mlp, dense)
        + (sparse * moe.params if moe else 0)
        + bp.encoder
        + bp.outside
        + bp.lm_head
    )
    if params > MAX_PARAMS:
        raise ConfigError(
            f"config.json describes {params:.3g} parameters, beyond any real model "
            f"(limit {MAX_PARAMS:.0e})",
            field="config.json",
        )
    active = params - (sparse * moe.idle_per_token if moe else 0) - bp.idle
    linears = [
        *_in_blocks(bp.attention, softmax, bp.layers),
        *_in_blocks(bp.linear_attention, linear, bp.layers),
        *(_in_blocks(moe.router + moe.routed + moe.shared, sparse, bp.layers) if moe else []),
        *(_in_blocks(bp.mlp, dense, bp.layers) if dense else []),
    ]
    return ModelArchitecture(
        family=bp.family,
        architecture=c.architecture(),
        is_encoder_decoder=bp.encoder_layers > 0,
        num_layers=bp.layers,
        encoder_layers=bp.encoder_layers,
        params_encoder=bp.encoder,
        encoder_positions=bp.encoder_positions,
        hidden_size=bp.d,
        num_attention_heads=bp.h,
        num_kv_heads=bp.kv,
        head_dim=bp.hd,
        intermediate_size=bp.inter,
        gated_mlp=bp.gated,
        vocab_size=bp.vocab,
        max_position_embeddings=bp.positions,
        tied_embeddings=bp.tied,
        num_experts=moe.experts if moe else 0,
        experts_per_token=moe.per_token if moe else 0,
        shared_experts=moe.shared_experts if moe else 0,
        moe_intermediate_size=moe.intermediate if moe else None,
        layer_linears=linears,
        params_total=params,
        params_active=active,
        params_embedding=bp.embedding,
        params_lm_head=bp.lm_head,
        source=bp.source or f"config.json ({bp.family})",
        exact=bp.exact,
        notes=bp.notes,
        kv_cache_width=bp.kv_cache_width,
        linear_attention=bp.hybrid,
        stored_extras=bp.stored_extras,
        attention_groups=bp.attention_groups,
        encoder_widths=bp.encoder_widths,
        frontend=bp.frontend,
        eager_attention=bp.eager_attention,
        residual_streams=bp.residual_streams,
        params_input_towers=bp.input_towers,
    )
