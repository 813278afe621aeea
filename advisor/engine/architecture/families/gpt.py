"""GPT-era decoders: GPT-2 and the decoders built on or beside it before Llama (GPT-1,
StarCoder, MPT, Falcon, GPT-NeoX, GPT-J, OPT, BLOOM, GPT-Neo, BioGPT, CodeGen, XGLM, Persimmon),
and Fuyu, a Persimmon decoder that reads image patches. LayerNorms, plain MLPs, learned or no
position tables, and the head layouts their config flags decide.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import Decoder, Dims
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
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


# --- Layers the config switches on or off -------------------------------------------------------


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


def _persimmon_qk_norm(c: Config, bp: b.Blueprint) -> b.Blueprint:
    """Persimmon (modeling_persimmon.py): where qk_layernorm (on by default, and in every
    release) a LayerNorm(hidden // heads) with weight and bias on q and on k in every block."""
    if not c.bool("qk_layernorm", default=True):
        return bp
    return replace(bp, block_norms=bp.block_norms + 2 * b.ln(bp.hd))


# --- The rows ------------------------------------------------------------------------------------

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
