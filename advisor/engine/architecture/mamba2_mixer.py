"""The Mamba-2 mixer the state-space hybrids share (hybrids.py's Granite 4.0 and Falcon-H1,
nemotron_h.py, recurrent.py's Bamba, ssm.py's Mamba-2), read from each family's config keys.

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

from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError

TRAINING_KERNELS = (
    "Training through transformers needs mamba-ssm and causal-conv1d installed: without them "
    "it runs a PyTorch chunked scan, much slower and keeping more activations than counted."
)


@dataclass(frozen=True)
class Mamba2:
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


def mamba2_mixer(
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
) -> Mamba2:
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
    return Mamba2(
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


def state_note(kind: str, count: int, layers: int, mib: float) -> str:
    return (
        f"{count} of {layers} layers use {kind}: they keep no KV cache but a fixed state of "
        f"{mib:.2f} MiB per sequence each (16-bit activations)."
    )


def granite_mamba2(c: Config, d: int) -> Mamba2:
    """The Mamba-2 mixer of IBM's layout (Granite 4.0, Bamba): mamba_* keys, inner width
    mamba_expand x hidden, a gated RMSNorm, one bias flag for both projections."""
    proj_bias = c.bool("mamba_proj_bias", default=False)
    return mamba2_mixer(
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
