"""NVIDIA Nemotron-H (nemotron_h), as transformers 5 builds it (modeling_nemotron_h.py; defaults
from NemotronHConfig).

Each block is ONE of a Mamba-2 mixer (M), softmax attention (*), a ReLU² MLP (-) or routed
experts with a shared expert (E) (`hybrid_override_pattern`): a mixer block has no MLP and an
MLP block no mixer (`LinearAttention.separate_mlp`, `mlp_only_layers`). The mixer is
mamba2_mixer.py's; like hybrids.py's, it takes the "linear attention" slot.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.mamba2_mixer import (
    TRAINING_KERNELS,
    Mamba2,
    mamba2_mixer,
    state_note,
)
from advisor.engine.architecture.model import LinearAttention
from advisor.engine.errors import ConfigError

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


def _nemotron_mamba(c: Config, d: int, use_bias: bool) -> Mamba2:
    """The Mamba-2 mixer: mamba_num_heads x mamba_head_dim wide, a gated norm, in/out
    projections with use_bias."""
    inner = c.int("mamba_num_heads", default=128) * c.int("mamba_head_dim", default=64)
    return mamba2_mixer(
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


def _nemotron_experts(
    c: Config, d: int, inter: int, mlp_bias: bool, sparse_layers: int
) -> b.Experts:
    """The experts blocks: 3-D up_proj / down_proj experts (no gate) over moe_latent_size where
    set, a float32 router weight, a shared ReLU² MLP."""
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
    return b.Experts(
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
        sparse_layers=sparse_layers,
    )


def _nemotron_notes(c: Config, count: dict[str, int]) -> list[str]:
    """What transformers leaves out or overrides, then the layer mix."""
    notes = []
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
    notes.append(
        f"Layers: {count['mamba']} Mamba-2, {count['attention']} attention, {count['mlp']} MLP, "
        f"{count['moe']} experts; each layer is one of these alone."
    )
    return notes


def _nemotron_hybrid(mamba: Mamba2 | None, count: dict[str, int]) -> LinearAttention:
    """The Mamba-2 layers, and the MLP and experts layers that have no mixer."""
    mlp_only = count["mlp"] + count["moe"]
    if mamba:
        return mamba.linear_attention(count["mamba"], separate_mlp=True, mlp_only_layers=mlp_only)
    return LinearAttention(
        layers=0,
        state_values=0,
        state_fp32_values=0,
        saved_per_token=0,
        separate_mlp=True,
        mlp_only_layers=mlp_only,
    )


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
    mamba = _nemotron_mamba(c, d, use_bias) if count["mamba"] else None
    if mamba:
        notes += [
            state_note("Mamba-2", count["mamba"], layers, mamba.state_mib()),
            TRAINING_KERNELS,
        ]
    experts = _nemotron_experts(c, d, inter, mlp_bias, count["moe"]) if count["moe"] else None
    stored = (
        {"the routers' score-correction biases (buffers)": count["moe"] * experts.experts}
        if experts
        else {}
    )
    notes += _nemotron_notes(c, count)
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
        hybrid=_nemotron_hybrid(mamba, count),
        stored_extras=stored,
    )
