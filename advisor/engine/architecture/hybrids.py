"""State-space and short-convolution hybrids: IBM Granite 4.0 (granitemoehybrid), NVIDIA
Nemotron-H (nemotron_h), TII Falcon-H1 (falcon_h1) and Liquid LFM2 (lfm2), as transformers 5
builds them (modeling_granitemoehybrid.py, modeling_nemotron_h.py, modeling_falcon_h1.py,
modeling_lfm2.py; defaults from their configuration classes).

Their recurrent mixers take the "linear attention" slot Qwen3.5's gated DeltaNet uses: the
projections are `linear_attention` layers, the mixer's other parameters `linear_attention_norms`,
and `LinearAttention` says what a block keeps per sequence and for backward. The layouts differ:
- Granite 4.0: each block is a Mamba-2 mixer or softmax attention (`layer_types`), then its MLP
  (a SwiGLU "shared" MLP, beside routed experts where num_local_experts > 0).
- Nemotron-H: each block is ONE of a Mamba-2 mixer (M), softmax attention (*), a ReLU² MLP (-)
  or routed experts with a shared expert (E) (`hybrid_override_pattern`): a mixer block has no
  MLP and an MLP block no mixer (`LinearAttention.separate_mlp`, `mlp_only_layers`).
- Falcon-H1: every block runs a Mamba-2 mixer and softmax attention side by side on the same
  input, sums them, then its SwiGLU MLP (`LinearAttention.parallel_attention`).
- LFM2: each block is a gated short convolution (no state beyond the convolution's window) or
  softmax attention with q/k norms, then its SwiGLU MLP.

Nemotron-H's blocks are in nemotron_h.py, the Mamba-2 mixer in mamba2_mixer.py.
"""

from __future__ import annotations

import math

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.mamba2_mixer import (
    TRAINING_KERNELS,
    granite_mamba2,
    mamba2_mixer,
    state_note,
)
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError


def _types(c: Config, layers: int, key: str, kinds: dict[str, str], default: str) -> list[str]:
    raw = c.raw.get(key)
    if raw is None:
        return [default] * layers
    if not isinstance(raw, list) or len(raw) != layers or not all(t in kinds for t in raw):
        names = "', '".join(sorted(kinds))
        raise ConfigError(
            f"config.json field '{key}' must name {layers} layers, each one of '{names}'",
            field=key,
        )
    return [kinds[t] for t in raw]


# --- IBM Granite 4.0 ---------------------------------------------------------------------------


def _granite_shared_mlp(d: int, shared: int) -> list[b.LinearShape]:
    """The shared SwiGLU MLP every block runs: input_linear d -> 2 x shared, output_linear."""
    if not shared:
        return []
    return [
        b.lin("shared_mlp.input_linear", d, 2 * shared, False, "mlp_gate_up"),
        b.lin("shared_mlp.output_linear", shared, d, False, "mlp_down"),
    ]


def _granite_experts(
    c: Config, d: int, layers: int, experts_count: int, shared_mlp: list[b.LinearShape]
) -> b.Experts:
    """Every block's experts: intermediate_size wide, 3-D parameters, a router weight, the
    shared MLP beside them."""
    per_token = c.int("num_experts_per_tok", default=2)
    if per_token > experts_count:
        raise ConfigError(
            f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
            f"experts ({experts_count})",
            field="num_experts_per_tok",
        )
    inter = c.int("intermediate_size", default=11008)
    return b.Experts(
        router=[b.lin("block_sparse_moe.router", d, experts_count, False, "router", module=False)],
        routed=b.gated_mlp(
            d,
            inter,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            prefix="block_sparse_moe.experts.",
            role="expert",
            count=experts_count,
            module=False,
        ),
        shared=shared_mlp,
        experts=experts_count,
        per_token=per_token,
        shared_experts=1 if shared_mlp else 0,
        intermediate=inter,
        sparse_layers=layers,
    )


def granitemoehybrid_blueprint(c: Config, family: str) -> b.Blueprint:
    """Granite 4.0 H-Small / H-Tiny / H-Micro / H-1B / H-350M and the dense Micro / 1B / 350M
    (the same class with every layer attention). A block: RMSNorm, a Mamba-2 mixer (BambaMixer:
    inner = mamba_expand x hidden, in/out projections with mamba_proj_bias, conv bias with
    mamba_conv_bias, a gated norm) or q/k/v/o attention (attention_bias), RMSNorm, then the
    shared SwiGLU MLP (input_linear d -> 2 x shared_intermediate_size, output_linear) and, where
    num_local_experts > 0, experts of intermediate_size (3-D parameters gate_up_proj, down_proj)
    with a router weight (no bias, no nn.Linear)."""
    d, layers = c.int("hidden_size"), c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    kinds = {
        "mamba": "mamba",
        "linear_attention": "mamba",
        "attention": "attention",
        "full_attention": "attention",
    }
    key = "layer_types" if c.raw.get("layer_types") is not None else "layers_block_type"
    types = _types(c, layers, key, kinds, "mamba")
    n_mamba = types.count("mamba")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    bias = c.bool("attention_bias", default=False)
    attention = b.attention(d, h, kv, hd, qkv_bias=bias, out_bias=bias)
    shared = c.int("shared_intermediate_size", default=1024, minimum=0)
    experts_count = c.int("num_local_experts", default=8, minimum=0)
    shared_mlp = _granite_shared_mlp(d, shared)
    notes: list[str] = []
    mamba = None
    if n_mamba:
        mamba = granite_mamba2(c, d)
        notes += [state_note("Mamba-2", n_mamba, layers, mamba.state_mib()), TRAINING_KERNELS]
    experts = _granite_experts(c, d, layers, experts_count, shared_mlp) if experts_count else None
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=shared,
        gated=True,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        attention=attention,
        mlp=[] if experts else shared_mlp,
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,
        experts=experts,
        notes=notes,
        linear_attention=mamba.linears() if mamba else [],
        linear_attention_norms=mamba.other_params if mamba else 0,
        hybrid=mamba.linear_attention(n_mamba) if mamba else None,
    )


# --- TII Falcon-H1 ---------------------------------------------------------------------------


def falcon_h1_blueprint(c: Config, family: str) -> b.Blueprint:
    """Falcon-H1 0.5B-34B (FalconH1DecoderLayer): RMSNorm, then a Mamba-2 mixer (inner =
    mamba_d_ssm, else mamba_expand x hidden; in_proj with mamba_proj_bias, out_proj with
    projectors_bias; a gated norm only where mamba_rms_norm) and q/k/v/o attention
    (attention_bias; head_dim from the config, else hidden / heads) side by side on the same
    input, summed; RMSNorm, a SwiGLU MLP (mlp_bias). The muP multipliers are scalars or a
    non-persistent buffer, not parameters."""
    d, layers = c.int("hidden_size"), c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    vocab = c.int("vocab_size", default=128000)
    tied = c.bool("tie_word_embeddings", default=False)
    bias = c.bool("attention_bias", default=False)
    inter = c.int("intermediate_size", default=14336)
    # FalconH1Config defaults mamba_d_ssm to 1024; only an explicit null falls back to
    # mamba_expand x hidden.
    if c.raw.get("mamba_d_ssm", 1024) is None:
        inner = c.int("mamba_expand", default=2) * d
    else:
        inner = c.int("mamba_d_ssm", default=1024)
    gated_norm = c.bool("mamba_rms_norm", default=False)
    mamba = mamba2_mixer(
        c,
        d,
        inner=inner,
        heads_key="mamba_n_heads",
        heads_default=128,
        head_dim_keys=("mamba_d_head",),
        groups_keys=("mamba_n_groups",),
        groups_default=1,
        state_keys=("mamba_d_state",),
        state_default=256,
        kernel_keys=("mamba_d_conv",),
        in_bias=c.bool("mamba_proj_bias", default=False),
        out_bias=c.bool("projectors_bias", default=False),
        conv_bias=c.bool("mamba_conv_bias", default=True),
        gated_norm=gated_norm,
    )
    notes = [
        f"Every one of the {layers} layers runs Mamba-2 and attention side by side: each keeps "
        f"a KV cache and a fixed state of {mamba.state_mib():.2f} MiB per sequence.",
        TRAINING_KERNELS,
    ]
    mlp_bias = c.bool("mlp_bias", default=False)
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=True,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        # Every block has both mixers: the attention is counted in all of them.
        attention=b.in_layers(b.attention(d, h, kv, hd, qkv_bias=bias, out_bias=bias), layers),
        mlp=b.gated_mlp(d, inter, bias=mlp_bias),
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,
        notes=notes,
        linear_attention=mamba.linears(),
        linear_attention_norms=mamba.other_params,
        # The attention's input is its own scaled copy (attention_in_multiplier), kept by the
        # q/k/v projections beside the copy in_proj keeps.
        hybrid=mamba.linear_attention(layers, parallel_attention=True, saved_extra=d),
    )


# --- Liquid LFM2 ------------------------------------------------------------------------------


def _lfm2_ff(c: Config) -> int:
    """Lfm2Config lets block_ff_dim override intermediate_size; Lfm2MLP then takes two thirds
    of it, scales it by block_ffn_dim_multiplier and rounds up to block_multiple_of, unless
    block_auto_adjust_ff_dim is off."""
    ff = c.int("block_ff_dim", "intermediate_size", default=12288)
    if not c.bool("block_auto_adjust_ff_dim", default=True):
        return ff
    ff = int(2 * ff / 3)
    multiplier = c.raw.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is not None:
        if (
            isinstance(multiplier, bool)
            or not isinstance(multiplier, int | float)
            or not (0 < multiplier <= 64)
        ):
            raise ConfigError(
                "config.json field 'block_ffn_dim_multiplier' must be a positive number, got "
                f"{multiplier!r}",
                field="block_ffn_dim_multiplier",
            )
        step = c.int("block_multiple_of", default=256)
        ff = step * math.ceil(int(multiplier * ff) / step)
    return max(ff, 1)


def lfm2_blueprint(c: Config, family: str) -> b.Blueprint:
    """LFM2 350M / 700M / 1.2B / 2.6B (Lfm2DecoderLayer): RMSNorm, a gated short convolution
    (in_proj d -> 3d, a depthwise convolution of conv_L_cache taps, out_proj; biases where
    conv_bias) or q/k/v/out attention without biases but with RMSNorm(head_dim) on q and k,
    RMSNorm, a SwiGLU MLP (w1, w3, w2) without biases. The embedding norm is applied after the
    last layer; the head is tied by default (tie_embedding)."""
    d, layers = c.int("hidden_size"), c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    raw_types = c.raw.get("layer_types")
    if raw_types is not None:
        kinds = {"conv": "conv", "full_attention": "attention", "attention": "attention"}
        types = _types(c, layers, "layer_types", kinds, "attention")
    else:
        idx = set(c.int_list("full_attn_idxs")) if c.raw.get("full_attn_idxs") is not None else None
        types = ["attention" if idx is None or i in idx else "conv" for i in range(layers)]
    n_conv = types.count("conv")
    vocab = c.int("vocab_size", default=65536)
    tied = c.bool("tie_embedding", "tie_word_embeddings", default=True)
    ff = _lfm2_ff(c)
    kernel = c.int("conv_L_cache", default=3)
    conv_bias = c.bool("conv_bias", default=False)
    mixer = [
        b.lin("conv.in_proj", d, 3 * d, conv_bias, "linear_attn_in"),
        b.lin("conv.out_proj", d, d, conv_bias, "linear_attn_out"),
    ]
    notes = []
    hybrid = None
    if n_conv:
        notes.append(
            f"{n_conv} of {layers} layers use a gated short convolution: they keep no KV cache, "
            f"only the last {kernel} inputs ({d * kernel * 2 / 2**10:.1f} KiB per sequence each "
            "in 16 bits)."
        )
        hybrid = LinearAttention(
            layers=n_conv,
            state_values=d * kernel,
            state_fp32_values=0,
            # in_proj's output (B, C, x: three views of one tensor), B x (the convolution's
            # input), the convolution's output and the out_proj input.
            saved_per_token=6 * d,
        )
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=ff,
        gated=True,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        attention=b.attention(d, h, kv, hd, names=("q_proj", "k_proj", "v_proj", "out_proj")),
        mlp=b.gated_mlp(d, ff, names=("w1", "w3", "w2")),
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,  # embedding_norm, applied after the last layer
        notes=notes,
        linear_attention=mixer if n_conv else [],
        linear_attention_norms=d * kernel + (d if conv_bias else 0),
        attention_norms=2 * hd,  # q_layernorm, k_layernorm
        hybrid=hybrid,
    )
