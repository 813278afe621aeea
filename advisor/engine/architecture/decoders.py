"""Decoder-only families as data: which config keys give each size, which layers a block holds.

One `Decoder` row per family describes what transformers builds for it (modeling_<family>.py):
the attention layout (separate, fused, latent), the MLP (plain, gated, fused gated), biases,
norms, position tables, the LM head and, for mixtures of experts, the expert layout. The row's
defaults are those of each family's transformers configuration class. `blueprint` turns a row
and a config into the Blueprint that `blocks.assemble` counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.errors import ConfigError

# A flag is a constant, or (config key, default); a key starting with "!" is read inverted.
Flag = bool | tuple[str, bool]


def flag(c: Config, value: Flag) -> bool:
    if isinstance(value, bool):
        return value
    key, default = value
    if key.startswith("!"):
        return not c.bool(key[1:], default=not default)
    return c.bool(key, default=default)


@dataclass(frozen=True)
class Moe:
    experts: str  # config key of the routed-expert count
    intermediate: str | None = "moe_intermediate_size"  # None: intermediate_size
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    # "" | "qwen" (one shared expert + gate) | "deepseek" (n_shared_experts) | "one" (one
    # shared expert of the routed experts' size, no gate: Llama 4)
    shared: str = ""
    # all | qwen (decoder_sparse_step, mlp_only_layers) | deepseek | interleave (Llama 4:
    # moe_layers, else every interleave_moe_layer_step-th layer) | types (DeepSeek-V3.2:
    # mlp_layer_types' "sparse" layers, else as first_k) | first_k (all but the first
    # first_k_dense_replace, `dense_default` when absent: GLM-4.5V)
    layers: str = "all"
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias
    dense_default: int = 3  # first_k_dense_replace's default where `layers` reads it
    bias: bool = False  # biases on every expert projection and on the router (gpt-oss)
    router: str = "gate"  # the router's module name
    # Experts and router are nn.Linear modules; False: parameter tensors (gpt-oss), which
    # PEFT's "all-linear" does not adapt.
    modules: bool = True


@dataclass(frozen=True)
class Dims:
    d: int
    layers: int
    h: int
    kv: int
    hd: int
    inter: int
    vocab: int
    positions: int | None


@dataclass(frozen=True)
class Decoder:
    label: str = ""  # the family name reported, when not the registry key
    hidden: tuple[str, ...] = ("hidden_size",)
    layers: tuple[str, ...] = ("num_hidden_layers",)
    heads: tuple[str, ...] = ("num_attention_heads",)
    kv_heads: tuple[str, ...] = ("num_key_value_heads",)  # () = one K/V head per query head
    intermediate: tuple[str, ...] = ("intermediate_size",)
    inter_default: int | None = None  # multiple of the hidden size when the key is absent
    positions: tuple[str, ...] = ("max_position_embeddings",)
    position_table: int | None = None  # None: rotary/ALiBi; n: learned table with n extra rows
    attention: str = "separate"  # separate | fused | latent
    attn_names: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    qkv_bias: Flag = ("attention_bias", False)
    out_bias: Flag = ("attention_bias", False)
    mlp: str = "gated"  # gated | plain | fused_gated
    mlp_names: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
    mlp_bias: Flag = ("mlp_bias", False)
    norm: str = "rms"  # rms (weight) | ln (weight + bias) | none (no parameters)
    norm_bias: Flag = True  # for ln: False when the family builds LayerNorm(bias=False)
    norms_per_block: int = 2
    qk_norm: str = ""  # "" | head (per head_dim) | full (over all heads) | ln_head (if flagged)
    final_norm: bool = True
    tied: Flag = ("tie_word_embeddings", False)
    lm_head_bias: Flag = False
    embed_norm: bool = False  # BLOOM's word_embeddings_layernorm
    moe: Moe | None = None
    shape: Callable[[Config, Dims], Dims] | None = None  # family-specific head layouts
    adjust: Callable[[Config, b.Blueprint], b.Blueprint] | None = None
    notes: tuple[str, ...] = ()


def _dims(c: Config, spec: Decoder) -> Dims:
    d = c.int(*spec.hidden)
    layers = c.int(*spec.layers)
    h, kv, hd = (
        (c.int(*spec.heads), 0, 0)
        if spec.attention == "latent"
        else heads(c, d, spec.heads, spec.kv_heads)
    )
    default = spec.inter_default * d if spec.inter_default else None
    inter = c.int(*spec.intermediate, default=default) if spec.intermediate else default
    positions = None
    if spec.position_table is not None:
        positions = c.int(*spec.positions)
    elif spec.positions:
        positions = c.opt_int(*spec.positions)
    dims = Dims(d, layers, h, kv, hd, inter or 0, c.int("vocab_size"), positions)
    return spec.shape(c, dims) if spec.shape else dims


def _norm(c: Config, spec: Decoder, d: int) -> int:
    if spec.norm == "none":
        return 0
    if spec.norm == "rms":
        return d
    return b.ln(d) if flag(c, spec.norm_bias) else d


def _attention(c: Config, spec: Decoder, x: Dims) -> list[b.LinearShape]:
    qkv_bias, out_bias = flag(c, spec.qkv_bias), flag(c, spec.out_bias)
    if spec.attention == "fused":
        qkv, out = spec.attn_names
        return b.fused_attention(
            x.d, x.h, x.kv, x.hd, qkv=qkv, out=out, bias=qkv_bias, out_bias=out_bias
        )
    return b.attention(
        x.d, x.h, x.kv, x.hd, names=spec.attn_names, qkv_bias=qkv_bias, out_bias=out_bias
    )


def _mlp(c: Config, spec: Decoder, d: int, inter: int) -> list[b.LinearShape]:
    bias = flag(c, spec.mlp_bias)
    if spec.mlp == "plain":
        return b.mlp(d, inter, names=spec.mlp_names, bias=bias)
    if spec.mlp == "fused_gated":
        gate_up, down = spec.mlp_names
        return [
            b.lin(gate_up, d, 2 * inter, bias, "mlp_gate_up"),
            b.lin(down, inter, d, bias, "mlp_down"),
        ]
    return b.gated_mlp(d, inter, names=spec.mlp_names, bias=bias)


def _qk_norm(c: Config, spec: Decoder, x: Dims) -> int:
    if spec.qk_norm == "head":  # Qwen3, Gemma 3: RMSNorm(head_dim) on q and on k
        return 2 * x.hd
    if spec.qk_norm == "full":  # OLMo 2: RMSNorm over all query heads and all key heads
        return (x.h + x.kv) * x.hd
    if spec.qk_norm == "ln_head" and c.bool("qk_layernorm", default=False):
        return 2 * b.ln(x.hd)  # Phi-1/2's optional LayerNorm(head_dim) on q and k
    return 0


def blueprint(c: Config, family: str, spec: Decoder) -> b.Blueprint:
    """The Blueprint of one decoder-only model from its config and its family's row."""
    x = _dims(c, spec)
    tied = flag(c, spec.tied)
    norm = _norm(c, spec, x.d)
    embedding = x.vocab * x.d
    if spec.position_table is not None:
        embedding += (x.positions + spec.position_table) * x.d
    bp = b.Blueprint(
        family=spec.label or family,
        d=x.d,
        layers=x.layers,
        h=x.h,
        kv=x.kv,
        hd=x.hd,
        inter=x.inter,
        gated=spec.mlp != "plain",
        vocab=x.vocab,
        positions=x.positions,
        tied=tied,
        attention=[] if spec.attention == "latent" else _attention(c, spec, x),
        mlp=_mlp(c, spec, x.d, x.inter),
        block_norms=spec.norms_per_block * norm + _qk_norm(c, spec, x),
        embedding=embedding,
        lm_head=0 if tied else x.vocab * x.d + (x.vocab if flag(c, spec.lm_head_bias) else 0),
        outside=(norm if spec.final_norm else 0) + (norm if spec.embed_norm else 0),
        notes=list(spec.notes),
    )
    if spec.attention == "latent":
        bp = _latent_attention(c, bp)
    if spec.moe:
        bp = replace(bp, experts=_experts(c, spec.moe, bp))
    return spec.adjust(c, bp) if spec.adjust else bp


def _latent_attention(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """DeepSeek-V2/V3 multi-head latent attention (DeepSeek-V2 paper, arXiv:2405.04434 §2.1)."""
    d, h = bp.d, bp.h
    q_rank = c.opt_int("q_lora_rank")
    kv_rank = c.int("kv_lora_rank")
    rope = c.int("qk_rope_head_dim")
    nope = c.int("qk_nope_head_dim")
    v_dim = c.int("v_head_dim")
    bias = c.bool("attention_bias", default=False)
    q_dim = h * (nope + rope)
    if q_rank:
        linears = [
            b.lin("q_a_proj", d, q_rank, bias, "attn_q"),
            b.lin("q_b_proj", q_rank, q_dim, False, "attn_q"),
        ]
        norms = q_rank + kv_rank
    else:
        linears = [b.lin("q_proj", d, q_dim, False, "attn_q")]
        norms = kv_rank
    linears += [
        b.lin("kv_a_proj_with_mqa", d, kv_rank + rope, bias, "attn_kv"),
        b.lin("kv_b_proj", kv_rank, h * (nope + v_dim), False, "attn_kv"),
        b.lin("o_proj", h * v_dim, d, bias, "attn_out"),
    ]
    notes = [f"Multi-head latent attention caches {kv_rank + rope} values per token and layer."]
    if c.opt_int("num_nextn_predict_layers", minimum=0):
        notes.append(
            "The multi-token-prediction module stored in the checkpoint is not counted "
            "(transformers does not load it)."
        )
    return replace(
        bp,
        attention=linears,
        kv=h,
        hd=nope + rope,
        block_norms=bp.block_norms + norms,
        kv_cache_width=kv_rank + rope,
        notes=[*bp.notes, *notes],
    )


def _sparse_layers(c: Config, moe: Moe, layers: int) -> int:
    if moe.layers == "qwen":
        step = c.int("decoder_sparse_step", default=1)
        dense_only = set(c.int_list("mlp_only_layers"))
        return sum(1 for i in range(layers) if i not in dense_only and (i + 1) % step == 0)
    if moe.layers == "interleave":
        if c.raw.get("moe_layers"):
            return len(set(c.int_list("moe_layers")))
        step = c.int("interleave_moe_layer_step", default=1)
        return sum(1 for i in range(layers) if (i + 1) % step == 0)
    if moe.layers in ("types", "first_k"):
        types = c.raw.get("mlp_layer_types") if moe.layers == "types" else None
        if types is None:
            first = c.int("first_k_dense_replace", default=moe.dense_default, minimum=0)
            return layers - min(first, layers)
        if (
            not isinstance(types, list)
            or len(types) != layers
            or not all(t in ("dense", "sparse") for t in types)
        ):
            raise ConfigError(
                f"config.json field 'mlp_layer_types' must name {layers} layers, each 'dense' "
                "or 'sparse'",
                field="mlp_layer_types",
            )
        return types.count("sparse")
    if moe.layers == "deepseek":
        first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
        freq = c.int("moe_layer_freq", default=1)
        return sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    return layers


def _experts(c: Config, moe: Moe, bp: b.Blueprint) -> b.Experts:
    d = bp.d
    experts = c.int(moe.experts)
    per_token = c.int("num_experts_per_tok")
    if per_token > experts:
        raise ConfigError(
            f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
            f"experts ({experts})",
            field="num_experts_per_tok",
        )
    inter = c.int(moe.intermediate) if moe.intermediate else bp.inter
    routed = b.gated_mlp(
        d,
        inter,
        names=moe.names,
        prefix="experts.",
        role="expert",
        count=experts,
        bias=moe.bias,
        module=moe.modules,
    )
    shared: list[b.LinearShape] = []
    shared_count = 0
    if moe.shared == "qwen":
        shared_inter = c.int("shared_expert_intermediate_size", default=0, minimum=0)
        if shared_inter:
            shared = [
                *b.gated_mlp(d, shared_inter, prefix="shared_expert.", role="shared_expert"),
                b.lin("shared_expert_gate", d, 1, False, "shared_expert_router"),
            ]
            shared_count = 1
    elif moe.shared == "one":
        shared = b.gated_mlp(d, inter, prefix="shared_expert.", role="shared_expert")
        shared_count = 1
    elif moe.shared == "deepseek":
        shared_count = c.int("n_shared_experts", default=0, minimum=0)
        if shared_count:
            shared = b.gated_mlp(
                d, inter * shared_count, prefix="shared_experts.", role="shared_expert"
            )
    sparse = _sparse_layers(c, moe, bp.layers)
    if sparse < bp.layers:
        bp.notes.append(f"{bp.layers - sparse} of {bp.layers} layers use a dense MLP.")
    return b.Experts(
        router=[b.lin(moe.router, d, experts, moe.bias, "router", module=moe.modules)],
        routed=routed,
        shared=shared,
        experts=experts,
        per_token=per_token,
        shared_experts=shared_count,
        intermediate=inter,
        sparse_layers=sparse,
        router_extra=experts if moe.router_bias else 0,
    )
