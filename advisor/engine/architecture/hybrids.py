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

A Mamba-2 mixer (Dao & Gu 2024, arXiv:2405.21060): in_proj to [z | x B C | dt] (inner +
inner + 2 x groups x state + heads), a depthwise causal convolution over x B C (conv_dim =
inner + 2 x groups x state channels, kernel d_conv, with bias where the config says), one step
bias, A_log and D per head, a gated RMSNorm of the inner width (Falcon-H1: only where
mamba_rms_norm), out_proj back to the hidden size. transformers' cache keeps per sequence and
layer the last d_conv convolution inputs (conv_dim x d_conv, activation dtype) and the SSM state
(heads x head_dim x state) in float32: the chunked scan (mamba_ssm's _state_passing_fwd, and
transformers' own fallback) returns its final state in float32 and the cache keeps that dtype.
Training goes through mamba_ssm's mamba_split_conv1d_scan_combined, whose forward keeps for
backward the in_proj output (zxbcdt), the scan output before the norm (out_x) and the norm's
per-group reciprocal std (float32), and recomputes the convolution and the out_proj input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError

_TRAINING_KERNELS = (
    "Training through transformers needs mamba-ssm and causal-conv1d installed: without them "
    "it runs a PyTorch chunked scan, much slower and keeping more activations than counted."
)


@dataclass(frozen=True)
class _Mamba2:
    d: int
    inner: int
    heads: int
    head_dim: int
    groups: int
    state: int
    kernel: int
    in_bias: bool
    out_bias: bool
    conv_bias: bool
    gated_norm: bool

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.groups * self.state

    @property
    def in_width(self) -> int:
        return self.inner + self.conv_dim + self.heads

    def linears(self) -> list[b.LinearShape]:
        return [
            b.lin("in_proj", self.d, self.in_width, self.in_bias, "linear_attn_in"),
            b.lin("out_proj", self.inner, self.d, self.out_bias, "linear_attn_out"),
        ]

    @property
    def other_params(self) -> int:
        """conv1d weight (and bias), dt_bias, A_log, D, the gated norm's weight."""
        conv = self.conv_dim * self.kernel + (self.conv_dim if self.conv_bias else 0)
        return conv + 3 * self.heads + (self.inner if self.gated_norm else 0)

    def state_mib(self, act_bytes: int = 2) -> float:
        conv = self.conv_dim * self.kernel * act_bytes
        return (conv + self.heads * self.head_dim * self.state * 4) / 2**20

    def linear_attention(self, layers: int, **extra) -> LinearAttention:
        saved = extra.pop("saved_extra", 0)
        return LinearAttention(
            layers=layers,
            state_values=self.conv_dim * self.kernel,
            state_fp32_values=self.heads * self.head_dim * self.state,
            # zxbcdt and out_x in the activation dtype, rstd in float32 (two 16-bit units a
            # group) where the kernel applies the gated norm.
            saved_per_token=self.in_width
            + self.inner
            + (2 * self.groups if self.gated_norm else 0)
            + saved,
            **extra,
        )


def _mamba2(
    c: Config,
    d: int,
    *,
    inner: int,
    heads_key: str,
    head_dim_keys: tuple[str, ...],
    groups_keys: tuple[str, ...],
    groups_default: int,
    state_keys: tuple[str, ...],
    state_default: int,
    kernel_keys: tuple[str, ...],
    in_bias: bool,
    out_bias: bool,
    conv_bias: bool,
    gated_norm: bool,
    heads_default: int,
) -> _Mamba2:
    n_heads = c.int(heads_key, default=heads_default)
    raw_head = next((c.raw.get(k) for k in head_dim_keys if c.raw.get(k) is not None), None)
    head_dim = inner // n_heads if raw_head in (None, "auto") else c.int(*head_dim_keys)
    if n_heads * head_dim != inner:
        raise ConfigError(
            f"config.json field '{heads_key}' ({n_heads}) x '{head_dim_keys[0]}' ({head_dim}) "
            f"must equal the Mamba inner width ({inner})",
            field=heads_key,
        )
    groups = c.int(*groups_keys, default=groups_default)
    if n_heads % groups:
        raise ConfigError(
            f"config.json field '{groups_keys[0]}' ({groups}) must divide '{heads_key}' "
            f"({n_heads})",
            field=groups_keys[0],
        )
    return _Mamba2(
        d=d,
        inner=inner,
        heads=n_heads,
        head_dim=head_dim,
        groups=groups,
        state=c.int(*state_keys, default=state_default),
        kernel=c.int(*kernel_keys, default=4),
        in_bias=in_bias,
        out_bias=out_bias,
        conv_bias=conv_bias,
        gated_norm=gated_norm,
    )


def _state_note(kind: str, count: int, layers: int, mib: float) -> str:
    return (
        f"{count} of {layers} layers use {kind}: they keep no KV cache but a fixed state of "
        f"{mib:.2f} MiB per sequence each (16-bit activations)."
    )


# --- IBM Granite 4.0 ---------------------------------------------------------------------------


def granite_mamba2(c: Config, d: int) -> _Mamba2:
    """The Mamba-2 mixer of IBM's layout (Granite 4.0, Bamba): mamba_* keys, inner width
    mamba_expand x hidden, a gated RMSNorm, one bias flag for both projections."""
    proj_bias = c.bool("mamba_proj_bias", default=False)
    return _mamba2(
        c,
        d,
        inner=c.int("mamba_expand", default=2) * d,
        heads_key="mamba_n_heads",
        heads_default=128,
        head_dim_keys=("mamba_d_head",),
        groups_keys=("mamba_n_groups",),
        groups_default=1,
        state_keys=("mamba_d_state",),
        state_default=256,
        kernel_keys=("mamba_d_conv",),
        in_bias=proj_bias,
        out_bias=proj_bias,
        conv_bias=c.bool("mamba_conv_bias", default=True),
        gated_norm=True,
    )


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
    shared_mlp = (
        [
            b.lin("shared_mlp.input_linear", d, 2 * shared, False, "mlp_gate_up"),
            b.lin("shared_mlp.output_linear", shared, d, False, "mlp_down"),
        ]
        if shared
        else []
    )
    notes: list[str] = []
    mamba = None
    if n_mamba:
        mamba = granite_mamba2(c, d)
        notes += [_state_note("Mamba-2", n_mamba, layers, mamba.state_mib()), _TRAINING_KERNELS]
    experts = None
    mlp = shared_mlp
    if experts_count:
        per_token = c.int("num_experts_per_tok", default=2)
        if per_token > experts_count:
            raise ConfigError(
                f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
                f"experts ({experts_count})",
                field="num_experts_per_tok",
            )
        inter = c.int("intermediate_size", default=11008)
        experts = b.Experts(
            router=[
                b.lin("block_sparse_moe.router", d, experts_count, False, "router", module=False)
            ],
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
            shared_experts=1 if shared else 0,
            intermediate=inter,
            sparse_layers=layers,
        )
        mlp = []
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
        mlp=mlp,
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


# --- NVIDIA Nemotron-H ------------------------------------------------------------------------

_NEMOTRON_GLYPHS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_NAMES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}


def _nemotron_types(c: Config) -> list[str]:
    """transformers reads layers_block_type (alias layer_types), else hybrid_override_pattern
    (one character per layer: M, *, -, E); the number of layers is that list's length (a
    num_hidden_layers that disagrees is ignored with a warning)."""
    for key in ("layers_block_type", "layer_types"):
        raw = c.raw.get(key)
        if raw is not None:
            if not isinstance(raw, list) or not raw or not all(t in _NEMOTRON_NAMES for t in raw):
                raise ConfigError(
                    f"config.json field '{key}' must list the layers, each one of 'mamba', "
                    "'attention', 'mlp', 'moe'",
                    field=key,
                )
            return [_NEMOTRON_NAMES[t] for t in raw]
    pattern = c.raw.get("hybrid_override_pattern")
    if pattern is None:
        return ["mamba", "moe", "attention", "mlp"]  # NemotronHConfig's default
    if (
        not isinstance(pattern, str)
        or not pattern
        or any(g not in _NEMOTRON_GLYPHS for g in pattern)
    ):
        raise ConfigError(
            "config.json field 'hybrid_override_pattern' must be a string of M (Mamba-2), "
            "* (attention), - (MLP) and E (experts), one per layer",
            field="hybrid_override_pattern",
        )
    return [_NEMOTRON_GLYPHS[g] for g in pattern]


def nemotron_h_blueprint(c: Config, family: str) -> b.Blueprint:
    """Nemotron-H 4B/8B/47B/56B, Nemotron Nano 9B/12B v2, Nemotron 3 Nano (NemotronHBlock: one
    RMSNorm, then one mixer). Attention has no biases, head_dim from the config (default 128;
    the v1 configs spell it attention_head_dim) and no position embedding; the MLP is
    up_proj/down_proj with ReLU² (mlp_bias); the experts are 3-D up_proj / down_proj parameters
    (no gate) over moe_latent_size where set (fc1/fc2_latent_proj around them), with a router
    weight in float32 and a shared ReLU² MLP of moe_shared_expert_intermediate_size. The head
    is never tied (the class declares no tied weights)."""
    types = _nemotron_types(c)
    layers = len(types)
    d = c.int("hidden_size")
    h = c.int("num_attention_heads", default=32)
    kv = c.int("num_key_value_heads", default=8)
    hd = c.int("head_dim", "attention_head_dim", default=128)
    if h % kv:
        raise ConfigError(
            f"config.json field 'num_key_value_heads' ({kv}) must divide 'num_attention_heads' "
            f"({h})",
            field="num_key_value_heads",
        )
    count = {k: types.count(k) for k in ("mamba", "attention", "mlp", "moe")}
    vocab = c.int("vocab_size", default=131072)
    use_bias = c.bool("use_bias", default=False)
    mlp_bias = c.bool("mlp_bias", default=False)
    inter = c.int("intermediate_size", default=21504)
    notes: list[str] = []
    declared = c.opt_int("num_hidden_layers")
    if declared is not None and declared != layers:
        notes.append(
            f"num_hidden_layers says {declared}, but the layer pattern lists {layers} layers, "
            "which transformers builds."
        )
    attention = b.in_layers(b.attention(d, h, kv, hd), count["attention"])
    mlp = (
        b.in_layers(b.mlp(d, inter, names=("up_proj", "down_proj"), bias=mlp_bias), count["mlp"])
        if count["mlp"]
        else []
    )
    mamba = None
    if count["mamba"]:
        inner = c.int("mamba_num_heads", default=128) * c.int("mamba_head_dim", default=64)
        mamba = _mamba2(
            c,
            d,
            inner=inner,
            heads_key="mamba_num_heads",
            heads_default=128,
            head_dim_keys=("mamba_head_dim",),
            groups_keys=("n_groups", "mamba_n_groups"),
            groups_default=8,
            state_keys=("ssm_state_size",),
            state_default=128,
            kernel_keys=("conv_kernel", "mamba_d_conv"),
            in_bias=use_bias,
            out_bias=use_bias,
            conv_bias=c.bool("use_conv_bias", "mamba_conv_bias", default=True),
            gated_norm=True,
        )
        notes += [
            _state_note("Mamba-2", count["mamba"], layers, mamba.state_mib()),
            _TRAINING_KERNELS,
        ]
    experts = None
    stored: dict[str, int] = {}
    if count["moe"]:
        e = c.int("n_routed_experts", "num_local_experts", default=8)
        per_token = c.int("num_experts_per_tok", default=2)
        if per_token > e:
            raise ConfigError(
                f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
                f"experts ({e})",
                field="num_experts_per_tok",
            )
        moe_inter = c.int("moe_intermediate_size", default=7688)
        # NemotronHMLP takes `intermediate_size or config.intermediate_size`: a shared width
        # of 0 builds a shared expert of the dense MLP's width.
        shared_inter = c.int("moe_shared_expert_intermediate_size", default=7688, minimum=0)
        shared_inter = shared_inter or inter
        latent = c.opt_int("moe_latent_size")
        width = latent or d
        shared = (
            [
                b.lin("shared_experts.up_proj", d, shared_inter, mlp_bias, "shared_expert_up"),
                b.lin("shared_experts.down_proj", shared_inter, d, mlp_bias, "shared_expert_down"),
            ]
            if shared_inter
            else []
        )
        if latent:
            shared += [
                b.lin("fc1_latent_proj", d, latent, mlp_bias, "moe_latent_in"),
                b.lin("fc2_latent_proj", latent, d, mlp_bias, "moe_latent_out"),
            ]
        experts = b.Experts(
            router=[b.lin("gate", d, e, False, "router", module=False)],
            routed=[
                b.lin("experts.up_proj", width, moe_inter, False, "expert_up", e, module=False),
                b.lin("experts.down_proj", moe_inter, width, False, "expert_down", e, module=False),
            ],
            shared=shared,
            experts=e,
            per_token=per_token,
            shared_experts=1 if shared_inter else 0,
            intermediate=moe_inter,
            sparse_layers=count["moe"],
        )
        stored["the routers' score-correction biases (buffers)"] = count["moe"] * e
    if c.opt_int("num_nextn_predict_layers", minimum=0):
        notes.append(
            "The multi-token-prediction layers stored in the checkpoint are not counted "
            "(transformers does not load them)."
        )
    if c.bool("tie_word_embeddings", default=False):
        notes.append(
            "tie_word_embeddings is set, but transformers' NemotronHForCausalLM keeps its own "
            "LM head: counted untied."
        )
    mlp_only = count["mlp"] + count["moe"]
    notes.append(
        f"Layers: {count['mamba']} Mamba-2, {count['attention']} attention, {count['mlp']} MLP, "
        f"{count['moe']} experts; each layer is one of these alone."
    )
    hybrid = (
        mamba.linear_attention(count["mamba"], separate_mlp=True, mlp_only_layers=mlp_only)
        if mamba
        else LinearAttention(
            layers=0,
            state_values=0,
            state_fp32_values=0,
            saved_per_token=0,
            separate_mlp=True,
            mlp_only_layers=mlp_only,
        )
    )
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=False,
        attention=attention,
        mlp=mlp,
        block_norms=d,
        embedding=vocab * d,
        lm_head=vocab * d,
        outside=d,
        experts=experts,
        notes=notes,
        linear_attention=mamba.linears() if mamba else [],
        linear_attention_norms=mamba.other_params if mamba else 0,
        hybrid=hybrid,
        stored_extras=stored,
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
    mamba = _mamba2(
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
        _TRAINING_KERNELS,
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
