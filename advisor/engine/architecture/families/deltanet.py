"""Qwen3.5 and Qwen3-Next: decoders whose blocks mostly replace softmax attention with a
gated DeltaNet (linear attention with a fixed state per sequence).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.decoders import Decoder, Moe
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError

# The flash-linear-attention kernels' chunk (chunk_gated_delta_rule: 64 tokens), whose
# within-chunk matrix (one row of the chunk per token and value head) is kept for backward.
_DELTA_RULE_CHUNK = 64


def _delta_net_layers(c: Config, layers: int) -> int:
    """How many blocks run the gated DeltaNet: `layer_types`, else all but every
    full_attention_interval-th."""
    types = c.raw.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) != layers or not all(
            t in ("linear_attention", "full_attention") for t in types
        ):
            raise ConfigError(
                f"config.json field 'layer_types' must name {layers} layers, each "
                "'linear_attention' or 'full_attention'",
                field="layer_types",
            )
        return types.count("linear_attention")
    return layers - layers // c.int("full_attention_interval", default=4)


def _delta_net_mixer(
    d: int, conv: int, values: int, value_heads: int, fused: bool
) -> list[b.LinearShape]:
    """The DeltaNet's projections: fused (Qwen3-Next) or one per output (Qwen3.5)."""
    if fused:
        mixer = [
            b.lin("in_proj_qkvz", d, conv + values, False, "linear_attn_qkvz"),
            b.lin("in_proj_ba", d, 2 * value_heads, False, "linear_attn_ba"),
        ]
    else:
        mixer = [
            b.lin("in_proj_qkv", d, conv, False, "linear_attn_qkv"),
            b.lin("in_proj_z", d, values, False, "linear_attn_z"),
            b.lin("in_proj_b", d, value_heads, False, "linear_attn_b"),
            b.lin("in_proj_a", d, value_heads, False, "linear_attn_a"),
        ]
    mixer.append(b.lin("out_proj", values, d, False, "linear_attn_out"))
    return mixer


def _mtp_params(bp: b.Blueprint, attention: list[b.LinearShape], mtp_layers: int | None) -> int:
    """The multi-token-prediction module the checkpoint stores, 0 where there is none."""
    if not mtp_layers:
        return 0
    # The MTP module (vLLM's qwen3_5_mtp.py): a 2d -> d projection, three norms and
    # full-attention blocks with the model's MLP or experts.
    # (bp.block_norms still holds the q/k norms here.)
    mtp_block = (
        b.total(attention) + bp.block_norms + (bp.experts.params if bp.experts else b.total(bp.mlp))
    )
    return 2 * bp.d * bp.d + 3 * bp.d + mtp_layers * mtp_block


def _gated_delta_net(fused: bool):
    """Qwen3.5 and Qwen3-Next (modeling_qwen3_5.py, modeling_qwen3_next.py): three of every
    four blocks (`layer_types`, else all but every full_attention_interval-th) replace softmax
    attention with a gated DeltaNet (Yang et al. 2024, arXiv:2412.06464): projections to
    queries and keys (linear_num_key_heads x linear_key_head_dim each), values and an output
    gate (linear_num_value_heads x linear_value_head_dim each) and one decay and one step size
    per value head, a depthwise causal convolution over the queries, keys and values, a gated
    RMSNorm, an output projection; none with bias. Qwen3-Next fuses the projections
    (in_proj_qkvz, in_proj_ba), Qwen3.5 does not: the same count. The softmax blocks' query
    projection is twice as wide (the query and a sigmoid output gate) and has q/k norms."""

    def adjust(c: Config, bp: b.Blueprint) -> b.Blueprint:
        layers = bp.layers
        linear = _delta_net_layers(c, layers)
        nk = c.int("linear_num_key_heads", default=16)
        nv = c.int("linear_num_value_heads", default=32)
        dk = c.int("linear_key_head_dim", default=128)
        dv = c.int("linear_value_head_dim", default=128)
        kernel = c.int("linear_conv_kernel_dim", default=4)
        keys, values = nk * dk, nv * dv
        conv = 2 * keys + values
        mixer = _delta_net_mixer(bp.d, conv, values, nv, fused)
        q, k, v, o = bp.attention
        attention = [q.model_copy(update={"out_features": 2 * q.out_features}), k, v, o]
        notes = [
            f"{linear} of {layers} layers use gated DeltaNet linear attention: they keep no KV "
            f"cache but a fixed state of "
            f"{(conv * kernel * 2 + nv * dk * dv * 4) / 2**20:.1f} MiB per sequence each.",
            "Training through transformers needs flash-linear-attention and causal-conv1d "
            "installed: without them it runs a plain PyTorch recurrence, much slower and "
            "keeping more activations than counted.",
        ]
        mtp_layers = c.opt_int("mtp_num_hidden_layers", "num_nextn_predict_layers", minimum=0)
        if mtp_layers:
            notes.append(
                "The multi-token-prediction layer stored in the checkpoint is not counted "
                "(transformers does not load it; a server drafting with it holds it too)."
            )
        mtp = _mtp_params(bp, attention, mtp_layers)
        return replace(
            bp,
            attention=attention,
            block_norms=bp.block_norms - 2 * bp.hd,  # the q/k norms are the softmax blocks'
            attention_norms=2 * bp.hd,
            linear_attention=mixer,
            linear_attention_norms=conv * kernel + 2 * nv + dv,  # conv, A_log, dt_bias, norm
            hybrid=LinearAttention(
                layers=linear,
                state_values=conv * kernel,
                state_fp32_values=nv * dk * dv,
                # Kept for backward per token: the convolution's input and output (queries,
                # keys and values), the gate, the recurrence's output and the normed output,
                # and the kernel's within-chunk matrix.
                saved_per_token=2 * conv + 3 * values + nv * _DELTA_RULE_CHUNK,
            ),
            stored_extras={
                "the multi-token-prediction layer, which transformers does not load": mtp
            }
            if mtp
            else {},
            notes=[*bp.notes, *notes],
        )

    return adjust


# --- The rows ------------------------------------------------------------------------------------

DECODERS: dict[str, Decoder] = {
    # Qwen3.5's language model (modeling_qwen3_5.py): the gated DeltaNet hybrid, dense MLP.
    "qwen3_5_text": Decoder(qk_norm="head", adjust=_gated_delta_net(fused=False)),
    # Qwen3.5's MoE (modeling_qwen3_5_moe.py): every block routes to num_experts_per_tok of
    # num_experts experts kept as 3-D parameters (gate_up_proj, down_proj), beside a gated
    # shared expert. Its configuration has no dense MLP width.
    "qwen3_5_moe_text": Decoder(
        qk_norm="head",
        intermediate=("intermediate_size", "moe_intermediate_size"),
        moe=Moe(
            experts="num_experts",
            shared="qwen",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            modules=False,
        ),
        adjust=_gated_delta_net(fused=False),
    ),
    # Qwen3-Next (modeling_qwen3_next.py): the same hybrid with fused input projections and
    # Qwen2-MoE's experts (nn.Linear modules in transformers 4) and gated shared expert.
    "qwen3_next": Decoder(
        qk_norm="head",
        moe=Moe(experts="num_experts", shared="qwen", layers="qwen"),
        adjust=_gated_delta_net(fused=True),
    ),
}
