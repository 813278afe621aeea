"""Pure state-space language models: Mamba (mamba), Falcon Mamba (falcon_mamba) and Mamba-2
(mamba2), as transformers 5 builds them (modeling_mamba.py, modeling_falcon_mamba.py,
modeling_mamba2.py; defaults from their configuration classes).

No block attends: each is an RMSNorm and one mixer, with no MLP. The mixers take the "linear
attention" slot hybrids.py uses (`LinearAttention`, every block, `separate_mlp` with no MLP
blocks), so the engine charges no KV cache and no quadratic attention FLOPs: the shape has
no softmax layer. There are no attention heads either; a Mamba-2 model reports its SSM heads
and groups in their place, which is how vLLM splits it over GPUs (heads divided by the tensor
parallel size, groups divided or a single group replicated).

A Mamba-1 mixer (Gu & Dao 2023, arXiv:2312.00752; MambaMixer): in_proj d -> 2 x inner (x and the
gate z; bias with use_bias), a depthwise causal conv1d over x (inner channels, conv_kernel taps,
bias with use_conv_bias), x_proj inner -> dt_rank + 2 x state (no bias), dt_proj dt_rank ->
inner (always with bias), A_log (inner x state), D (inner), out_proj inner -> d (use_bias).
inner is the config's intermediate_size where given, else expand x hidden_size (the config
class computes it, then a saved intermediate_size overrides it). Falcon Mamba adds RMS norms
on B, C and dt whose weights are non-persistent buffers: no parameters.

Cache (transformers' DynamicCache of LinearAttentionLayer, one per block): the conv window
(inner x conv_kernel) in the activation dtype, and the SSM state (inner x state) as the scan
returns it, float32: transformers' PyTorch scan discretises with the float32 A and dt bias,
and mamba_ssm's selective_scan_fn returns its last state in float32; the cache copies that
tensor's dtype (zeros_like). Per sequence, whatever its length.

Training goes through mamba_ssm's mamba_inner_fn (MambaInnerFn, checkpoint_lvl 1), which keeps
for backward the in_proj output xz (2 x inner), x_proj's output x_dbl (dt_rank + 2 x state), B
and C as contiguous copies (2 x state; Falcon Mamba's normed ones), the scan output before the
gate (inner) and the scan's chunk states (float32, 2 x state per channel every 2,048 tokens),
and recomputes the convolution, dt and the out_proj input. Every block adds its output to a
float32 residual (residual_in_fp32, true in every release), so the stream between blocks is
float32 whatever the model's dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.mamba2_mixer import mamba2_mixer
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError

_KERNELS = (
    "Training and long prompts through transformers need mamba-ssm and causal-conv1d (or the "
    "Hub kernels): without them it runs a PyTorch scan that holds float32 tensors of inner "
    "width x state size per token, far slower and far larger than counted."
)
_NO_ATTENTION = (
    "No layer attends: there is no KV cache, only a fixed state per sequence and layer "
    "({mib:.2f} MiB in 16-bit activations), whatever the sequence length."
)
# mamba_ssm's selective scan keeps its running state once per chunk of this many tokens.
_SCAN_CHUNK = 2048


@dataclass(frozen=True)
class _Mamba1:
    d: int
    inner: int
    state: int
    rank: int
    kernel: int
    bias: bool
    conv_bias: bool

    def linears(self) -> list[b.LinearShape]:
        return [
            b.lin("in_proj", self.d, 2 * self.inner, self.bias, "linear_attn_in"),
            b.lin("x_proj", self.inner, self.rank + 2 * self.state, False, "linear_attn_x"),
            b.lin("dt_proj", self.rank, self.inner, True, "linear_attn_dt"),
            b.lin("out_proj", self.inner, self.d, self.bias, "linear_attn_out"),
        ]

    @property
    def other_params(self) -> int:
        """conv1d weight (and bias), A_log, D."""
        conv = self.inner * self.kernel + (self.inner if self.conv_bias else 0)
        return conv + self.inner * self.state + self.inner

    def state_mib(self, act_bytes: int = 2) -> float:
        return (self.inner * self.kernel * act_bytes + self.inner * self.state * 4) / 2**20

    def linear_attention(self, layers: int, **extra) -> LinearAttention:
        # xz, x_dbl, B and C, the scan output; the float32 chunk states in 16-bit units.
        saved = (
            3 * self.inner
            + self.rank
            + 4 * self.state
            + math.ceil(4 * self.inner * self.state / _SCAN_CHUNK)
        )
        return LinearAttention(
            layers=layers,
            state_values=self.inner * self.kernel,
            state_fp32_values=self.inner * self.state,
            saved_per_token=saved,
            **extra,
        )


def _mamba1(c: Config, d: int) -> _Mamba1:
    rank = c.raw.get("time_step_rank", "auto")
    return _Mamba1(
        d=d,
        inner=c.int("intermediate_size", default=c.int("expand", default=2) * d),
        state=c.int("state_size", default=16),
        rank=math.ceil(d / 16) if rank in (None, "auto") else c.int("time_step_rank"),
        kernel=c.int("conv_kernel", default=4),
        bias=c.bool("use_bias", default=False),
        conv_bias=c.bool("use_conv_bias", default=True),
    )


def _pure(
    c: Config,
    family: str,
    *,
    d: int,
    layers: int,
    vocab: int,
    tied: bool,
    linears: list[b.LinearShape],
    other: int,
    hybrid: LinearAttention,
    inter: int,
    heads: tuple[int, int, int],
    notes: list[str],
) -> b.Blueprint:
    """Embedding, `layers` blocks of RMSNorm + mixer, the final norm_f, the LM head."""
    h, kv, hd = heads
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        # The mixer's inner width, for the prefill working set (no block has an MLP).
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=None,  # no position embedding and no trained length limit in the config
        tied=tied,
        attention=[],
        mlp=[],
        block_norms=d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,
        notes=notes,
        linear_attention=linears,
        linear_attention_norms=other,
        hybrid=hybrid,
    )


def mamba_blueprint(c: Config, family: str) -> b.Blueprint:
    """Mamba 130M-2.8B (state-spaces/mamba-*-hf) and Falcon Mamba 7B (MambaBlock /
    FalconMambaBlock: RMSNorm, mixer, float32 residual). MambaForCausalLM ties its head by
    default; falcon-mamba-7b unties it."""
    d = c.int("hidden_size", default=768)
    layers = c.int("num_hidden_layers", default=32)
    vocab = c.int("vocab_size", default=50280)
    tied = c.bool("tie_word_embeddings", default=True)
    mixer = _mamba1(c, d)
    notes = [_NO_ATTENTION.format(mib=mixer.state_mib()), _KERNELS]
    notes.append(
        "LoRA: with the mamba-ssm kernels, transformers passes x_proj, dt_proj and out_proj "
        "weights straight to the fused kernel (dt_proj's even without them), so adapters on "
        "those layers do not train; adapt in_proj (and out_proj without the kernels)."
    )
    return _pure(
        c,
        family,
        d=d,
        layers=layers,
        vocab=vocab,
        tied=tied,
        linears=mixer.linears(),
        other=mixer.other_params,
        hybrid=mixer.linear_attention(
            layers, separate_mlp=True, fp32_residual=c.bool("residual_in_fp32", default=True)
        ),
        inter=mixer.inner,
        heads=(0, 0, 0),
        notes=notes,
    )


def mamba2_blueprint(c: Config, family: str) -> b.Blueprint:
    """Mamba-2 (Mamba-Codestral-7B; Mamba2Block: RMSNorm, Mamba2Mixer, float32 residual): the
    mixer is hybrids.py's Mamba-2 with inner = expand x hidden_size (the mixer ignores any
    intermediate_size), num_heads x head_dim equal to it (the config refuses otherwise), a
    gated norm, in/out projections with use_bias and a conv bias with use_conv_bias. The head
    is untied by default."""
    d = c.int("hidden_size", default=4096)
    layers = c.int("num_hidden_layers", default=64)
    vocab = c.int("vocab_size", default=32768)
    tied = c.bool("tie_word_embeddings", default=False)
    inner = c.int("expand", default=2) * d
    if c.raw.get("head_dim") is None:
        # Mamba2Config's head_dim defaults to 64, which must then match.
        n_heads = c.int("num_heads", default=128)
        if n_heads * 64 != inner:
            raise ConfigError(
                f"config.json field 'num_heads' ({n_heads}) x the default head_dim (64) must "
                f"equal hidden_size x expand ({inner})",
                field="num_heads",
            )
    bias = c.bool("use_bias", default=False)
    mixer = mamba2_mixer(
        c,
        d,
        inner=inner,
        heads_key="num_heads",
        heads_default=128,
        head_dim_keys=("head_dim",),
        groups_keys=("n_groups",),
        groups_default=8,
        state_keys=("state_size",),
        state_default=128,
        kernel_keys=("conv_kernel",),
        in_bias=bias,
        out_bias=bias,
        conv_bias=c.bool("use_conv_bias", default=True),
        gated_norm=True,
    )
    notes = [_NO_ATTENTION.format(mib=mixer.state_mib()), _KERNELS]
    return _pure(
        c,
        family,
        d=d,
        layers=layers,
        vocab=vocab,
        tied=tied,
        linears=mixer.linears(),
        other=mixer.other_params,
        hybrid=mixer.linear_attention(
            layers, separate_mlp=True, fp32_residual=c.bool("residual_in_fp32", default=True)
        ),
        inter=mixer.inner,
        heads=(mixer.heads, mixer.groups, mixer.head_dim),
        notes=notes,
    )


# --- AI21 Jamba --------------------------------------------------------------------------------


def _every(layers: int, period: int, offset: int) -> int:
    return sum(1 for i in range(layers) if i % period == offset)


def _jamba_periods(c: Config) -> tuple[int, int, int, int]:
    """(attn_layer_period, attn_layer_offset, expert_layer_period, expert_layer_offset), each
    offset checked to fall within its period."""
    attn_period = c.int("attn_layer_period", default=8)
    attn_offset = c.int("attn_layer_offset", default=4, minimum=0)
    expert_period = c.int("expert_layer_period", default=2)
    expert_offset = c.int("expert_layer_offset", default=1, minimum=0)
    for name, offset, period in (
        ("attn_layer_offset", attn_offset, attn_period),
        ("expert_layer_offset", expert_offset, expert_period),
    ):
        if offset >= period:
            raise ConfigError(
                f"config.json field '{name}' ({offset}) must be smaller than its period ({period})",
                field=name,
            )
    return attn_period, attn_offset, expert_period, expert_offset


def _jamba_mixer(c: Config, d: int) -> _Mamba1:
    """Jamba's Mamba-1 mixer, under its mamba_* keys."""
    rank = c.raw.get("mamba_dt_rank", "auto")
    return _Mamba1(
        d=d,
        inner=c.int("mamba_expand", default=2) * d,
        state=c.int("mamba_d_state", default=16),
        rank=math.ceil(d / 16) if rank in (None, "auto") else c.int("mamba_dt_rank"),
        kernel=c.int("mamba_d_conv", default=4),
        bias=c.bool("mamba_proj_bias", default=False),
        conv_bias=c.bool("mamba_conv_bias", default=True),
    )


def _jamba_experts(
    c: Config, d: int, inter: int, layers: int, period: int, offset: int
) -> b.Experts | None:
    """The routed experts of every period-th layer from offset, None where no layer routes."""
    e = c.int("num_experts", "num_local_experts", default=16)
    per_token = c.int("num_experts_per_tok", default=2)
    if e > 1 and per_token > e:
        raise ConfigError(
            f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
            f"experts ({e})",
            field="num_experts_per_tok",
        )
    sparse = _every(layers, period, offset) if e > 1 else 0
    if not sparse:
        return None
    return b.Experts(
        router=[b.lin("feed_forward.router", d, e, False, "router", module=False)],
        routed=b.gated_mlp(
            d,
            inter,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            prefix="feed_forward.experts.",
            role="expert",
            count=e,
            module=False,
        ),
        shared=[],
        experts=e,
        per_token=per_token,
        shared_experts=0,
        intermediate=inter,
        sparse_layers=sparse,
    )


def _jamba_linear_attention(mixer: _Mamba1, layers: int) -> LinearAttention:
    """The Mamba layers' state, and what the step-by-step mixer keeps for backward (see
    jamba_blueprint)."""
    i, r, n = mixer.inner, mixer.rank, mixer.state
    saved = 7 * i + 4 * r + 10 * n + math.ceil(4 * i * n / _SCAN_CHUNK)
    return LinearAttention(
        layers=layers,
        state_values=i * mixer.kernel,
        state_fp32_values=i * n,
        saved_per_token=saved,
    )


def jamba_blueprint(c: Config, family: str) -> b.Blueprint:
    """Jamba v0.1 / 1.5 / 1.6 (JambaAttentionDecoderLayer / JambaMambaDecoderLayer): layer i
    attends where i % attn_layer_period == attn_layer_offset, else runs a Mamba-1 mixer
    (inner = mamba_expand x hidden, dt_rank mamba_dt_rank or ceil(hidden / 16), in/out_proj
    with mamba_proj_bias, conv bias with mamba_conv_bias) with RMSNorms of dt_rank, state and
    state on dt, B and C (weighted, unlike Falcon Mamba's); q/k/v/o attention has no biases
    and no position embedding. Every layer has two RMSNorms and a feed-forward: routed
    experts (3-D gate_up_proj / down_proj parameters and a router weight, no nn.Linear, no
    shared expert) where num_experts > 1 and i % expert_layer_period == expert_layer_offset,
    else a SwiGLU MLP. The head is untied by default.

    transformers runs Jamba's mixer step by step (not mamba_inner_fn: its dt norm sits where
    the fused kernel cannot put it), through causal-conv1d and mamba_ssm's selective_scan_fn
    where installed: a block keeps xz (2 x inner), the convolution's output, x_proj's output
    and the three norms' inputs and outputs, dt (inner), contiguous copies of B, C and the gate,
    the scan output and the gated output out_proj reads (inner each), and the chunk states."""
    d, layers = c.int("hidden_size", default=4096), c.int("num_hidden_layers", default=32)
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    vocab = c.int("vocab_size", default=65536)
    tied = c.bool("tie_word_embeddings", default=False)
    inter = c.int("intermediate_size", default=14336)
    attn_period, attn_offset, expert_period, expert_offset = _jamba_periods(c)
    n_attention = _every(layers, attn_period, attn_offset)
    n_mamba = layers - n_attention
    mixer = _jamba_mixer(c, d)
    experts = _jamba_experts(c, d, inter, layers, expert_period, expert_offset)
    sparse = experts.sparse_layers if experts else 0
    notes = [
        f"{n_mamba} of {layers} layers run a Mamba mixer: they keep no KV cache but a fixed "
        f"state of {mixer.state_mib():.2f} MiB per sequence each (16-bit activations); "
        f"{n_attention} attend.",
        _KERNELS,
    ]
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
        attention=b.attention(d, h, kv, hd),
        mlp=b.gated_mlp(d, inter, prefix="feed_forward.") if layers > sparse else [],
        block_norms=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        outside=d,
        experts=experts,
        notes=notes,
        linear_attention=mixer.linears(),
        # conv1d, A_log, D and the dt, B and C norms' weights
        linear_attention_norms=mixer.other_params + mixer.rank + 2 * mixer.state,
        hybrid=_jamba_linear_attention(mixer, n_mamba),
    )
