"""DeepSeek-V2, V3 and V3.2: multi-head latent attention (MLA) and DeepSeek's experts, and
V3.2's DeepSeek Sparse Attention (a lightning indexer picking the tokens each query reads).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.decoders import Decoder, Moe
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.errors import ConfigError

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


# --- The rows ------------------------------------------------------------------------------------

DECODERS: dict[str, Decoder] = {
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
}
