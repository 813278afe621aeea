"""Gemma 4 (transformers modeling_gemma4.py, configuration_gemma4.py): E2B, E4B, 26B-A4B, 31B.

Its layers are not alike, so the Blueprint lists each projection with the number of blocks that
have it and the attention as groups (`AttentionGroup`):
- Sliding layers use head_dim; full layers (every layer_types "full_attention", the last one
  always) use global_head_dim. Where attention_k_eq_v is set, a full layer has
  num_global_key_value_heads and no v_proj (its values are its keys before their norm and
  rotary embedding), but still caches keys and values separately.
- The last num_kv_shared_layers layers (E2B 20 of 35, E4B 18 of 42) have no k/v projections
  and no cache: they read the last caching layer of their kind. With use_double_wide_mlp their
  MLP is twice as wide.
- Per-layer embeddings (hidden_size_per_layer_input P > 0, the E models): a table of
  vocab_size_per_layer_input x layers x P read one row per token (no matmul), projected from
  the hidden state (hidden x layers*P, one norm of P), and in each block a gate (hidden -> P),
  a projection (P -> hidden) and a norm.
- 26B-A4B (enable_moe_block): every block keeps its dense MLP beside num_experts experts, of
  which top_k_experts run per token; the experts are 3-D parameters (gate_up_proj, down_proj),
  the router a Linear with a scale per hidden unit and per expert; three more norms a block.
- Four norms a block, q and k norms of the layer's head size (v's has no weight), the final
  norm; the LM head is tied. Vision tower: a patch projection, a learned position table of
  2 x position_embedding_size, blocks of q/k/v/o and a gated MLP without bias, q/k norms and
  four norms; no pooler parameters. Audio tower (E models): a conformer, counted below.
Checked to the parameter against the Hub's totals of all four releases (index.json), which
also store a scalar per layer and, for the large models, the vision tower's standardisation
buffers, and for the E models the k/v projections of their KV-shared layers (not loaded).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.errors import ConfigError

_TEXT_DEFAULTS = {
    "vocab_size": 262_144,
    "head_dim": 256,
    "global_head_dim": 512,
    "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,
}
_VISION_DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "patch_size": 16,
    "position_embedding_size": 10_240,
}
_AUDIO_DEFAULTS = {
    "hidden_size": 1024,
    "num_hidden_layers": 12,
    "num_attention_heads": 8,
    "subsampling_conv_channels": [128, 32],
    "conv_kernel_size": 5,
    "output_proj_dims": 1536,
}


def _layer_kinds(c: Config, layers: int) -> list[bool]:
    """True for each full-attention layer: layer_types, else five sliding to one full; the
    configuration makes the last layer full whatever the list says."""
    types = c.raw.get("layer_types")
    if types is None:
        full = [(i + 1) % 6 == 0 for i in range(layers)]
    elif (
        not isinstance(types, list)
        or len(types) != layers
        or not all(t in ("sliding_attention", "full_attention") for t in types)
    ):
        raise ConfigError(
            f"config.json field 'layer_types' must name {layers} layers, each "
            "'sliding_attention' or 'full_attention'",
            field="layer_types",
        )
    else:
        full = [t == "full_attention" for t in types]
    full[-1] = True
    return full


def _vision_params(raw: dict) -> tuple[int, int, int]:
    """(parameters, width, standardisation buffers) of Gemma4VisionModel."""
    v = Config({**_VISION_DEFAULTS, **raw})
    d = v.int("hidden_size")
    heads, kv, hd = v.int("num_attention_heads"), v.int("num_key_value_heads"), v.int("head_dim")
    patch = v.int("patch_size")
    block = (
        2 * d * heads * hd  # q, o
        + 2 * d * kv * hd  # k, v
        + 2 * hd  # q and k norms
        + 3 * d * v.int("intermediate_size")
        + 4 * d
    )
    params = 3 * patch * patch * d + 2 * v.int("position_embedding_size") * d
    params += v.int("num_hidden_layers") * block
    return params, d, 2 * d if v.bool("standardize", default=False) else 0


def _audio_params(raw: dict) -> tuple[int, int]:
    """(parameters, output width) of Gemma4AudioModel: two convolutions with LayerNorms and an
    input projection, then conformer layers (two feed-forwards of 4x width, attention with a
    relative-position key projection and a per-dimension scale, a light convolution, norms),
    then an output projection with bias."""
    a = Config({**_AUDIO_DEFAULTS, **raw})
    d = a.int("hidden_size")
    channels = a.int_list("subsampling_conv_channels")
    if len(channels) != 2:
        raise ConfigError(
            "config.json field 'subsampling_conv_channels' must list two channel counts",
            field="subsampling_conv_channels",
        )
    c0, c1 = channels
    out = a.int("output_proj_dims")
    subsampling = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * d
    feed_forward = 8 * d * d + 2 * d
    attention = 5 * d * d + d // a.int("num_attention_heads")
    light_conv = 3 * d * d + d * a.int("conv_kernel_size") + 2 * d
    layer = 2 * feed_forward + attention + light_conv + 3 * d
    return subsampling + a.int("num_hidden_layers") * layer + d * out + out, out


@dataclass(frozen=True)
class _TextModel:
    """Gemma4TextConfig's sizes (the composite class's text_config), each read and checked once,
    in a fixed order (the first bad field is the one an error names)."""

    t: Config
    d: int
    layers: int
    heads: int
    vocab: int
    kv: int
    hd: int
    global_hd: int
    k_eq_v: bool
    global_kv: int
    inter: int
    shared: int  # the last layers, which read an earlier layer's keys and values
    full: list[bool]  # each layer's attention: full (True) or sliding
    bias: bool

    @property
    def caching(self) -> int:
        return self.layers - self.shared

    @property
    def n_full(self) -> int:
        return sum(self.full)

    @property
    def n_full_caching(self) -> int:
        return sum(self.full[: self.caching])

    @property
    def n_sliding(self) -> int:
        return self.layers - self.n_full

    @property
    def n_sliding_caching(self) -> int:
        return self.caching - self.n_full_caching


def _read_text(c: Config, composite: bool) -> _TextModel:
    text_raw = c.raw.get("text_config") if composite else c.raw
    if not isinstance(text_raw, dict):
        raise ConfigError(
            "config.json of a Gemma 4 model needs a text_config object", field="text_config"
        )
    t = Config({**_TEXT_DEFAULTS, **{k: v for k, v in text_raw.items() if v is not None}})
    d, layers = t.int("hidden_size"), t.int("num_hidden_layers")
    heads, vocab = t.int("num_attention_heads"), t.int("vocab_size")
    kv, hd, global_hd = t.int("num_key_value_heads"), t.int("head_dim"), t.int("global_head_dim")
    k_eq_v = t.bool("attention_k_eq_v", default=False)
    global_kv = t.int("num_global_key_value_heads", default=kv) if k_eq_v else kv
    inter = t.int("intermediate_size")
    shared = t.int("num_kv_shared_layers", minimum=0)
    if shared >= layers:
        raise ConfigError(
            f"config.json field 'num_kv_shared_layers' ({shared}) must be below the number of "
            f"layers ({layers})",
            field="num_kv_shared_layers",
        )
    full = _layer_kinds(t, layers)
    return _TextModel(
        t=t,
        d=d,
        layers=layers,
        heads=heads,
        vocab=vocab,
        kv=kv,
        hd=hd,
        global_hd=global_hd,
        k_eq_v=k_eq_v,
        global_kv=global_kv,
        inter=inter,
        shared=shared,
        full=full,
        bias=t.bool("attention_bias", default=False),
    )


def _lin(name: str, i: int, o: int, count: int, role: str, bias: bool) -> b.LinearShape:
    """A projection that `count` of the blocks have."""
    return b.lin(name, i, o, bias, role).model_copy(update={"layers": count})


def _attention(x: _TextModel) -> list[b.LinearShape]:
    """The sliding and the full layers' projections; k and v only where the layer caches, no
    v_proj in the full layers where attention_k_eq_v."""
    d, heads, bias = x.d, x.heads, x.bias
    attention = [
        _lin("q_proj", d, heads * x.hd, x.n_sliding, "attn_q", bias),
        _lin("k_proj", d, x.kv * x.hd, x.n_sliding_caching, "attn_k", bias),
        _lin("v_proj", d, x.kv * x.hd, x.n_sliding_caching, "attn_v", bias),
        _lin("o_proj", heads * x.hd, d, x.n_sliding, "attn_out", bias),
        _lin("q_proj", d, heads * x.global_hd, x.n_full, "attn_q", bias),
        _lin("k_proj", d, x.global_kv * x.global_hd, x.n_full_caching, "attn_k", bias),
        _lin("o_proj", heads * x.global_hd, d, x.n_full, "attn_out", bias),
    ]
    if not x.k_eq_v:
        v_proj = _lin("v_proj", d, x.global_kv * x.global_hd, x.n_full_caching, "attn_v", bias)
        attention.insert(6, v_proj)
    return [linear for linear in attention if linear.layers]


def _qk_norms(x: _TextModel) -> int:
    """q norms in every layer, k norms where the layer caches; their size is the layer's head."""
    qk_norms = x.n_sliding * x.hd + x.n_full * x.global_hd + x.n_sliding_caching * x.hd
    return qk_norms + x.n_full_caching * x.global_hd


def _experts(t: Config, d: int, layers: int, mlp: list[b.LinearShape]) -> b.Experts | None:
    """26B-A4B's experts (enable_moe_block), None where the blocks have none."""
    if not t.bool("enable_moe_block", default=False):
        return None
    count, per_token = t.int("num_experts"), t.int("top_k_experts")
    if per_token > count:
        raise ConfigError(
            f"config.json field 'top_k_experts' ({per_token}) exceeds the number of "
            f"experts ({count})",
            field="top_k_experts",
        )
    expert = t.int("moe_intermediate_size", "expert_intermediate_size")
    return b.Experts(
        router=[b.lin("proj", d, count, False, "router")],
        routed=b.gated_mlp(
            d,
            expert,
            names=("gate_up_proj", "gate_up_proj", "down_proj"),
            prefix="experts.",
            role="expert",
            count=count,
            module=False,
        ),
        # The dense MLP runs beside the experts in every block, as a shared expert would.
        shared=mlp,
        experts=count,
        per_token=per_token,
        shared_experts=1,
        intermediate=expert,
        sparse_layers=layers,
        router_extra=d + count,  # the router's scale per hidden unit and per expert
    )


def _attention_groups(x: _TextModel, window: int | None) -> list[AttentionGroup]:
    """The sliding and full layers, each split into those that cache and those that share."""
    # (layers, layers of them that cache, head size, key/value heads, window) per kind
    kinds = [
        (x.n_sliding, x.n_sliding_caching, x.hd, x.kv, window),
        (x.n_full, x.n_full_caching, x.global_hd, x.global_kv, None),
    ]
    groups = [
        AttentionGroup(
            layers=count,
            query_width=x.heads * size,
            kv_heads=kv_heads,
            head_dim=size,
            window=kind_window,
            caches=caches,
        )
        for total_layers, caching_layers, size, kv_heads, kind_window in kinds
        for count, caches in ((caching_layers, True), (total_layers - caching_layers, False))
    ]
    return [g for g in groups if g.layers]


def _unloaded_kv(x: _TextModel) -> dict[str, int]:
    """What the checkpoints store for the KV-shared layers and transformers does not load."""
    if not x.shared:
        return {}
    unloaded = x.n_sliding - x.n_sliding_caching
    kept = x.n_full - x.n_full_caching
    return {
        "the key/value projections of the KV-shared layers, which transformers does not load": (
            unloaded * (2 * x.d * x.kv * x.hd + x.hd)
            + kept * ((1 if x.k_eq_v else 2) * x.d * x.global_kv * x.global_hd + x.global_hd)
        )
    }


def _towers(c: Config, d: int) -> tuple[int, int, bool]:
    """(parameters, standardisation buffers, whether there is an audio tower) of the vision and
    audio towers and their projections (the composite class only)."""
    vision_raw = c.raw.get("vision_config") or {}
    audio_raw = c.raw.get("audio_config")
    if not isinstance(vision_raw, dict) or not isinstance(audio_raw, dict | None):
        raise ConfigError(
            "config.json of a Gemma 4 model needs vision_config (and, where given, "
            "audio_config) objects",
            field="vision_config",
        )
    vision, vision_d, standardise = _vision_params(vision_raw)
    tower = vision + vision_d * d
    if audio_raw:
        audio, audio_out = _audio_params(audio_raw)
        tower += audio + audio_out * d
    return tower, standardise, bool(audio_raw)


def gemma4_blueprint(c: Config, family: str) -> b.Blueprint:
    """Gemma4ForConditionalGeneration ("gemma4": text_config, vision_config, audio_config) or
    Gemma4ForCausalLM ("gemma4_text")."""
    composite = family == "gemma4"
    x = _read_text(c, composite)
    t, d, layers, shared = x.t, x.d, x.layers, x.shared
    attention = _attention(x)
    wide = t.bool("use_double_wide_mlp", default=False) and shared > 0
    mlp = b.gated_mlp(d, x.inter)
    if wide:
        mlp = b.in_layers(mlp, x.caching) + b.in_layers(b.gated_mlp(d, 2 * x.inter), shared)

    per_layer = t.int("hidden_size_per_layer_input", minimum=0)
    embedding = x.vocab * d
    outside = d  # final norm
    block_norms = 4 * d
    notes: list[str] = []
    if per_layer:
        table = t.int("vocab_size_per_layer_input") * layers * per_layer
        embedding += table
        outside += d * layers * per_layer + per_layer
        block_norms += d
        attention += [
            _lin("per_layer_input_gate", d, per_layer, layers, "per_layer_gate", False),
            _lin("per_layer_projection", per_layer, d, layers, "per_layer_projection", False),
        ]
        notes.append(
            f"{table:,} of the parameters are per-layer embedding tables: each token reads one "
            "row of them, so they take memory but no compute."
        )
    if shared:
        notes.append(
            f"The last {shared} of {layers} layers reuse an earlier layer's keys and values: "
            "they keep no KV cache."
        )
    experts = _experts(t, d, layers, mlp)
    if experts:
        block_norms += 3 * d
    window = t.opt_int("sliding_window")
    stored = {"a scalar buffer per layer": layers, **_unloaded_kv(x)}
    tower = 0
    if composite:
        tower, standardise, audio = _towers(c, d)
        if standardise:
            stored["the vision tower's standardisation buffers"] = standardise
        outside += tower
        notes.append(
            f"Includes the vision{' and audio' if audio else ''} encoders and their "
            f"projections ({tower:,} parameters); an image adds up to 280 tokens to the "
            "sequence (the processor's max_soft_tokens), which the sequence length should "
            "include."
        )
    tied = (c if composite else t).bool("tie_word_embeddings", default=True)
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=x.heads,
        kv=x.kv,
        hd=x.hd,
        inter=x.inter,
        gated=True,
        vocab=x.vocab,
        positions=t.opt_int("max_position_embeddings"),
        tied=tied,
        attention=attention,
        mlp=mlp,
        block_norms=block_norms,
        embedding=embedding,
        lm_head=0 if tied else x.vocab * d,
        outside=outside + _qk_norms(x),
        input_towers=tower,
        experts=experts,
        notes=notes,
        attention_groups=_attention_groups(x, window),
        stored_extras=stored,
    )
