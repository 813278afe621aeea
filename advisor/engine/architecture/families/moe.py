"""Mixture-of-experts decoders: Mixtral, Phi-3.5-MoE, Qwen2/3-MoE, Qwen3-VL-MoE's language
model, gpt-oss, Llama 4, GLM-4.5 / 4.6, ERNIE 4.5 MoE, MiniMax-M2, Hunyuan-A13B, OLMoE,
Granite 3.0 MoE and DBRX: which blocks route, how the experts are stored (nn.Linear modules or
3-D parameters), the shared experts and what the checkpoints store beside the parameters.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import LIMITS, Config, check_int
from advisor.engine.architecture.decoders import Decoder, Dims, Moe
from advisor.engine.errors import ConfigError


def _attention_sinks(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """gpt-oss: one learned sink logit per attention head in every block."""
    return replace(bp, block_norms=bp.block_norms + bp.h)


# --- GLM-4.5 / 4.6 and ERNIE 4.5 MoE ------------------------------------------------------------


def _glm4_moe(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """GLM-4.5 / 4.6 (modeling_glm4_moe.py): q/k norms of head_dim only where use_qk_norm is set
    (GLM-4.5, 4.6: yes; GLM-4.5-Air: no). The router's e_score_correction_bias is a buffer in
    transformers 5 (not a parameter), but the checkpoint stores it, one float per routed expert
    and sparse layer. The checkpoint also stores num_nextn_predict_layers multi-token-prediction
    layers (model.layers.<num_hidden_layers>.*: a MoE block, enorm, hnorm, eh_proj 2d -> d and
    shared_head.norm), which transformers does not load; GLM-4.5 and GLM-4.5-Air also store that
    layer's own copy of the embedding and the LM head, GLM-4.6 does not."""
    moe = bp.experts
    assert moe is not None
    d = bp.d
    qk = 2 * bp.hd if c.bool("use_qk_norm", default=False) else 0
    stored = {"the routers' score-correction biases (buffers)": moe.sparse_layers * moe.experts}
    mtp_layers = c.opt_int("num_nextn_predict_layers", minimum=0) or 0
    notes = []
    if mtp_layers:
        block = b.total(bp.attention) + bp.block_norms + qk + moe.params + moe.experts
        stored["the multi-token-prediction layer, which transformers does not load"] = (
            mtp_layers * (2 * d * d + 3 * d + block)
        )
        stored["that layer's own copy of the embedding and LM head"] = mtp_layers * 2 * bp.vocab * d
        notes.append(
            "The multi-token-prediction layer stored in the checkpoint is not counted "
            "(transformers does not load it; a server drafting with it holds it too)."
        )
    return replace(
        bp,
        block_norms=bp.block_norms + qk,
        stored_extras=stored,
        notes=[*bp.notes, *notes],
    )


def _ernie4_5_moe(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """ERNIE 4.5 MoE (modeling_ernie4_5_moe.py): block i routes when (i + 1) is a multiple of
    moe_layer_interval and moe_layer_start_index <= i <= moe_layer_end_index (-1: the last
    layer); the others keep the dense MLP of intermediate_size. A sparse block holds
    moe_num_experts experts of moe_intermediate_size as 3-D parameters (gate_up_proj,
    down_proj; no bias), a router weight (a parameter, not an nn.Linear) with its
    e_score_correction_bias (a parameter in transformers, 1 x E) and moe_num_shared_experts
    shared experts fused into one gated MLP. moe_k experts run per token. Defaults: transformers'
    Ernie4_5_MoeConfig. The checkpoint also stores num_nextn_predict_layers multi-token-prediction
    blocks (mtp_block: a dense decoder block; mtp_emb_norm, mtp_hidden_norm; mtp_linear_proj
    2d -> d), which transformers does not load."""
    d, layers = bp.d, bp.layers
    experts = c.int("moe_num_experts", "num_experts", default=64)
    per_token = c.int("moe_k", "num_experts_per_tok", default=6)
    if per_token > experts:
        raise ConfigError(
            f"config.json field 'moe_k' ({per_token}) exceeds the number of experts ({experts})",
            field="moe_k",
        )
    inter = c.int("moe_intermediate_size", default=1536)
    shared = c.int("moe_num_shared_experts", default=2, minimum=0)
    start = c.int("moe_layer_start_index", default=1, minimum=0)
    end_raw = c.raw.get("moe_layer_end_index")
    end = (
        layers - 1 if end_raw is None or end_raw == -1 else c.int("moe_layer_end_index", minimum=0)
    )
    interval = c.int("moe_layer_interval", default=1)
    sparse = sum(1 for i in range(layers) if (i + 1) % interval == 0 and start <= i <= end)
    bias = c.bool("use_bias", default=False)
    names = ("gate_up_proj", "gate_up_proj", "down_proj")
    experts_part = b.Experts(
        router=[b.lin("gate", d, experts, False, "router", module=False)],
        routed=b.gated_mlp(
            d, inter, names=names, prefix="experts.", role="expert", count=experts, module=False
        ),
        shared=(
            b.gated_mlp(
                d, inter * shared, prefix="shared_experts.", role="shared_expert", bias=bias
            )
            if shared
            else []
        ),
        experts=experts,
        per_token=per_token,
        shared_experts=shared,
        intermediate=inter,
        sparse_layers=sparse,
        router_extra=experts,  # e_score_correction_bias: a parameter here (1 x E)
    )
    notes = []
    if sparse < layers:
        notes.append(f"{layers - sparse} of {layers} layers use a dense MLP.")
    stored = {}
    mtp_layers = c.opt_int("num_nextn_predict_layers", minimum=0) or 0
    if mtp_layers:
        dense_block = b.total(bp.attention) + bp.block_norms + b.total(bp.mlp)
        stored["the multi-token-prediction layer, which transformers does not load"] = (
            mtp_layers * (dense_block + 2 * d + 2 * d * d)
        )
        notes.append(
            "The multi-token-prediction layer stored in the checkpoint is not counted "
            "(transformers does not load it)."
        )
    # A tied head keeps its own bias where use_bias (lm_head is a biased nn.Linear whose weight
    # alone is tied to the embedding).
    outside = bp.outside + (bp.vocab if bp.tied and bias else 0)
    return replace(
        bp, experts=experts_part, outside=outside, stored_extras=stored, notes=[*bp.notes, *notes]
    )


# --- Hunyuan-A13B, MiniMax-M2 and OLMoE ----------------------------------------------------------


def _uniform(c: Config, name: str, default: int, *, limit_kind: str = "experts") -> int:
    """An int, or a per-layer list whose entries all agree (Hunyuan writes moe_topk and
    num_experts either way); a list that varies is refused rather than counted wrongly."""
    value = c.raw.get(name, default)
    if isinstance(value, list):
        values = c.int_list(name)
        if not values or len(set(values)) != 1:
            raise ConfigError(
                f"config.json field '{name}' varies across layers ({sorted(set(values))}); the "
                "estimator counts only models whose layers all have the same experts",
                field=name,
            )
        return check_int(values[0], name, limit=LIMITS[limit_kind])
    return c.int(name, default=default)


def _hunyuan_moe(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Hunyuan-A13B (modeling_hunyuan_v1_moe.py): every block routes each token to moe_topk of
    num_experts experts kept as 3-D parameters (gate_up_proj [E, 2f, d], down_proj [E, d, f])
    of intermediate_size (transformers reads neither moe_intermediate_size nor
    num_shared_expert), beside one always-on shared MLP (shared_mlp, nn.Linear, the same size)
    and a router nn.Linear `gate.wg` (float32 weights, no bias). moe_topk and num_experts may be
    per-layer lists; they must agree across layers."""
    d = bp.d
    experts = _uniform(c, "num_experts", 1)
    per_token = _uniform(c, "moe_topk", 1)
    if per_token > experts:
        raise ConfigError(
            f"config.json field 'moe_topk' ({per_token}) exceeds the number of experts ({experts})",
            field="moe_topk",
        )
    inter = bp.inter
    names = ("gate_up_proj", "gate_up_proj", "down_proj")
    experts_part = b.Experts(
        router=[b.lin("gate.wg", d, experts, False, "router")],
        routed=b.gated_mlp(
            d, inter, names=names, prefix="experts.", role="expert", count=experts, module=False
        ),
        shared=b.gated_mlp(d, inter, prefix="shared_mlp.", role="shared_expert"),
        experts=experts,
        per_token=per_token,
        shared_experts=1,
        intermediate=inter,
        sparse_layers=bp.layers,
    )
    return replace(bp, experts=experts_part)


def _minimax_m2(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """MiniMax-M2 (modeling_minimax_m2.py): the router's e_score_correction_bias is a buffer
    (not a parameter) that the checkpoint stores, one float per expert and layer. Its config
    describes multi-token-prediction modules (use_mtp, num_mtp_modules), which transformers
    does not build."""
    moe = bp.experts
    assert moe is not None
    notes = []
    if c.bool("use_mtp", default=False) and c.opt_int("num_mtp_modules", minimum=0):
        notes.append(
            "The multi-token-prediction modules the config describes are not counted "
            "(transformers does not build or load them)."
        )
    return replace(
        bp,
        stored_extras={
            "the routers' score-correction biases (buffers)": moe.sparse_layers * moe.experts
        },
        notes=[*bp.notes, *notes],
    )


def _olmoe_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """OLMoE (modeling_olmoe.py): RMSNorm over hidden_size on q and over
    (hidden_size // heads) x kv heads on k, in every block."""
    return replace(bp, block_norms=bp.block_norms + bp.d + (bp.d // bp.h) * bp.kv)


# --- DBRX ----------------------------------------------------------------------------------------


def _sub_config(c: Config, name: str) -> Config:
    """A nested config object (DBRX's attn_config and ffn_config); {} when absent or null."""
    value = c.raw.get(name)
    if value is None:
        return Config({})
    if not isinstance(value, dict):
        raise ConfigError(f"config.json field '{name}' must be a JSON object", field=name)
    return Config(value)


def _dbrx_heads(c: Config, x: Dims) -> Dims:
    """DBRX (DbrxAttentionConfig): attn_config.kv_n_heads key/value heads (default 1) of
    d_model // n_heads; ffn_config.ffn_hidden_size (default 3584) is the experts' width."""
    kv = _sub_config(c, "attn_config").int("kv_n_heads", default=1)
    if x.h % kv:
        raise ConfigError(
            f"config.json field 'attn_config.kv_n_heads' ({kv}) must divide 'n_heads' ({x.h})",
            field="attn_config",
        )
    inter = _sub_config(c, "ffn_config").int("ffn_hidden_size", default=3584)
    return replace(x, kv=kv, inter=inter)


def _dbrx(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """DBRX (modeling_dbrx.py): every block routes each token to ffn_config.moe_top_k (1) of
    moe_num_experts (4) GLU experts kept as three parameter tensors [E x f, d] (w1 the gate, v1
    the up projection, w2 the down projection; no bias), which bitsandbytes and PEFT's
    "all-linear" leave alone, and a router nn.Linear `router.layer` (d -> E, no bias). No
    shared expert, no dense block. The head is never tied (DbrxConfig refuses it)."""
    if c.bool("tie_word_embeddings", default=False):
        raise ConfigError(
            "config.json sets 'tie_word_embeddings', which DBRX does not support "
            "(transformers refuses the config)",
            field="tie_word_embeddings",
        )
    ffn = _sub_config(c, "ffn_config")
    experts = ffn.int("moe_num_experts", default=4)
    per_token = ffn.int("moe_top_k", default=1)
    if per_token > experts:
        raise ConfigError(
            f"config.json field 'ffn_config.moe_top_k' ({per_token}) exceeds the number of "
            f"experts ({experts})",
            field="ffn_config",
        )
    d, inter = bp.d, bp.inter
    return replace(
        bp,
        mlp=[],
        experts=b.Experts(
            router=[b.lin("router.layer", d, experts, False, "router")],
            routed=b.gated_mlp(
                d,
                inter,
                names=("w1", "v1", "w2"),
                prefix="experts.mlp.",
                role="expert",
                count=experts,
                module=False,
            ),
            shared=[],
            experts=experts,
            per_token=per_token,
            shared_experts=0,
            intermediate=inter,
            sparse_layers=bp.layers,
        ),
    )


# --- The rows ------------------------------------------------------------------------------------

DECODERS: dict[str, Decoder] = {
    "mixtral": Decoder(
        moe=Moe(experts="num_local_experts", intermediate=None, names=("w1", "w3", "w2"))
    ),
    # Phi-3.5-MoE (modeling_phimoe.py): LayerNorms with bias, Mixtral-style experts, and the
    # attention and LM-head biases its config.json switches on.
    "phimoe": Decoder(
        qkv_bias=("attention_bias", False),
        out_bias=("attention_bias", False),
        norm="ln",
        lm_head_bias=("lm_head_bias", False),
        moe=Moe(experts="num_local_experts", intermediate=None, names=("w1", "w3", "w2")),
    ),
    "qwen2_moe": Decoder(
        qkv_bias=True, moe=Moe(experts="num_experts", shared="qwen", layers="qwen")
    ),
    "qwen3_moe": Decoder(qk_norm="head", moe=Moe(experts="num_experts", layers="qwen")),
    # Qwen3-VL-MoE's language model (modeling_qwen3_vl_moe.py): Qwen3-MoE's layers, but its
    # experts are 3-D parameters (Qwen3VLMoeTextExperts: gate_up_proj [E, d, 2f], down_proj
    # [E, f, d]), which bitsandbytes and PEFT's "all-linear" leave alone, as in gpt-oss.
    "qwen3_vl_moe_text": Decoder(
        qk_norm="head",
        moe=Moe(
            experts="num_experts",
            layers="qwen",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            modules=False,
        ),
    ),
    # OpenAI gpt-oss (modeling_gpt_oss.py; model card arXiv:2508.10925): attention with biases
    # and a learned sink logit per head, alternating banded (128-token) and full attention
    # layers, experts with biases kept as 3-D parameters (gate_up_proj [E, d, 2f] and
    # down_proj [E, f, d]) and a router with a bias. Checkpoints store the experts in MXFP4.
    "gpt_oss": Decoder(
        moe=Moe(
            experts="num_local_experts",
            intermediate=None,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            bias=True,
            router="router",
            modules=False,
        ),
        adjust=_attention_sinks,
    ),
    # Llama 4 (modeling_llama4.py): every interleave_moe_layer_step-th block routes each token
    # to num_experts_per_tok of num_local_experts experts kept as 3-D parameters (gate_up_proj
    # [E, d, 2f], down_proj [E, f, d]) beside one always-on shared expert of the same size;
    # the other blocks have a dense MLP of intermediate_size_mlp. Its q/k norm is an L2
    # normalisation without parameters.
    "llama4_text": Decoder(
        intermediate=("intermediate_size_mlp", "intermediate_size"),
        moe=Moe(
            experts="num_local_experts",
            intermediate="intermediate_size",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            shared="one",
            layers="interleave",
            router="router",
            modules=False,
        ),
    ),
    # GLM-4.5, GLM-4.5-Air, GLM-4.6 (modeling_glm4_moe.py): q/k/v biases where attention_bias
    # (o_proj never has one), partial rotary (no parameters), the first first_k_dense_replace
    # blocks dense, the others n_routed_experts experts as 3-D parameters (gate_up_proj
    # [E, 2f, d], down_proj [E, d, f]) beside n_shared_experts shared experts fused into one
    # gated MLP, a router weight kept as a parameter (no nn.Linear, no bias).
    "glm4_moe": Decoder(
        qkv_bias=("attention_bias", False),
        out_bias=False,
        moe=Moe(
            experts="n_routed_experts",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            shared="deepseek",
            layers="deepseek",
            modules=False,
        ),
        adjust=_glm4_moe,
    ),
    # ERNIE 4.5 MoE (modeling_ernie4_5_moe.py): use_bias on every attention and dense-MLP
    # projection and the LM head; the experts as `_ernie4_5_moe` says; head tied by default.
    "ernie4_5_moe": Decoder(
        qkv_bias=("use_bias", False),
        out_bias=("use_bias", False),
        mlp_bias=("use_bias", False),
        lm_head_bias=("use_bias", False),
        tied=("tie_word_embeddings", True),
        adjust=_ernie4_5_moe,
    ),
    # MiniMax-M2 (modeling_minimax_m2.py): Llama-style attention without biases, RMSNorm over
    # all query heads and over all key heads (q_norm, k_norm), partial rotary (rotary_dim; no
    # parameters); every block routes to num_experts_per_tok of num_local_experts experts of
    # intermediate_size kept as 3-D parameters (gate_up_proj [E, 2f, d], down_proj [E, d, f]),
    # a router weight kept as a parameter, no shared expert; head untied.
    "minimax_m2": Decoder(
        qk_norm="full",
        qkv_bias=False,
        out_bias=False,
        moe=Moe(
            experts="num_local_experts",
            intermediate=None,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            modules=False,
        ),
        adjust=_minimax_m2,
    ),
    # Hunyuan-A13B (modeling_hunyuan_v1_moe.py): q/k/v/o with attention_bias, RMSNorm(head_dim)
    # on q and k (query_layernorm, key_layernorm), the experts as `_hunyuan_moe` says.
    "hunyuan_v1_moe": Decoder(
        qk_norm="head",
        mlp_bias=False,
        adjust=_hunyuan_moe,
    ),
    # OLMoE (modeling_olmoe.py): q/k norms, every block routing to num_experts_per_tok of
    # num_experts experts of intermediate_size kept as 3-D parameters (gate_up_proj [E, 2f, d],
    # down_proj [E, d, f]) and a router weight kept as a parameter; no shared expert.
    "olmoe": Decoder(
        moe=Moe(
            experts="num_experts",
            intermediate=None,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            modules=False,
        ),
        adjust=_olmoe_qk_norm,
    ),
    # Granite 3.0 MoE (modeling_granitemoe.py): Llama-style attention (attention_bias), every
    # block routing to num_experts_per_tok of num_local_experts experts of intermediate_size
    # kept as 3-D parameters (gate_up_proj, down_proj) and a router weight kept as a parameter;
    # its multipliers are scalars in the config.
    "granitemoe": Decoder(
        moe=Moe(
            experts="num_local_experts",
            intermediate=None,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            router="router",
            modules=False,
        ),
    ),
    # DBRX (modeling_dbrx.py): fused Wqkv (d -> d + 2 x kv heads x head_dim) and out_proj
    # without biases, two LayerNorms without bias a block (norm_1, norm_2) and a final one,
    # the experts as `_dbrx` says; sizes partly in attn_config and ffn_config.
    "dbrx": Decoder(
        hidden=("d_model", "hidden_size"),
        layers=("n_layers", "num_hidden_layers"),
        heads=("n_heads", "num_attention_heads"),
        kv_heads=(),
        intermediate=(),
        positions=("max_seq_len", "max_position_embeddings"),
        attention="fused",
        attn_names=("Wqkv", "out_proj"),
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        norm="ln",
        norm_bias=False,
        tied=False,
        shape=_dbrx_heads,
        adjust=_dbrx,
    ),
}
