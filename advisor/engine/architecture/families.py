"""The decoder-only family table: one row per transformers model_type the engine counts exactly.

Each row says how transformers' modeling_<family>.py builds the model; defaults follow its
configuration_<family>.py (github.com/huggingface/transformers, src/transformers/models/). The
published counts each row is checked against are in tests/engine/test_architecture.py and the
bundled configs' index (advisor/model_configs/index.json).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import LIMITS, Config, check_int, heads
from advisor.engine.architecture.decoders import Decoder, Dims, Moe
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.model import AttentionGroup, LinearAttention
from advisor.engine.errors import ConfigError

# --- Head layouts that a config flag decides ---------------------------------------------------


def _multi_query(c: Config, x: Dims) -> Dims:
    """GPT-BigCode and Falcon-7B: one K/V head shared by every query head when multi_query."""
    return replace(x, kv=1 if c.bool("multi_query", default=True) else x.h)


def _falcon_heads(default_new: bool):
    def shape(c: Config, x: Dims) -> Dims:
        if c.bool("new_decoder_architecture", default=default_new):
            h, kv, hd = heads(
                c, x.d, ("num_attention_heads", "n_head"), ("num_kv_heads", "n_head_kv")
            )
            return replace(x, h=h, kv=kv, hd=hd)
        return _multi_query(c, x)

    return shape


def _falcon_norms(default_new: bool):
    def adjust(c: Config, bp: b.Blueprint) -> b.Blueprint:
        if c.bool("new_decoder_architecture", default=default_new):
            norms = c.int("num_ln_in_parallel_attn", default=2)
        else:
            norms = 1 if c.bool("parallel_attn", default=True) else 2
        return replace(bp, block_norms=norms * b.ln(bp.d))

    return adjust


def _mpt_width(c: Config, x: Dims) -> Dims:
    return replace(x, inter=c.int("expansion_ratio", default=4) * x.d)


def _opt_projection(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """OPT-350m embeds at word_embed_proj_dim and projects in and out (no bias); a model with
    post-norm blocks (do_layer_norm_before false) has no final LayerNorm."""
    proj = c.int("word_embed_proj_dim", default=bp.d)
    affine = c.bool("layer_norm_elementwise_affine", default=True)
    norm = b.ln(bp.d) if affine else 0
    outside = 2 * bp.d * proj if proj != bp.d else 0
    if c.bool("do_layer_norm_before", default=True) and not c.bool(
        "_remove_final_layer_norm", default=False
    ):
        outside += norm
    return replace(
        bp,
        embedding=bp.embedding - bp.vocab * bp.d + bp.vocab * proj,
        lm_head=0 if bp.tied else bp.vocab * proj,
        block_norms=2 * norm,
        outside=outside,
    )


def _attention_sinks(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """gpt-oss: one learned sink logit per attention head in every block."""
    return replace(bp, block_norms=bp.block_norms + bp.h)


# The flash-linear-attention kernels' chunk (chunk_gated_delta_rule: 64 tokens), whose
# within-chunk matrix (one row of the chunk per token and value head) is kept for backward.
_DELTA_RULE_CHUNK = 64


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
        d, layers = bp.d, bp.layers
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
            linear = types.count("linear_attention")
        else:
            linear = layers - layers // c.int("full_attention_interval", default=4)
        nk = c.int("linear_num_key_heads", default=16)
        nv = c.int("linear_num_value_heads", default=32)
        dk = c.int("linear_key_head_dim", default=128)
        dv = c.int("linear_value_head_dim", default=128)
        kernel = c.int("linear_conv_kernel_dim", default=4)
        keys, values = nk * dk, nv * dv
        conv = 2 * keys + values
        if fused:
            mixer = [
                b.lin("in_proj_qkvz", d, conv + values, False, "linear_attn_qkvz"),
                b.lin("in_proj_ba", d, 2 * nv, False, "linear_attn_ba"),
            ]
        else:
            mixer = [
                b.lin("in_proj_qkv", d, conv, False, "linear_attn_qkv"),
                b.lin("in_proj_z", d, values, False, "linear_attn_z"),
                b.lin("in_proj_b", d, nv, False, "linear_attn_b"),
                b.lin("in_proj_a", d, nv, False, "linear_attn_a"),
            ]
        mixer.append(b.lin("out_proj", values, d, False, "linear_attn_out"))
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
        # The MTP module (vLLM's qwen3_5_mtp.py): a 2d -> d projection, three norms and
        # full-attention blocks with the model's MLP or experts.
        # (bp.block_norms still holds the q/k norms here.)
        mtp_block = (
            b.total(attention)
            + bp.block_norms
            + (bp.experts.params if bp.experts else b.total(bp.mlp))
        )
        mtp = (2 * d * d + 3 * d + mtp_layers * mtp_block) if mtp_layers else 0
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


def _xielu(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Apertus (modeling_apertus.py): its MLP's xIELU activation (hidden_act "xielu", the
    default) learns two scalars per block (alpha_p, alpha_n) and keeps two scalar buffers
    (beta, eps) that the checkpoint stores."""
    if c.str("hidden_act", "xielu") != "xielu":
        return bp
    return replace(
        bp,
        block_norms=bp.block_norms + 2,
        stored_extras={"the xIELU activations' beta and eps (buffers)": 2 * bp.layers},
    )


# --- DeepSeek-V3.2: DeepSeek Sparse Attention ---------------------------------------------------


def _deepseek_sparse_attention(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """DeepSeek-V3.2-Exp and V3.2 (modeling_deepseek_v32.py; DeepSeek-V3.2-Exp report, "DeepSeek
    Sparse Attention"): DeepSeek-V3's MLA (always with a query latent) and MoE, plus a lightning
    indexer in every attention layer: wq_b (q_lora_rank -> index_n_heads x index_head_dim), wk
    (hidden -> index_head_dim), a LayerNorm (weight and bias) on that key and weights_proj
    (hidden -> index_n_heads), none with bias. The indexer scores every cached token for each
    query and the attention reads only the index_topk best: the sparse kernels (FlashMLA in
    vLLM and SGLang) read those alone, which is how the attention is costed here; transformers'
    eager and SDPA paths compute every score and mask the rest. The indexer itself still
    scores the whole context: index_n_heads x index_head_dim products per cached token and
    query (no value pass: half an attention read of that width). The cache keeps MLA's latent
    and rotary key and the indexer's key per token and layer. The router's
    e_score_correction_bias is a buffer in transformers 5; the checkpoint stores it and a
    multi-token-prediction layer (model.layers.<num_hidden_layers>: a sparse block with its
    indexer, enorm, hnorm, eh_proj 2d -> d, shared_head.norm and its own copy of the embedding
    and head), which transformers skips on load."""
    moe = bp.experts
    assert moe is not None
    d = bp.d
    if not c.opt_int("q_lora_rank"):
        raise ConfigError(
            "config.json of a DeepSeek-V3.2 model needs 'q_lora_rank': its attention and "
            "indexer read the query latent (transformers builds no other form)",
            field="q_lora_rank",
        )
    q_rank = c.int("q_lora_rank")
    n_heads = c.int("index_n_heads", default=64)
    width = c.int("index_head_dim", default=128)
    topk = c.int("index_topk", default=2048)
    indexer = [
        b.lin("indexer.wq_b", q_rank, n_heads * width, False, "attn_q"),
        b.lin("indexer.wk", d, width, False, "attn_k"),
        b.lin("indexer.weights_proj", d, n_heads, False, "attn_k"),
    ]
    cache = (bp.kv_cache_width or 0) + width
    groups = [
        AttentionGroup(
            layers=bp.layers,
            query_width=bp.h * bp.hd,
            kv_heads=bp.kv,
            head_dim=bp.hd,
            reads=topk,
            cache_width=cache,
        ),
        # The indexer's scoring of every cached token (its keys are in the cache above).
        AttentionGroup(
            layers=bp.layers,
            query_width=n_heads * width // 2,
            kv_heads=1,
            head_dim=width,
            caches=False,
        ),
    ]
    attention = [*bp.attention, *indexer]
    norms = bp.block_norms + b.ln(width)
    stored = {"the routers' score-correction biases (buffers)": moe.sparse_layers * moe.experts}
    mtp_layers = c.opt_int("num_nextn_predict_layers", minimum=0) or 0
    if mtp_layers:
        block = b.total(attention) + norms + moe.params + moe.experts
        stored["the multi-token-prediction layer, which transformers does not load"] = (
            mtp_layers * (2 * d * d + 3 * d + block)
        )
        stored["that layer's own copy of the embedding and LM head"] = mtp_layers * 2 * bp.vocab * d
    return replace(
        bp,
        attention=attention,
        block_norms=norms,
        kv_cache_width=cache,
        attention_groups=groups,
        stored_extras=stored,
        notes=[
            *(n for n in bp.notes if not n.startswith("Multi-head latent attention caches")),
            f"DeepSeek Sparse Attention: each query attends to at most {topk:,} tokens that "
            f"a lightning indexer ({n_heads} heads of {width}) picks from the whole context; the "
            f"cache holds {cache} values per token and layer (MLA's {cache - width} and the "
            f"indexer's {width}). Costed as the sparse kernels (vLLM, SGLang) run it; "
            "transformers' own attention computes every score and masks all but those tokens.",
        ],
    )


# --- Local (windowed) attention layers, and the families added in engine 1.13 -----------------


def _window_groups(bp: b.Blueprint, windows: list[int | None]) -> list[AttentionGroup]:
    """One AttentionGroup per distinct window (None: the whole context), so that the KV cache
    and the attention reads of windowed layers stop at their window (memory_terms.kv_cache_bytes,
    ModelShape.attention_reads)."""
    counts: dict[int | None, int] = {}
    for window in windows:
        counts[window] = counts.get(window, 0) + 1
    return [
        AttentionGroup(
            layers=n, query_width=bp.h * bp.hd, kv_heads=bp.kv, head_dim=bp.hd, window=window
        )
        for window, n in counts.items()
    ]


def _layer_types(c: Config, layers: int) -> list[str] | None:
    """config.json's `layer_types` (recent transformers), checked, or None when absent."""
    types = c.raw.get("layer_types")
    if not isinstance(types, list) or not types:
        return None
    if len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
        raise ConfigError(
            f"config.json field 'layer_types' must name {layers} layers, each "
            "'sliding_attention' or 'full_attention'",
            field="layer_types",
        )
    return types


def _starcoder2(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """StarCoder2 (modeling_starcoder2.py): every layer attends within `sliding_window` tokens
    when the config sets one (create_sliding_window_causal_mask; transformers' DynamicCache
    then keeps a sliding-window layer per block), else the whole context."""
    window = c.opt_int("sliding_window")
    if window is None:
        return bp
    return replace(
        bp,
        attention_groups=_window_groups(bp, [window] * bp.layers),
        notes=[*bp.notes, f"Every layer attends within a {window:,}-token sliding window."],
    )


def _gpt_neo(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """GPT-Neo (configuration_gpt_neo.py): `attention_types` ([[["global", "local"], 12]]) lists
    each layer's kind, repeated; a local layer attends to the last `window_size` (256) tokens,
    but modeling_gpt_neo.py only masks the older ones: its eager attention scores every token
    pair and its DynamicCache keeps every token (the config names no sliding_window). So the
    local layers cost memory and time as global ones do, unlike Gemma 2's; the note says so."""
    # GPTNeoConfig's default when absent or null: 24 layers alternating.
    types = c.raw.get("attention_types") or [[["global", "local"], 12]]
    kinds: list[str] = []
    if isinstance(types, list):
        for item in types:
            if (
                not isinstance(item, list | tuple)
                or len(item) != 2
                or not isinstance(item[0], list)
                or not all(k in ("global", "local") for k in item[0])
                or not isinstance(item[1], int)
                or isinstance(item[1], bool)
                or not 0 <= item[1] <= bp.layers
            ):
                kinds = []
                break
            kinds += item[0] * item[1]
            if len(kinds) > bp.layers:
                break
    if len(kinds) != bp.layers:
        raise ConfigError(
            f"config.json field 'attention_types' must expand to {bp.layers} layers of "
            "'global' or 'local' attention (e.g. [[[\"global\", \"local\"], 12]])",
            field="attention_types",
        )
    window = c.int("window_size", default=256)
    local = kinds.count("local")
    notes = [
        f"{local} of {bp.layers} layers attend within a {window}-token local window; "
        "transformers masks the older tokens rather than skipping them, so those layers "
        "cache and score the whole context (counted so)."
    ]
    return replace(bp, notes=[*bp.notes, *notes] if local else bp.notes)


def _cohere_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Command R / Aya (modeling_cohere.py): where use_qk_norm (Command R+), a bias-free
    LayerNorm weight over (heads, head_dim) on q and over (kv heads, head_dim) on k."""
    if not c.bool("use_qk_norm", default=False):
        return bp
    return replace(bp, block_norms=bp.block_norms + (bp.h + bp.kv) * bp.hd)


def _cohere2(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Command R7B / Command A (configuration_cohere2.py): `layer_types`, else every
    sliding_window_pattern-th layer (4) attends to the whole context and the others within
    `sliding_window` tokens (a sliding-window cache layer each); a null window: all global."""
    types = _layer_types(c, bp.layers)
    if types is None:
        pattern = c.int("sliding_window_pattern", default=4)
        types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(bp.layers)
        ]
    window = c.opt_int("sliding_window") if "sliding_window" in c.raw else 4096
    if window is None:
        return bp
    local = types.count("sliding_attention")
    return replace(
        bp,
        attention_groups=_window_groups(
            bp, [window if t == "sliding_attention" else None for t in types]
        ),
        notes=[
            *bp.notes,
            f"{local} of {bp.layers} layers attend within a {window:,}-token window.",
        ],
    )


def _olmoe_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """OLMoE (modeling_olmoe.py): RMSNorm over hidden_size on q and over
    (hidden_size // heads) x kv heads on k, in every block."""
    return replace(bp, block_norms=bp.block_norms + bp.d + (bp.d // bp.h) * bp.kv)


def _stablelm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """StableLM (modeling_stablelm.py): input_layernorm, and post_attention_layernorm only
    without use_parallel_residual (LayerNorms with bias); where qk_layernorm, one bias-free
    LayerNorm(head_dim) per query head and per key head. Partial rotary has no parameters."""
    norms = (1 if c.bool("use_parallel_residual", default=False) else 2) * b.ln(bp.d)
    if c.bool("qk_layernorm", default=False):
        norms += (bp.h + bp.kv) * bp.hd
    return replace(bp, block_norms=norms)


def _ministral3_heads(c: Config, x: Dims) -> Dims:
    """Ministral 3 (Ministral3Config): head_dim is 128 when config.json omits it, not
    hidden_size // heads."""
    return replace(x, hd=c.int("head_dim", default=128))


def _glm_heads(c: Config, x: Dims) -> Dims:
    """GLM-4 (GlmConfig, Glm4Config): head_dim defaults to 128, not hidden_size // heads."""
    return replace(x, hd=c.int("head_dim", default=128))


# --- Engine 1.x round 3: Hunyuan dense, BioGPT, CodeGen, XGLM, DBRX, Persimmon, Fuyu ----------


def _hunyuan_dense_heads(c: Config, x: Dims) -> Dims:
    """Hunyuan dense (modeling_hunyuan_v1_dense.py) sizes its heads by config.head_dim alone:
    HunYuanDenseV1Config keeps head_dim None when config.json omits it and the attention then
    fails to build (None ** -0.5), so a config without it is refused rather than guessed. The
    released configs all give it (128), beside an `attention_head_dim` transformers ignores."""
    if c.raw.get("head_dim") is None:
        raise ConfigError(
            "config.json of a Hunyuan dense model needs 'head_dim': transformers builds its "
            "attention from that field alone and fails without it",
            field="head_dim",
        )
    return replace(x, hd=c.int("head_dim"))


def _hunyuan_dense(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Hunyuan dense: transformers always builds the RMSNorm(head_dim) on q and on k (the row's
    qk_norm), whatever use_qk_norm says, and ignores use_cla (cross-layer KV sharing in
    Tencent's own code): every layer keeps its own KV cache here, as transformers runs it."""
    if c.bool("use_cla", default=False):
        return replace(
            bp,
            notes=[
                *bp.notes,
                "use_cla (cross-layer KV sharing) is set, but transformers ignores it: every "
                "layer is counted with its own KV cache, as transformers runs the model.",
            ],
        )
    return bp


def _lm_head_bias_when_tied(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """CodeGen (modeling_codegen.py): lm_head is nn.Linear(d, vocab) with a bias; where the
    config ties it (tie_word_embeddings, off in every release) only the weight is shared and the
    bias stays a parameter of its own."""
    return replace(bp, outside=bp.outside + bp.vocab) if bp.tied else bp


def _xglm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """XGLM (modeling_xglm.py): sinusoidal positions (a buffer, offset 2, regrown for longer
    inputs: no parameters); with add_cross_attention every block would also attend to an
    encoder's states, a layout no released XGLM has and the estimator does not cost."""
    if c.bool("add_cross_attention", default=False):
        raise ConfigError(
            "config.json sets 'add_cross_attention': XGLM blocks with cross-attention to an "
            "encoder are not a model the estimator counts (no released XGLM has them)",
            field="add_cross_attention",
        )
    return bp


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


def _persimmon_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Persimmon (modeling_persimmon.py): where qk_layernorm (on by default, and in every
    release) a LayerNorm(hidden // heads) with weight and bias on q and on k in every block."""
    if not c.bool("qk_layernorm", default=True):
        return bp
    return replace(bp, block_norms=bp.block_norms + 2 * b.ln(bp.hd))


# --- The table -----------------------------------------------------------------------------

_LLAMA = Decoder()
_GPT2 = Decoder(
    hidden=("n_embd", "hidden_size"),
    layers=("n_layer", "num_hidden_layers"),
    heads=("n_head", "num_attention_heads"),
    kv_heads=(),
    intermediate=("n_inner",),
    inter_default=4,
    positions=("n_positions", "max_position_embeddings"),
    position_table=0,
    attention="fused",
    attn_names=("c_attn", "attn.c_proj"),  # Conv1D (in, out): the same maps as Linear
    qkv_bias=True,
    out_bias=True,
    mlp="plain",
    mlp_names=("c_fc", "mlp.c_proj"),
    mlp_bias=True,
    norm="ln",
    tied=("tie_word_embeddings", True),
)

DECODERS: dict[str, Decoder] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    # IBM Granite 3.x: Llama's layers; its embedding, residual and logit multipliers are
    # scalars in the config, not parameters (modeling_granite.py).
    "granite": _LLAMA,
    # Qwen2's q/k/v projections always have biases (modeling_qwen2.py: bias=True).
    "qwen2": Decoder(qkv_bias=True),
    "qwen3": Decoder(qk_norm="head"),
    "gemma": Decoder(tied=("tie_word_embeddings", True)),
    # Gemma 2 and 3 add post-attention and post-feedforward norms: four per block.
    "gemma2": Decoder(tied=("tie_word_embeddings", True), norms_per_block=4),
    "gemma3_text": Decoder(tied=("tie_word_embeddings", True), norms_per_block=4, qk_norm="head"),
    # OLMo (v1) uses LayerNorm without learnable parameters (modeling_olmo.py OlmoLayerNorm).
    "olmo": Decoder(norm="none"),
    # OLMo 2: post-attention and post-feedforward RMSNorms, q/k norms over all heads.
    "olmo2": Decoder(qk_norm="full"),
    "phi3": Decoder(
        attention="fused",
        attn_names=("qkv_proj", "o_proj"),
        qkv_bias=False,
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
    ),
    # Phi-1/1.5/2: attention and MLP in parallel after one LayerNorm, biases everywhere.
    "phi": Decoder(
        attn_names=("q_proj", "k_proj", "v_proj", "dense"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("fc1", "fc2"),
        mlp_bias=True,
        norm="ln",
        norms_per_block=1,
        qk_norm="ln_head",
        lm_head_bias=True,
    ),
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
    "deepseek_v2": Decoder(
        attention="latent",
        moe=Moe(experts="n_routed_experts", shared="deepseek", layers="deepseek"),
    ),
    "deepseek_v3": Decoder(
        attention="latent",
        moe=Moe(experts="n_routed_experts", shared="deepseek", layers="deepseek", router_bias=True),
    ),
    # DeepSeek-V3.2-Exp and V3.2 (modeling_deepseek_v32.py): DeepSeek-V3's layers with the
    # experts as 3-D parameters (gate_up_proj [E, 2f, d], down_proj [E, d, f]) and the router
    # weight a parameter, as transformers 5 builds them, and the indexer `_deepseek_sparse_
    # attention` adds; mlp_layer_types (else first_k_dense_replace) says which blocks route.
    "deepseek_v32": Decoder(
        attention="latent",
        moe=Moe(
            experts="n_routed_experts",
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            shared="deepseek",
            layers="types",
            modules=False,
        ),
        adjust=_deepseek_sparse_attention,
    ),
    # Ministral 3 (3B, 8B, 14B; modeling_ministral3.py) and Devstral 2: Mistral's layers (q/k/v/o
    # and a gated MLP without biases, two RMSNorms a block) with head_dim 128 by default and
    # Llama 4's position-dependent query scaling (no parameters); every layer attends within
    # `sliding_window` tokens where the config sets one (the releases: null). Head untied by
    # default (the 3B ties it).
    "ministral3": Decoder(shape=_ministral3_heads, adjust=_starcoder2),
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
    # SmolLM3 (modeling_smollm3.py): Llama's layers; every no_rope_layer_interval-th layer skips
    # the rotary embedding (no parameters change); the head is tied by default.
    "smollm3": Decoder(tied=("tie_word_embeddings", True)),
    # OLMo 3 (modeling_olmo3.py): OLMo 2's layers (post-attention and post-feedforward norms,
    # q/k norms over all heads); three of four layers attend in a 4,096-token window (no
    # parameters change; layer_types names them).
    "olmo3": Decoder(qk_norm="full"),
    # Seed-OSS (modeling_seed_oss.py): Llama's layers with q/k/v biases (attention_bias, on by
    # default) and an output-projection bias only where attention_out_bias.
    "seed_oss": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=("attention_out_bias", False),
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
    # EXAONE 4.0 (modeling_exaone4.py): Llama's projections without biases, RMSNorm(head_dim)
    # on q and k, norms after attention and after the MLP (two a block, none before); three
    # of four layers attend in a sliding window (layer_types; no parameters change).
    "exaone4": Decoder(qk_norm="head"),
    # Apertus (modeling_apertus.py): q/k/v/o with attention_bias, RMSNorm(head_dim) on q and k,
    # a non-gated MLP (up_proj, xIELU, down_proj) without biases.
    "apertus": Decoder(
        mlp="plain",
        mlp_names=("up_proj", "down_proj"),
        mlp_bias=False,
        qk_norm="head",
        adjust=_xielu,
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
    "gpt2": _GPT2,
    # GPT-1: GPT-2's block with post-norm LayerNorms and no final LayerNorm; head tied.
    "openai-gpt": replace(_GPT2, final_norm=False),
    # StarCoder / SantaCoder: GPT-2 blocks with multi-query attention.
    "gpt_bigcode": replace(_GPT2, shape=_multi_query),
    "mpt": Decoder(
        hidden=("d_model", "hidden_size"),
        layers=("n_layers", "num_hidden_layers"),
        heads=("n_heads", "num_attention_heads"),
        kv_heads=(),
        intermediate=(),
        positions=("max_seq_len", "max_position_embeddings"),
        attention="fused",
        attn_names=("Wqkv", "out_proj"),
        qkv_bias=("!no_bias", True),
        out_bias=("!no_bias", True),
        mlp="plain",
        mlp_names=("up_proj", "down_proj"),
        mlp_bias=("!no_bias", True),
        norm="ln",
        norm_bias=("!no_bias", True),
        tied=True,
        shape=_mpt_width,
    ),
    "falcon": Decoder(
        hidden=("hidden_size", "n_embd"),
        layers=("num_hidden_layers", "n_layer"),
        heads=("num_attention_heads", "n_head"),
        kv_heads=(),
        intermediate=("ffn_hidden_size",),
        inter_default=4,
        attention="fused",
        attn_names=("query_key_value", "dense"),
        qkv_bias=("bias", False),
        out_bias=("bias", False),
        mlp="plain",
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"),
        mlp_bias=("bias", False),
        norm="ln",
        tied=("tie_word_embeddings", True),
        shape=_falcon_heads(False),
        adjust=_falcon_norms(False),
    ),
    "gpt_neox": Decoder(
        kv_heads=(),
        attention="fused",
        attn_names=("query_key_value", "dense"),
        qkv_bias=("attention_bias", True),
        out_bias=("attention_bias", True),
        mlp="plain",
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"),
        mlp_bias=True,
        norm="ln",
    ),
    "gptj": Decoder(
        hidden=("n_embd", "hidden_size"),
        layers=("n_layer", "num_hidden_layers"),
        heads=("n_head", "num_attention_heads"),
        kv_heads=(),
        intermediate=("n_inner",),
        inter_default=4,
        positions=("n_positions", "max_position_embeddings"),
        attn_names=("q_proj", "k_proj", "v_proj", "out_proj"),
        qkv_bias=False,
        out_bias=False,
        mlp="plain",
        mlp_names=("fc_in", "fc_out"),
        mlp_bias=True,
        norm="ln",
        norms_per_block=1,
        lm_head_bias=True,
    ),
    "opt": Decoder(
        kv_heads=(),
        intermediate=("ffn_dim",),
        position_table=2,  # fairseq's learned positions keep 2 extra rows
        attn_names=("q_proj", "k_proj", "v_proj", "out_proj"),
        qkv_bias=("enable_bias", True),
        out_bias=("enable_bias", True),
        mlp="plain",
        mlp_names=("fc1", "fc2"),
        mlp_bias=("enable_bias", True),
        norm="ln",
        tied=("tie_word_embeddings", True),
        adjust=_opt_projection,
    ),
    "bloom": Decoder(
        hidden=("hidden_size", "n_embed"),
        layers=("n_layer", "num_hidden_layers"),
        heads=("n_head", "num_attention_heads"),
        kv_heads=(),
        intermediate=(),
        inter_default=4,
        positions=(),
        attention="fused",
        attn_names=("query_key_value", "dense"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"),
        mlp_bias=True,
        norm="ln",
        tied=("tie_word_embeddings", True),
        embed_norm=True,
        notes=("BLOOM uses ALiBi: no position embeddings, no length limit in the config.",),
    ),
    # StarCoder2 (modeling_starcoder2.py): q/k/v/o and a non-gated MLP (c_fc, c_proj) with
    # biases where use_bias (the default), LayerNorms with bias, grouped-query attention, every
    # layer within `sliding_window` tokens; head tied by default.
    "starcoder2": Decoder(
        qkv_bias=("use_bias", True),
        out_bias=("use_bias", True),
        mlp="plain",
        mlp_names=("c_fc", "c_proj"),
        mlp_bias=("use_bias", True),
        norm="ln",
        tied=("tie_word_embeddings", True),
        adjust=_starcoder2,
    ),
    # GPT-Neo (modeling_gpt_neo.py): learned positions, q/k/v without bias and out_proj with,
    # a non-gated MLP (c_fc, c_proj; nn.Linear with bias) of intermediate_size (4 x hidden when
    # null), LayerNorms with bias, alternating global and local layers; head tied.
    "gpt_neo": Decoder(
        layers=("num_layers", "num_hidden_layers"),
        heads=("num_heads", "num_attention_heads"),
        kv_heads=(),
        inter_default=4,
        position_table=0,
        attn_names=("q_proj", "k_proj", "v_proj", "out_proj"),
        qkv_bias=False,
        out_bias=True,
        mlp="plain",
        mlp_names=("c_fc", "c_proj"),
        mlp_bias=True,
        norm="ln",
        tied=("tie_word_embeddings", True),
        adjust=_gpt_neo,
    ),
    # Command R / Aya 23 / Aya Expanse (modeling_cohere.py): attention and gated MLP run in
    # parallel after one bias-free LayerNorm (CohereLayerNorm: a weight only), biases where
    # attention_bias, optional q/k norms; logit_scale is a scalar; head tied by default.
    "cohere": Decoder(
        qkv_bias=("attention_bias", False),
        out_bias=("attention_bias", False),
        norm="ln",
        norm_bias=False,
        norms_per_block=1,
        tied=("tie_word_embeddings", True),
        adjust=_cohere_qk_norm,
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
    # StableLM 2 / 3B-4E1T (modeling_stablelm.py): q/k/v biases where use_qkv_bias, o_proj
    # without, a gated MLP, LayerNorms with bias, the norms `_stablelm` says; head untied.
    "stablelm": Decoder(
        qkv_bias=("use_qkv_bias", False),
        out_bias=False,
        norm="ln",
        adjust=_stablelm,
    ),
    # GLM-4-0414 (modeling_glm4.py): q/k/v biases where attention_bias (default on), o_proj
    # without, a fused gate_up_proj, four RMSNorms a block (before and after attention and the
    # MLP), partial rotary (no parameters), head_dim 128 by default; head untied.
    "glm4": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
        norms_per_block=4,
        shape=_glm_heads,
    ),
    # GLM-4 (glm-4-9b-chat-hf; modeling_glm.py): GLM-4-0414's layers with two norms a block.
    "glm": Decoder(
        qkv_bias=("attention_bias", True),
        out_bias=False,
        mlp="fused_gated",
        mlp_names=("gate_up_proj", "down_proj"),
        mlp_bias=False,
        shape=_glm_heads,
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
    # Hunyuan 0.5B-7B dense (modeling_hunyuan_v1_dense.py): Llama's layers (q/k/v/o with
    # attention_bias, a gated MLP never with bias) plus RMSNorm(head_dim) on q and k
    # (query_layernorm, key_layernorm); head_dim from the config only; head untied by default
    # (the releases tie it).
    "hunyuan_v1_dense": Decoder(
        qk_norm="head",
        mlp_bias=False,
        shape=_hunyuan_dense_heads,
        adjust=_hunyuan_dense,
    ),
    # BioGPT (modeling_biogpt.py): fairseq's decoder. Learned positions with 2 extra rows
    # (offset 2), q/k/v/out_proj and fc1/fc2 with biases, two LayerNorms a block and a final
    # one, one head per query (no grouped KV), the output projection tied to the embedding.
    "biogpt": Decoder(
        kv_heads=(),
        position_table=2,
        attn_names=("q_proj", "k_proj", "v_proj", "out_proj"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("fc1", "fc2"),
        mlp_bias=True,
        norm="ln",
        tied=("tie_word_embeddings", True),
    ),
    # CodeGen 1 (and CodeGen2, whose configs name transformers' CodeGenForCausalLM; same shapes)
    # (modeling_codegen.py): GPT-J's block (attention and MLP in parallel after one LayerNorm,
    # partial rotary) with q/k/v fused into qkv_proj, no attention biases, fc_in/fc_out with
    # biases, lm_head with a bias; head untied. Old checkpoints also store a causal-mask buffer
    # per layer (attn.causal_mask), which transformers does not load.
    "codegen": Decoder(
        hidden=("n_embd", "hidden_size"),
        layers=("n_layer", "num_hidden_layers"),
        heads=("n_head", "num_attention_heads"),
        kv_heads=(),
        intermediate=("n_inner",),
        inter_default=4,
        positions=("n_positions", "max_position_embeddings"),
        attention="fused",
        attn_names=("qkv_proj", "out_proj"),
        qkv_bias=False,
        out_bias=False,
        mlp="plain",
        mlp_names=("fc_in", "fc_out"),
        mlp_bias=True,
        norm="ln",
        norms_per_block=1,
        lm_head_bias=True,
        adjust=_lm_head_bias_when_tied,
    ),
    # XGLM (modeling_xglm.py): fairseq's decoder (BioGPT's layers) with sinusoidal positions
    # (no parameters); head tied to the embedding.
    "xglm": Decoder(
        hidden=("d_model", "hidden_size"),
        layers=("num_layers", "num_hidden_layers"),
        heads=("attention_heads", "num_attention_heads"),
        kv_heads=(),
        intermediate=("ffn_dim", "intermediate_size"),
        attn_names=("q_proj", "k_proj", "v_proj", "out_proj"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("fc1", "fc2"),
        mlp_bias=True,
        norm="ln",
        tied=("tie_word_embeddings", True),
        adjust=_xglm,
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
    # Persimmon (modeling_persimmon.py): GPT-NeoX's layout (fused query_key_value and dense,
    # both with bias; a plain MLP dense_h_to_4h / dense_4h_to_h with biases, squared ReLU; two
    # LayerNorms a block and a final one) with the q/k LayerNorms `_persimmon_qk_norm` adds;
    # partial rotary (no parameters); head untied by default.
    "persimmon": Decoder(
        kv_heads=(),
        attention="fused",
        attn_names=("query_key_value", "dense"),
        qkv_bias=True,
        out_bias=True,
        mlp="plain",
        mlp_names=("dense_h_to_4h", "dense_4h_to_h"),
        mlp_bias=True,
        norm="ln",
        adjust=_persimmon_qk_norm,
    ),
}
# Falcon-7B/40B configs from before transformers 4.33 (custom code): same layout.
DECODERS["RefinedWebModel"] = replace(DECODERS["falcon"], label="falcon")
# Command R7B / Command A (modeling_cohere2.py): Cohere's parallel block without q/k norms,
# three sliding-window layers to one global.
DECODERS["cohere2"] = replace(DECODERS["cohere"], adjust=_cohere2)
DECODERS["RefinedWeb"] = replace(
    DECODERS["falcon"], label="falcon", shape=_falcon_heads(True), adjust=_falcon_norms(True)
)


def fuyu_blueprint(c: Config, family: str) -> b.Blueprint:
    """Fuyu (modeling_fuyu.py): a Persimmon decoder (FuyuConfig's text_config, or the flat
    Persimmon fields the released config.json keeps at its top level) that reads images as
    patches: vision_embed_tokens, one nn.Linear (patch_size² x num_channels -> hidden, with a
    bias), turns each 30 x 30 patch into a token; there is no vision encoder. The head is
    Fuyu's own lm_head (untied by default)."""
    text = c.raw.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise ConfigError(
            "config.json field 'text_config' must be a JSON object", field="text_config"
        )
    inner = {k: v for k, v in c.raw.items() if k != "text_config"} | (text or {})
    inner["tie_word_embeddings"] = c.raw.get("tie_word_embeddings", False)
    bp = decoder_blueprint(Config(inner), "persimmon", DECODERS["persimmon"])
    patch = c.int("patch_size", default=30)
    channels = c.int("num_channels", default=3)
    vision = b.lin("vision_embed_tokens", patch * patch * channels, bp.d, True, "vision_proj")
    return replace(
        bp,
        family="fuyu",
        outside=bp.outside + vision.params,
        notes=[
            *bp.notes,
            f"Images enter as {patch} x {patch}-pixel patches, each one token through a single "
            f"linear layer ({vision.params:,} parameters); there is no vision encoder.",
        ],
    )
