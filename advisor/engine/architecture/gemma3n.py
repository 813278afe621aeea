"""Gemma 3n (transformers modeling_gemma3n.py, configuration_gemma3n.py): E2B and E4B.

Counted as transformers 5 builds Gemma3nForConditionalGeneration ("gemma3n": text_config,
vision_config, audio_config) and Gemma3nForCausalLM ("gemma3n_text"):
- Per-layer embeddings (PLE): a table of vocab_size_per_layer_input x layers x P
  (hidden_size_per_layer_input) read one row per token, a projection of the embedded token
  (hidden -> layers x P) with a norm of P, and in each block a gate (hidden -> P), a projection
  (P -> hidden) and a norm. The table is counted as an embedding (memory, no matmul), as
  Gemma 4's is.
- AltUp: the residual stream is altup_num_inputs copies of the hidden state. Outside the
  blocks, n - 1 projections make the copies from the embedding and n - 1 fold them back before
  the final norm; in each block a router (hidden -> n) with its norm, prediction (n -> n^2)
  and correction (n -> n) coefficients, and a scale of the corrected output.
- Laurel: in each block a low-rank residual (hidden -> laurel_rank -> hidden) and its norm.
- MatFormer: intermediate_size is one width or one per layer; each block's gated MLP has its
  own. Activation sparsity (activation_sparsity_pattern: E models 0.95 in the first 10 layers)
  keeps the top of the gate's activations by a Gaussian cut-off: no parameters, and the gate,
  up and down matmuls still run in full, so it changes neither the count nor the FLOPs.
- KV sharing: the last num_kv_shared_layers layers have no k/v projections nor k norm and
  cache nothing (their cache layers are "dummy"): they read the keys and values of the last
  earlier layer of their kind (sliding or full). Every layer has q and o and a q norm of
  head_dim; v's norm has no weight. All layers share one head size; the sliding ones attend
  within sliding_window.
- Four norms a block, the final norm; the LM head is tied (tie_word_embeddings of the top
  config for the composite class, as transformers ties it).
- Vision tower: timm's MobileNet-V5 (TimmWrapperModel, num_classes=0); its count is a fixed
  property of the timm architecture named, measured on the meta device (timm 1.0.31) and
  confirmed by the Hub totals. Audio tower: the USM conformer, counted below. Each tower's
  embedder (Gemma3nMultimodalEmbedder): a 128-row table of the tower's width, two norms and a
  projection to the text width.
The Hub totals (E2B 5,439,438,272, E4B 7,849,978,192) are these counts plus the k/v
projections and k norms the checkpoints still store for the KV-shared layers (transformers
does not load them).

GPU memory: transformers' default load (from_pretrained, device_map "auto" on one GPU or
.to("cuda")) puts every parameter on the accelerator, the PLE table included, so the engine
counts them all as weights. Google's "effective" 2B / 4B counts what its on-device runtime
keeps in accelerator memory when the PLE table is cached in fast local storage ("PLE
caching", LiteRT / AI Edge) and the vision and audio towers are not loaded: the language model
less its two embedding tables (E2B 1,905,495,648 as the checkpoint stores it: "1.91B").
transformers has no such option; a device_map placing embed_tokens_per_layer on the CPU would
be the nearest, and is not what the engine assumes.

Gemma 4's helpers do not fit: its layer_types default is five sliding to one full and forces
the last layer full (Gemma 3n's is four to one, not forced), its towers differ; its
AttentionGroup use (caches=False for the KV-shared layers) is followed here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.model import AttentionGroup
from advisor.engine.errors import ConfigError

# Gemma3nTextConfig's defaults (the E4B text model).
_TEXT_DEFAULTS = {
    "vocab_size": 262_400,
    "hidden_size": 2048,
    "intermediate_size": 16_384,
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "max_position_embeddings": 32_768,
    "sliding_window": 512,
    "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256,
    "altup_num_inputs": 4,
    "num_kv_shared_layers": 15,
    "laurel_rank": 64,
}
_VISION_DEFAULTS = {"architecture": "mobilenetv5_300m_enc", "hidden_size": 2048, "vocab_size": 128}
_AUDIO_DEFAULTS = {
    "vocab_size": 128,
    "input_feat_size": 128,
    "hidden_size": 1536,
    "conf_num_attention_heads": 8,
    "conf_num_hidden_layers": 12,
    "conf_conv_kernel_size": 5,
    "sscp_conv_channel_size": [128, 32],
    "sscp_conv_kernel_size": [[3, 3], [3, 3]],
    "sscp_conv_stride_size": [[2, 2], [2, 2]],
}
# TimmWrapperModel(timm.create_model(architecture, num_classes=0)) on the meta device, timm
# 1.0.31; mobilenetv5_300m_enc (both E models) is also what the Hub totals leave for it.
TIMM_VISION_PARAMS = {
    "mobilenetv5_300m_enc": 294_126_912,
    "mobilenetv5_300m": 294_126_912,
    "mobilenetv5_base": 80_598_976,
}


def _text_config(c: Config, composite: bool) -> Config:
    raw = c.raw.get("text_config") if composite else c.raw
    if raw is None and composite:
        raw = {}  # Gemma3nConfig builds the default text config
    if not isinstance(raw, dict):
        raise ConfigError(
            "config.json of a Gemma 3n model needs a text_config object", field="text_config"
        )
    return Config({**_TEXT_DEFAULTS, **{k: v for k, v in raw.items() if v is not None}})


def _intermediate_sizes(t: Config, layers: int) -> list[int]:
    """One MLP width per layer: a list of them (MatFormer), or one for all."""
    value = t.raw["intermediate_size"]
    if not isinstance(value, list):
        return [t.int("intermediate_size")] * layers
    sizes = [Config({"intermediate_size": v}).int("intermediate_size") for v in value]
    if len(sizes) != layers:
        raise ConfigError(
            f"config.json field 'intermediate_size' lists {len(sizes)} widths for {layers} "
            "layers: it must give one for every layer, or one for all",
            field="intermediate_size",
        )
    return sizes


def _layer_kinds(t: Config, layers: int) -> list[bool]:
    """True for each full-attention layer: layer_types, else four sliding to one full."""
    types = t.raw.get("layer_types")
    if types is None:
        return [(i + 1) % 5 == 0 for i in range(layers)]
    if (
        not isinstance(types, list)
        or len(types) != layers
        or not all(kind in ("sliding_attention", "full_attention") for kind in types)
    ):
        raise ConfigError(
            f"config.json field 'layer_types' must name {layers} layers, each "
            "'sliding_attention' or 'full_attention'",
            field="layer_types",
        )
    return [kind == "full_attention" for kind in types]


def _check_sparsity(t: Config, layers: int) -> None:
    """activation_sparsity_pattern has no parameters, but transformers refuses a list that
    does not give every layer its value."""
    pattern = t.raw.get("activation_sparsity_pattern")
    if isinstance(pattern, list) and len(pattern) != layers:
        raise ConfigError(
            f"config.json field 'activation_sparsity_pattern' lists {len(pattern)} values for "
            f"{layers} layers: it must give one for every layer",
            field="activation_sparsity_pattern",
        )


@dataclass(frozen=True)
class _TextModel:
    """Gemma3nTextConfig's sizes, each read and checked once, in a fixed order (the first bad
    field is the one an error names)."""

    t: Config
    d: int
    layers: int
    heads: int
    kv: int
    hd: int
    vocab: int
    sizes: list[int]  # the MLP width of each layer
    full: list[bool]  # each layer's attention: full (True) or sliding
    shared: int  # the last layers, which read an earlier layer's keys and values
    bias: bool
    per_layer: int
    altup: int
    rank: int
    table: int  # the per-layer embedding table's parameters

    @property
    def caching(self) -> int:
        return self.layers - self.shared


def _read_text(c: Config, composite: bool) -> _TextModel:
    t = _text_config(c, composite)
    d, layers = t.int("hidden_size"), t.int("num_hidden_layers")
    heads, kv, hd = t.int("num_attention_heads"), t.int("num_key_value_heads"), t.int("head_dim")
    vocab = t.int("vocab_size")
    if d % heads:  # Gemma3nTextConfig.validate_architecture
        raise ConfigError(
            f"config.json field 'num_attention_heads' ({heads}) must divide the hidden size ({d})",
            field="num_attention_heads",
        )
    sizes = _intermediate_sizes(t, layers)
    full = _layer_kinds(t, layers)
    _check_sparsity(t, layers)
    shared = t.int("num_kv_shared_layers", minimum=0)
    caching = layers - shared
    # Gemma3nTextConfig.kv_sharing_modes: every kind the shared layers use must have a caching
    # layer before them to read from.
    if shared and (caching < 1 or set(full) != set(full[:caching])):
        raise ConfigError(
            f"config.json field 'num_kv_shared_layers' ({shared}) leaves no earlier layer of "
            "each attention kind for the shared layers to read keys and values from",
            field="num_kv_shared_layers",
        )
    bias = t.bool("attention_bias", default=False)
    per_layer = t.int("hidden_size_per_layer_input")
    return _TextModel(
        t=t,
        d=d,
        layers=layers,
        heads=heads,
        kv=kv,
        hd=hd,
        vocab=vocab,
        sizes=sizes,
        full=full,
        shared=shared,
        bias=bias,
        per_layer=per_layer,
        altup=t.int("altup_num_inputs"),
        rank=t.int("laurel_rank"),
        table=t.int("vocab_size_per_layer_input") * layers * per_layer,
    )


def _block_linears(x: _TextModel) -> list[b.LinearShape]:
    """Attention (k and v only where the layer caches), Laurel, AltUp and the per-layer input's
    gate and projection, each with the number of layers that have it."""
    d, layers, caching, bias = x.d, x.layers, x.caching, x.bias

    def lin(name, i, o, count, role, with_bias=False):
        return b.lin(name, i, o, with_bias, role).model_copy(update={"layers": count})

    linears = [
        lin("q_proj", d, x.heads * x.hd, layers, "attn_q", bias),
        lin("k_proj", d, x.kv * x.hd, caching, "attn_k", bias),
        lin("v_proj", d, x.kv * x.hd, caching, "attn_v", bias),
        lin("o_proj", x.heads * x.hd, d, layers, "attn_out", bias),
        lin("linear_left", d, x.rank, layers, "laurel_down"),
        lin("linear_right", x.rank, d, layers, "laurel_up"),
        lin("modality_router", d, x.altup, layers, "altup_router"),
        lin("prediction_coefs", x.altup, x.altup * x.altup, layers, "altup_prediction"),
        lin("correction_coefs", x.altup, x.altup, layers, "altup_correction"),
        lin("per_layer_input_gate", d, x.per_layer, layers, "per_layer_gate"),
        lin("per_layer_projection", x.per_layer, d, layers, "per_layer_projection"),
    ]
    return [linear for linear in linears if linear.layers]


def _mlp(x: _TextModel) -> list[b.LinearShape]:
    """One gated MLP, or one per distinct width with the layers that have it (MatFormer)."""
    widths = Counter(x.sizes)
    if len(widths) == 1:
        return b.gated_mlp(x.d, x.sizes[0])
    return [
        linear
        for size, n in sorted(widths.items())
        for linear in b.in_layers(b.gated_mlp(x.d, size), n)
    ]


def _outside(x: _TextModel) -> int:
    """The text model's parameters outside the blocks and the embedding tables."""
    d, layers, per_layer = x.d, x.layers, x.per_layer
    return (
        d  # final norm
        + d * layers * per_layer  # per_layer_model_projection
        + per_layer  # per_layer_projection_norm
        + 2 * (x.altup - 1) * d * d  # altup_projections, altup_unembed_projections
        + x.caching * x.hd  # k norms
    )


def _text_notes(x: _TextModel) -> list[str]:
    notes = [
        f"{x.table:,} of the parameters are the per-layer embedding table: each token reads one "
        "row of it, so it takes memory but no compute. transformers loads it on the GPU with "
        "the rest (counted here); Google's on-device runtimes can cache it in local storage "
        "instead (PLE caching), which is what its 'effective' size leaves out.",
        f"AltUp carries {x.altup} copies of the hidden state between layers: training keeps "
        "all of them as each layer's input, and each layer's predicted and corrected copies; "
        "the first layers' activation sparsity has no parameters and saves no matmul in "
        "transformers.",
    ]
    if x.shared:
        notes.append(
            f"The last {x.shared} of {x.layers} layers reuse an earlier layer's keys and values: "
            "they keep no KV cache."
        )
    return notes


def _unloaded_kv(x: _TextModel) -> dict[str, int]:
    """What the checkpoints store for the KV-shared layers and transformers does not load."""
    if not x.shared:
        return {}
    kv_width = x.kv * x.hd
    return {
        "the key/value projections of the KV-shared layers, which transformers does not load": (
            x.shared * (2 * (x.d * kv_width + x.bias * kv_width) + x.hd)
        )
    }


def _attention_groups(x: _TextModel, window: int | None) -> list[AttentionGroup]:
    """The sliding and full layers, each split into those that cache and those that share."""
    n_full, n_full_caching = sum(x.full), sum(x.full[: x.caching])
    n_sliding, n_sliding_caching = x.layers - n_full, x.caching - n_full_caching
    kinds = [(n_sliding, n_sliding_caching, window), (n_full, n_full_caching, None)]
    groups = [
        AttentionGroup(
            layers=count,
            query_width=x.heads * x.hd,
            kv_heads=x.kv,
            head_dim=x.hd,
            window=kind_window,
            caches=caches,
        )
        for total_layers, caching_layers, kind_window in kinds
        for count, caches in ((caching_layers, True), (total_layers - caching_layers, False))
    ]
    return [g for g in groups if g.layers]


def _pairs(a: Config, name: str) -> list[tuple[int, int]]:
    value = a.raw.get(name)
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(pair, list | tuple) and len(pair) == 2 for pair in value)
    ):
        raise ConfigError(
            f"config.json field '{name}' must give two (time, frequency) pairs", field=name
        )
    return [(Config({name: p[0]}).int(name), Config({name: p[1]}).int(name)) for p in value]


def _audio_params(raw: dict) -> tuple[int, int]:
    """(parameters, width) of Gemma3nAudioEncoder: two convolutions without bias, each with a
    cumulative group norm's scale, a projection of channels x frequency bins to the width, then
    conformer blocks: two feed-forwards (4x width, two norms each), attention (q, k, v, a
    relative-position projection, the output projection, a per-dimension scale, two norms), a
    light convolution (a GLU input projection to twice the width, a depthwise kernel, a
    projection, two norms) and the block's norm."""
    a = Config({**_AUDIO_DEFAULTS, **{k: v for k, v in raw.items() if v is not None}})
    d = a.int("hidden_size")
    heads = a.int("conf_num_attention_heads")
    channels = a.int_list("sscp_conv_channel_size")
    if len(channels) != 2:
        raise ConfigError(
            "config.json field 'sscp_conv_channel_size' must list two channel counts",
            field="sscp_conv_channel_size",
        )
    kernels = _pairs(a, "sscp_conv_kernel_size")
    strides = _pairs(a, "sscp_conv_stride_size")
    frequency = a.int("input_feat_size")
    subsampling, before = 0, 1
    for (kernel_t, kernel_f), (_, stride_f), after in zip(kernels, strides, channels, strict=True):
        subsampling += before * after * kernel_t * kernel_f + after  # conv, norm scale
        # frequency padded by one each side (Gemma3nAudioSubSampleConvProjection)
        frequency = (frequency + 2 - kernel_f) // stride_f + 1
        if frequency < 1:
            raise ConfigError(
                "config.json fields 'input_feat_size' and 'sscp_conv_kernel_size' leave no "
                "frequency bins after the subsampling convolutions",
                field="sscp_conv_kernel_size",
            )
        before = after
    subsampling += channels[-1] * frequency * d
    feed_forward = 8 * d * d + 2 * d
    attention = 5 * d * d + 2 * d + d // heads
    light_conv = 3 * d * d + d * a.int("conf_conv_kernel_size") + 2 * d
    block = 2 * feed_forward + attention + light_conv + d
    return subsampling + a.int("conf_num_hidden_layers") * block, d


def _vision_params(raw: dict) -> tuple[int, int]:
    """(parameters, width) of the timm vision tower."""
    v = Config({**_VISION_DEFAULTS, **{k: x for k, x in raw.items() if x is not None}})
    name = v.str("architecture")
    if name not in TIMM_VISION_PARAMS or v.raw.get("model_args"):
        raise ConfigError(
            f"The estimator cannot count the Gemma 3n vision tower timm architecture "
            f"'{name}'{' with model_args' if v.raw.get('model_args') else ''}: it knows the "
            f"parameters of {', '.join(sorted(TIMM_VISION_PARAMS))} (as timm builds them) "
            "only. Enter the parameter count from the model card instead.",
            field="vision_config",
        )
    return TIMM_VISION_PARAMS[name], v.int("hidden_size")


def _embedder(raw: dict, defaults: dict, d: int) -> int:
    """Gemma3nMultimodalEmbedder: a table of vocab_size rows of the tower's width, hard and
    soft embedding norms, a projection to the text width (its post-projection norm has no
    weight)."""
    e = Config({**defaults, **{k: v for k, v in raw.items() if v is not None}})
    width = e.int("hidden_size")
    return e.int("vocab_size") * width + 2 * width + width * d


def _towers(c: Config, d: int) -> int:
    """The vision and audio towers and their embedders (the composite class only)."""
    vision_raw = c.raw.get("vision_config") or {}
    audio_raw = c.raw.get("audio_config") or {}
    if not isinstance(vision_raw, dict) or not isinstance(audio_raw, dict):
        raise ConfigError(
            "config.json of a Gemma 3n model needs vision_config and audio_config objects",
            field="vision_config" if not isinstance(vision_raw, dict) else "audio_config",
        )
    vision, _ = _vision_params(vision_raw)
    audio, _ = _audio_params(audio_raw)
    return (
        vision
        + _embedder(vision_raw, _VISION_DEFAULTS, d)
        + audio
        + _embedder(audio_raw, _AUDIO_DEFAULTS, d)
    )


def gemma3n_blueprint(c: Config, family: str) -> b.Blueprint:
    """Gemma3nForConditionalGeneration ("gemma3n") or Gemma3nForCausalLM ("gemma3n_text")."""
    composite = family == "gemma3n"
    x = _read_text(c, composite)
    d, vocab = x.d, x.vocab
    outside = _outside(x)
    notes = _text_notes(x)
    towers = 0
    if composite:
        towers = _towers(c, d)
        outside += towers
        notes.append(
            f"Includes the MobileNet-V5 vision and USM audio encoders and their embedders "
            f"({towers:,} parameters); an image adds 256 tokens to the sequence and audio "
            "about 6.25 tokens a second (188 for 30 s), which the sequence length should "
            "include."
        )
    window = x.t.opt_int("sliding_window")
    tied = (c if composite else x.t).bool("tie_word_embeddings", default=True)
    return b.Blueprint(
        family=family,
        d=d,
        layers=x.layers,
        h=x.heads,
        kv=x.kv,
        hd=x.hd,
        inter=max(x.sizes),
        gated=True,
        vocab=vocab,
        positions=x.t.opt_int("max_position_embeddings"),
        tied=tied,
        attention=_block_linears(x),
        mlp=_mlp(x),
        # Per block: four norms, Laurel's and the per-layer input's norms, AltUp's router norm
        # and output scale (each of the hidden size), the q norm; k norms where the layer
        # caches.
        block_norms=8 * d + x.hd,
        embedding=vocab * d + x.table,
        lm_head=0 if tied else vocab * d,
        outside=outside,
        input_towers=towers,
        notes=notes,
        attention_groups=_attention_groups(x, window),
        stored_extras=_unloaded_kv(x),
        residual_streams=x.altup,
    )
