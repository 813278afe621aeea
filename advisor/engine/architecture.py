"""A model's shape and exact parameter count, from config.json, Hub metadata or a typed number.

No Django here. Counting follows how transformers builds each model class, one small function per
family on top of shared decoder-block arithmetic:

* A count is the number of elements in the model's parameters (nn.Parameter), tied weights once.
  Buffers (rotary inv_freq, causal masks) are not parameters, so they are not counted.
* Encoder-only models (BERT, RoBERTa, DistilBERT, ViT) are counted as the bare model that
  transformers loads with AutoModel (BERT/RoBERTa/ViT with their pooler); task heads are left out,
  and a note says so. Causal and sequence-to-sequence language models include the LM head (0 when
  tied).
* The expected numbers and their sources live in tests/engine/test_architecture.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from advisor.engine.errors import ConfigError
from advisor.engine.models import HubModelMetadata


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LinearShape(_Frozen):
    """One Linear layer of a decoder block (or `count_per_layer` of the same shape)."""

    # The module name as transformers (and PEFT target_modules) spell it: "q_proj", "c_attn",
    # "fc1", "experts.w1", ...
    name: str
    in_features: int
    out_features: int
    count_per_layer: int = 1  # num_experts for expert weights
    bias: bool
    # What the layer does, whatever the family calls it: "attn_q", "attn_k", "attn_v", "attn_qkv",
    # "attn_out", "cross_attn_q", ..., "mlp_gate", "mlp_up", "mlp_gate_up", "mlp_down", "mlp_in",
    # "mlp_out", "router", "expert_gate", "expert_up", "expert_down", "shared_expert_*".
    role: str = ""

    @property
    def params(self) -> int:
        return self.count_per_layer * (
            self.in_features * self.out_features + self.out_features * self.bias
        )


class ModelArchitecture(_Frozen):
    family: str
    architecture: str | None = None  # config["architectures"][0]
    is_encoder_decoder: bool = False
    num_layers: int  # decoder (or only) stack
    encoder_layers: int = 0
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool
    vocab_size: int
    max_position_embeddings: int | None = None
    tied_embeddings: bool
    num_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int | None = None
    # The Linear layers of one decoder block (attention + MLP / experts), for LoRA and FLOPs.
    layer_linears: list[LinearShape] = Field(default_factory=list)
    params_total: int
    params_active: int  # per token: MoE counts only routed experts_per_token + shared experts
    params_embedding: int  # token (+ position / token-type / patch) embeddings
    params_lm_head: int  # 0 when tied to the input embedding
    source: str  # "config.json (llama)", "hub safetensors", "typed by researcher"
    exact: bool  # False for fallbacks and approximations
    notes: list[str] = Field(default_factory=list)
    # What the checkpoint stores, when the Hub said: sum of element count x dtype size, and the
    # quantisation width in bits (None when not quantised).
    stored_weight_bytes: int | None = None
    quantization_bits: int | None = None
    # Values the KV cache holds per token and layer when that is not 2 x num_kv_heads x head_dim:
    # DeepSeek's multi-head latent attention caches kv_lora_rank + qk_rope_head_dim.
    kv_cache_width: int | None = None


# --- Reading config.json ---------------------------------------------------------------------


class _Config:
    """config.json with typed, validated access; every error names the offending field."""

    def __init__(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise ConfigError(
                f"config.json must be a JSON object, got {type(raw).__name__}", field="config.json"
            )
        self.raw = raw

    def _pick(self, names: tuple[str, ...]) -> tuple[str, Any]:
        for name in names:
            if self.raw.get(name) is not None:
                return name, self.raw[name]
        return names[0], None

    def int(self, *names: str, default: int | None = None, minimum: int = 1) -> int:
        """The first of `names` present, a whole number >= minimum; else default, else an error."""
        name, value = self._pick(names)
        if value is None:
            if default is not None:
                return default
            alternatives = f" (or {', '.join(repr(n) for n in names[1:])})" if names[1:] else ""
            raise ConfigError(
                f"config.json has no field '{name}'{alternatives}, which this architecture needs",
                field=name,
            )
        # JSON has one number type: accept 4096.0 but not 4096.5, True or "4096".
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ConfigError(
                f"config.json field '{name}' must be {kind}, got {value!r}", field=name
            )
        return value

    def opt_int(self, *names: str, minimum: int = 1) -> int | None:
        name, value = self._pick(names)
        return None if value is None else self.int(name, minimum=minimum)

    def bool(self, *names: str, default: bool) -> bool:
        name, value = self._pick(names)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(
                f"config.json field '{name}' must be true or false, got {value!r}", field=name
            )
        return value

    def str(self, name: str, default: str = "") -> str:
        value = self.raw.get(name)
        return value if isinstance(value, str) else default

    def int_list(self, name: str) -> list[int]:
        value = self.raw.get(name) or []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(
                f"config.json field '{name}' must be a list of integers, got {value!r}", field=name
            )
        return value

    def architecture(self) -> str | None:
        value = self.raw.get("architectures")
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
        return None


def _heads(c: _Config, d: int, heads_field: tuple[str, ...], kv_field: tuple[str, ...] = ()):
    """(heads, kv_heads, head_dim) with the divisibility checks attention needs."""
    h = c.int(*heads_field)
    kv = c.int(*kv_field, default=h) if kv_field else h
    head_dim = c.opt_int("head_dim")
    if head_dim is None:
        if d % h:
            raise ConfigError(
                f"config.json field '{heads_field[0]}' ({h}) must divide the hidden size ({d})",
                field=heads_field[0],
            )
        head_dim = d // h
    if h % kv:
        raise ConfigError(
            f"config.json field '{kv_field[0]}' ({kv}) must divide "
            f"'{heads_field[0]}' ({h}): each key/value head serves a whole group of query heads",
            field=kv_field[0],
        )
    return h, kv, head_dim


# --- Shared arithmetic -----------------------------------------------------------------------


def _lin(name: str, i: int, o: int, bias: bool, role: str, count: int = 1) -> LinearShape:
    return LinearShape(
        name=name, in_features=i, out_features=o, bias=bias, role=role, count_per_layer=count
    )


def _sum(linears: Iterable[LinearShape]) -> int:
    return sum(x.params for x in linears)


def _attention(
    d: int,
    h: int,
    kv: int,
    hd: int,
    *,
    names=("q_proj", "k_proj", "v_proj", "o_proj"),
    qkv_bias: bool = False,
    out_bias: bool = False,
    prefix: str = "",
    role: str = "attn",
) -> list[LinearShape]:
    """Separate q/k/v/o projections (grouped-query when kv < h)."""
    q, k, v, o = names
    return [
        _lin(prefix + q, d, h * hd, qkv_bias, f"{role}_q"),
        _lin(prefix + k, d, kv * hd, qkv_bias, f"{role}_k"),
        _lin(prefix + v, d, kv * hd, qkv_bias, f"{role}_v"),
        _lin(prefix + o, h * hd, d, out_bias, f"{role}_out"),
    ]


def _fused_attention(
    d: int, h: int, kv: int, hd: int, *, qkv: str, out: str, bias: bool
) -> list[LinearShape]:
    return [
        _lin(qkv, d, (h + 2 * kv) * hd, bias, "attn_qkv"),
        _lin(out, h * hd, d, bias, "attn_out"),
    ]


def _mlp(d: int, inter: int, *, names=("fc1", "fc2"), bias: bool) -> list[LinearShape]:
    up, down = names
    return [_lin(up, d, inter, bias, "mlp_in"), _lin(down, inter, d, bias, "mlp_out")]


def _gated_mlp(
    d: int,
    inter: int,
    *,
    names=("gate_proj", "up_proj", "down_proj"),
    bias=False,
    prefix: str = "",
    role: str = "mlp",
    count: int = 1,
) -> list[LinearShape]:
    gate, up, down = names
    return [
        _lin(prefix + gate, d, inter, bias, f"{role}_gate", count),
        _lin(prefix + up, d, inter, bias, f"{role}_up", count),
        _lin(prefix + down, inter, d, bias, f"{role}_down", count),
    ]


def _ln(d: int) -> int:  # LayerNorm: weight and bias
    return 2 * d


def _assemble(
    c: _Config,
    family: str,
    *,
    d: int,
    layers: int,
    h: int,
    kv: int,
    hd: int,
    inter: int,
    gated: bool,
    vocab: int,
    positions: int | None,
    tied: bool,
    block: list[LinearShape],
    block_other: int,
    embedding: int,
    lm_head: int,
    other: int = 0,
    encoder: int = 0,
    encoder_layers: int = 0,
    moe: dict | None = None,
    notes: list[str] | None = None,
    exact: bool = True,
    source: str | None = None,
) -> ModelArchitecture:
    """Total = embeddings + layers x (linears + norms) + encoder + other + LM head.

    `block_other` is what one block holds besides its Linear layers (norms, biases of fused
    parameters); `other` is everything outside the blocks (final norm, pooler, ...). `moe` carries
    `layers` (how many blocks are sparse), `inactive` (params per sparse block that a token does not
    use) and the expert counts; dense blocks of a partly sparse model go in `other`.
    """
    total = embedding + layers * (_sum(block) + block_other) + encoder + other + lm_head
    active = total
    moe = moe or {}
    if moe:
        active = total - moe["layers"] * moe["inactive"]
    return ModelArchitecture(
        family=family,
        architecture=c.architecture(),
        is_encoder_decoder=encoder_layers > 0,
        num_layers=layers,
        encoder_layers=encoder_layers,
        hidden_size=d,
        num_attention_heads=h,
        num_kv_heads=kv,
        head_dim=hd,
        intermediate_size=inter,
        gated_mlp=gated,
        vocab_size=vocab,
        max_position_embeddings=positions,
        tied_embeddings=tied,
        num_experts=moe.get("experts", 0),
        experts_per_token=moe.get("per_token", 0),
        shared_experts=moe.get("shared", 0),
        moe_intermediate_size=moe.get("intermediate"),
        layer_linears=block,
        params_total=total,
        params_active=active,
        params_embedding=embedding,
        params_lm_head=lm_head,
        source=source or f"config.json ({family})",
        exact=exact,
        notes=notes or [],
    )


# --- Families --------------------------------------------------------------------------------


def _gpt2(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("n_embd", "hidden_size")
    layers = c.int("n_layer", "num_hidden_layers")
    h, kv, hd = _heads(c, d, ("n_head", "num_attention_heads"))
    inter = c.int("n_inner", default=4 * d)
    vocab = c.int("vocab_size")
    positions = c.int("n_positions", "max_position_embeddings")
    tied = c.bool("tie_word_embeddings", default=True)
    # Conv1D layers hold their weight as (in, out); the shapes below are the same Linear maps.
    block = [
        _lin("c_attn", d, 3 * d, True, "attn_qkv"),
        _lin("attn.c_proj", d, d, True, "attn_out"),
        _lin("c_fc", d, inter, True, "mlp_in"),
        _lin("mlp.c_proj", inter, d, True, "mlp_out"),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=tied,
        block=block,
        block_other=2 * _ln(d),
        embedding=(vocab + positions) * d,
        lm_head=0 if tied else vocab * d,
        other=_ln(d),
    )


def _gpt_bigcode(c: _Config, family: str) -> ModelArchitecture:
    """StarCoder / OctoCoder / SantaCoder: GPT-2 blocks with multi-query attention (one shared
    K/V head, so c_attn maps d -> d + 2 * head_dim), learned positions, LM head tied to wte."""
    d = c.int("n_embd", "hidden_size")
    layers = c.int("n_layer", "num_hidden_layers")
    h, _, hd = _heads(c, d, ("n_head", "num_attention_heads"))
    kv = 1 if c.bool("multi_query", default=True) else h
    inter = c.int("n_inner", default=4 * d)
    vocab = c.int("vocab_size")
    positions = c.int("n_positions", "max_position_embeddings")
    tied = c.bool("tie_word_embeddings", default=True)
    block = [
        _lin("c_attn", d, d + 2 * kv * hd, True, "attn_qkv"),
        _lin("attn.c_proj", d, d, True, "attn_out"),
        _lin("c_fc", d, inter, True, "mlp_in"),
        _lin("mlp.c_proj", inter, d, True, "mlp_out"),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=tied,
        block=block,
        block_other=2 * _ln(d),
        embedding=(vocab + positions) * d,
        lm_head=0 if tied else vocab * d,
        other=_ln(d),
    )


def _mpt(c: _Config, family: str) -> ModelArchitecture:
    """MosaicML MPT: fused Wqkv, 4x GELU MLP (expansion_ratio), ALiBi (no position embedding in
    transformers' MptModel), LayerNorms without bias when no_bias, output tied to wte."""
    d = c.int("d_model", "hidden_size")
    layers = c.int("n_layers", "num_hidden_layers")
    h, kv, hd = _heads(c, d, ("n_heads", "num_attention_heads"))
    inter = c.int("expansion_ratio", default=4) * d
    vocab = c.int("vocab_size")
    bias = not c.bool("no_bias", default=False)
    norm = d if not bias else _ln(d)
    block = [
        *_fused_attention(d, h, kv, hd, qkv="Wqkv", out="out_proj", bias=bias),
        *_mlp(d, inter, names=("up_proj", "down_proj"), bias=bias),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("max_seq_len", "max_position_embeddings"),
        tied=True,
        block=block,
        block_other=2 * norm,
        embedding=vocab * d,
        lm_head=0,
        other=norm,
    )


def _encoder_head(c: _Config, family: str, d: int, vocab: int) -> tuple[int, str]:
    """Parameters of the pooler and task head that architectures[0] names, and a note.

    design.md counts "the model named by the config's architectures[0]": BertForMaskedLM has a
    masked-LM head (its decoder weight tied to the embedding) and no pooler, BertModel has a
    pooler, a classifier has num_labels outputs. Heads not listed get the bare model + a note.
    """
    name = c.architecture() or ""
    labels = c.raw.get("id2label")
    num_labels = (
        len(labels) if isinstance(labels, dict) and labels else c.int("num_labels", default=2)
    )
    pooler = 0 if family == "distilbert" else d * d + d
    transform = d * d + d + _ln(d)  # dense + LayerNorm before the tied vocabulary projection
    head_of = {
        "Model": (pooler, "its pooler"),
        "ForMaskedLM": (transform + vocab, "its masked-LM head"),
        "ForPreTraining": (
            pooler + transform + vocab + 2 * d + 2,
            "its pooler, masked-LM and next-sentence heads",
        ),
        "ForQuestionAnswering": (2 * d + 2, "its span head"),
        "ForTokenClassification": (
            num_labels * d + num_labels,
            f"its {num_labels}-label token classifier",
        ),
        "ForImageClassification": (
            num_labels * d + num_labels,
            f"its {num_labels}-class classifier",
        ),
    }
    classifier = num_labels * d + num_labels
    head_of["ForSequenceClassification"] = {
        "roberta": (d * d + d + classifier, f"its {num_labels}-label classification head"),
        "distilbert": (d * d + d + classifier, f"its {num_labels}-label classification head"),
    }.get(family, (pooler + classifier, f"its pooler and {num_labels}-label classifier"))
    for suffix, (params, what) in head_of.items():
        if name.endswith(suffix):
            return params, f"Counted as {name} with {what} ({params:,} parameters)."
    return pooler, (
        f"Counted as the bare {family} model"
        + (f" with its pooler ({pooler:,} parameters)" if pooler else "")
        + (f"; the head of {name} is not counted." if name else ".")
    )


def _bert(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",))
    inter = c.int("intermediate_size")
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings")
    types = c.int("type_vocab_size", default=2, minimum=0)
    block = [
        *_attention(
            d,
            h,
            kv,
            hd,
            names=("query", "key", "value", "attention.output.dense"),
            qkv_bias=True,
            out_bias=True,
        ),
        _lin("intermediate.dense", d, inter, True, "mlp_in"),
        _lin("output.dense", inter, d, True, "mlp_out"),
    ]
    head, note = _encoder_head(c, family, d, vocab)
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=True,
        block=block,
        block_other=2 * _ln(d),
        embedding=(vocab + positions + types) * d,
        lm_head=0,
        other=_ln(d) + head,
        notes=[note],
    )


def _distilbert(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("dim", "hidden_size")
    layers = c.int("n_layers", "num_hidden_layers")
    h, kv, hd = _heads(c, d, ("n_heads", "num_attention_heads"))
    inter = c.int("hidden_dim", "intermediate_size")
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings")
    block = [
        *_attention(
            d, h, kv, hd, names=("q_lin", "k_lin", "v_lin", "out_lin"), qkv_bias=True, out_bias=True
        ),
        *_mlp(d, inter, names=("lin1", "lin2"), bias=True),
    ]
    head, note = _encoder_head(c, family, d, vocab)
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=True,
        block=block,
        block_other=2 * _ln(d),
        embedding=(vocab + positions) * d,
        lm_head=0,
        other=_ln(d) + head,
        notes=[note],
    )


# Llama-like decoders: RMSNorm, rotary positions, gated MLP, optional grouped-query attention.
# The defaults are those of each family's transformers config class.
_LLAMA_LIKE = {
    #           tie default, q/k/v bias default, extra norms per layer (in head_dim units)
    "llama": {"tied": False, "qkv_bias": False},
    "mistral": {"tied": False, "qkv_bias": False},
    "qwen2": {"tied": False, "qkv_bias": True},  # Qwen2 always has q/k/v biases
    "qwen3": {"tied": False, "qkv_bias": False, "qk_norm": True},
    "gemma": {"tied": True, "qkv_bias": False},
    "gemma2": {"tied": True, "qkv_bias": False, "norms": 4},
    "phi3": {"tied": False, "qkv_bias": False, "fused": True},
}


def _llama(c: _Config, family: str) -> ModelArchitecture:
    spec = _LLAMA_LIKE[family]
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    inter = c.int("intermediate_size")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=spec["tied"])
    attn_bias = c.bool("attention_bias", default=False)
    mlp_bias = c.bool("mlp_bias", default=False)
    if spec.get("fused"):
        block = [
            *_fused_attention(d, h, kv, hd, qkv="qkv_proj", out="o_proj", bias=False),
            _lin("gate_up_proj", d, 2 * inter, False, "mlp_gate_up"),
            _lin("down_proj", inter, d, False, "mlp_down"),
        ]
    else:
        block = [
            *_attention(d, h, kv, hd, qkv_bias=attn_bias or spec["qkv_bias"], out_bias=attn_bias),
            *_gated_mlp(d, inter, bias=mlp_bias),
        ]
    block_other = spec.get("norms", 2) * d + (2 * hd if spec.get("qk_norm") else 0)
    return _assemble(
        c,
        family,
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
        block=block,
        block_other=block_other,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=d,
    )


def _phi(c: _Config, family: str) -> ModelArchitecture:
    """Phi-1/1.5/2: one LayerNorm per block (attention and MLP in parallel), biases everywhere."""
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    inter = c.int("intermediate_size")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    block = [
        *_attention(
            d,
            h,
            kv,
            hd,
            names=("q_proj", "k_proj", "v_proj", "dense"),
            qkv_bias=True,
            out_bias=True,
        ),
        *_mlp(d, inter, bias=True),
    ]
    qk_norm = 2 * _ln(hd) if c.bool("qk_layernorm", default=False) else 0
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=_ln(d) + qk_norm,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d + vocab,
        other=_ln(d),
    )


def _moe(c: _Config, family: str) -> ModelArchitecture:
    """Mixtral and Qwen2-MoE: Llama-like attention, a router and routed (+ shared) experts."""
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    per_token = c.int("num_experts_per_tok")
    notes: list[str] = []
    if family == "mixtral":
        experts = c.int("num_local_experts")
        inter = c.int("intermediate_size")
        moe_inter = inter
        attention = _attention(d, h, kv, hd)
        routed = _gated_mlp(
            d, moe_inter, names=("w1", "w3", "w2"), prefix="experts.", role="expert", count=experts
        )
        shared: list[LinearShape] = []
        sparse_layers, dense_mlp = layers, 0
    else:  # qwen2_moe
        experts = c.int("num_experts")
        inter = c.int("intermediate_size")
        moe_inter = c.int("moe_intermediate_size")
        shared_inter = c.int("shared_expert_intermediate_size", default=0, minimum=0)
        attention = _attention(d, h, kv, hd, qkv_bias=True)
        routed = _gated_mlp(d, moe_inter, prefix="experts.", role="expert", count=experts)
        shared = (
            _gated_mlp(d, shared_inter, prefix="shared_expert.", role="shared_expert")
            + [_lin("shared_expert_gate", d, 1, False, "shared_expert_router")]
            if shared_inter
            else []
        )
        step = c.int("decoder_sparse_step", default=1)
        dense_only = set(c.int_list("mlp_only_layers"))
        sparse = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
        sparse_layers = len(sparse)
        dense_mlp = (layers - sparse_layers) * _sum(_gated_mlp(d, inter))
        if sparse_layers < layers:
            notes.append(f"{layers - sparse_layers} of {layers} layers use a dense MLP.")
    if per_token > experts:
        raise ConfigError(
            f"config.json field 'num_experts_per_tok' ({per_token}) exceeds the number of "
            f"experts ({experts})",
            field="num_experts_per_tok",
        )
    block = [*attention, _lin("gate", d, experts, False, "router"), *routed, *shared]
    per_expert = _sum(routed) // experts
    # Dense layers (if any) have attention + dense MLP instead of router + experts.
    moe_part = _sum(block) - _sum(attention)
    other = d + dense_mlp - (layers - sparse_layers) * moe_part
    return _assemble(
        c,
        family,
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
        block=block,
        block_other=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=other,
        notes=notes,
        moe={
            "layers": sparse_layers,
            "inactive": (experts - per_token) * per_expert,
            "experts": experts,
            "per_token": per_token,
            "shared": 1 if shared else 0,
            "intermediate": moe_inter,
        },
    )


def _deepseek(c: _Config, family: str) -> ModelArchitecture:
    """DeepSeek-V2/V3: multi-head latent attention and fine-grained + shared experts."""
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h = c.int("num_attention_heads")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    inter = c.int("intermediate_size")
    moe_inter = c.int("moe_intermediate_size")
    experts = c.int("n_routed_experts")
    shared = c.int("n_shared_experts", default=0, minimum=0)
    per_token = c.int("num_experts_per_tok")
    first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
    freq = c.int("moe_layer_freq", default=1)
    q_rank = c.opt_int("q_lora_rank")
    kv_rank = c.int("kv_lora_rank")
    rope = c.int("qk_rope_head_dim")
    nope = c.int("qk_nope_head_dim")
    v_dim = c.int("v_head_dim")
    bias = c.bool("attention_bias", default=False)
    q_dim = h * (nope + rope)
    if q_rank:
        attention = [
            _lin("q_a_proj", d, q_rank, bias, "attn_q"),
            _lin("q_b_proj", q_rank, q_dim, False, "attn_q"),
        ]
        attn_norms = q_rank + kv_rank
    else:
        attention = [_lin("q_proj", d, q_dim, False, "attn_q")]
        attn_norms = kv_rank
    attention += [
        _lin("kv_a_proj_with_mqa", d, kv_rank + rope, bias, "attn_kv"),
        _lin("kv_b_proj", kv_rank, h * (nope + v_dim), False, "attn_kv"),
        _lin("o_proj", h * v_dim, d, bias, "attn_out"),
    ]
    routed = _gated_mlp(d, moe_inter, prefix="experts.", role="expert", count=experts)
    shared_mlp = (
        _gated_mlp(d, moe_inter * shared, prefix="shared_experts.", role="shared_expert")
        if shared
        else []
    )
    router = _lin("gate", d, experts, False, "router")
    # DeepSeek-V3's router also learns a per-expert score correction bias.
    router_bias = experts if family == "deepseek_v3" else 0
    block = [*attention, router, *routed, *shared_mlp]
    sparse_layers = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    dense_layers = layers - sparse_layers
    moe_part = _sum([router, *routed, *shared_mlp]) + router_bias
    other = d + dense_layers * (_sum(_gated_mlp(d, inter)) - moe_part)
    notes = [f"{dense_layers} of {layers} layers use a dense MLP."] if dense_layers else []
    notes.append(f"Multi-head latent attention caches {kv_rank + rope} values per token and layer.")
    if c.opt_int("num_nextn_predict_layers", minimum=0):
        notes.append(
            "The multi-token-prediction module stored in the checkpoint is not counted "
            "(transformers does not load it)."
        )
    arch = _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=h,
        hd=nope + rope,
        inter=inter,
        gated=True,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=2 * d + attn_norms + router_bias,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=other,
        notes=notes,
        moe={
            "layers": sparse_layers,
            "inactive": (experts - per_token) * _sum(routed) // experts,
            "experts": experts,
            "per_token": per_token,
            "shared": shared,
            "intermediate": moe_inter,
        },
    )
    return arch.model_copy(update={"kv_cache_width": kv_rank + rope})


def _falcon(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size", "n_embd")
    layers = c.int("num_hidden_layers", "n_layer")
    new_arch = c.bool("new_decoder_architecture", default=family == "falcon_rw_40b")
    if new_arch:
        h, kv, hd = _heads(c, d, ("num_attention_heads", "n_head"), ("num_kv_heads", "n_head_kv"))
    else:
        h, _, hd = _heads(c, d, ("num_attention_heads", "n_head"))
        kv = 1 if c.bool("multi_query", default=True) else h
    bias = c.bool("bias", default=False)
    inter = c.int("ffn_hidden_size", default=4 * d)
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=True)
    block = [
        *_fused_attention(d, h, kv, hd, qkv="query_key_value", out="dense", bias=bias),
        *_mlp(d, inter, names=("dense_h_to_4h", "dense_4h_to_h"), bias=bias),
    ]
    if new_arch:
        norms = c.int("num_ln_in_parallel_attn", default=2)
    else:
        norms = 1 if c.bool("parallel_attn", default=True) else 2
    return _assemble(
        c,
        "falcon",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=norms * _ln(d),
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=_ln(d),
    )


def _gpt_neox(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",))
    inter = c.int("intermediate_size")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    bias = c.bool("attention_bias", default=True)
    block = [
        *_fused_attention(d, h, kv, hd, qkv="query_key_value", out="dense", bias=bias),
        *_mlp(d, inter, names=("dense_h_to_4h", "dense_4h_to_h"), bias=True),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=2 * _ln(d),
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=_ln(d),
    )


def _gptj(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("n_embd", "hidden_size")
    layers = c.int("n_layer", "num_hidden_layers")
    h, kv, hd = _heads(c, d, ("n_head", "num_attention_heads"))
    inter = c.int("n_inner", default=4 * d)
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=False)
    block = [
        *_attention(d, h, kv, hd, names=("q_proj", "k_proj", "v_proj", "out_proj")),
        *_mlp(d, inter, names=("fc_in", "fc_out"), bias=True),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=c.opt_int("n_positions", "max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=_ln(d),
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d + vocab,
        other=_ln(d),
    )


def _opt(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",))
    inter = c.int("ffn_dim")
    vocab = c.int("vocab_size")
    positions = c.int("max_position_embeddings")
    proj = c.int("word_embed_proj_dim", default=d)
    tied = c.bool("tie_word_embeddings", default=True)
    bias = c.bool("enable_bias", default=True)
    affine = c.bool("layer_norm_elementwise_affine", default=True)
    norm = _ln(d) if affine else 0
    block = [
        *_attention(
            d,
            h,
            kv,
            hd,
            names=("q_proj", "k_proj", "v_proj", "out_proj"),
            qkv_bias=bias,
            out_bias=bias,
        ),
        *_mlp(d, inter, bias=bias),
    ]
    # OPT's learned positions keep 2 extra rows (an offset inherited from fairseq).
    embedding = vocab * proj + (positions + 2) * d
    other = 2 * d * proj if proj != d else 0  # project_in / project_out, no bias
    if c.bool("do_layer_norm_before", default=True) and not c.bool(
        "_remove_final_layer_norm", default=False
    ):
        other += norm
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=tied,
        block=block,
        block_other=2 * norm,
        embedding=embedding,
        lm_head=0 if tied else vocab * proj,
        other=other,
    )


def _bloom(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size", "n_embed")
    layers = c.int("n_layer", "num_hidden_layers")
    h, kv, hd = _heads(c, d, ("n_head", "num_attention_heads"))
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=True)
    inter = 4 * d
    block = [
        *_fused_attention(d, h, kv, hd, qkv="query_key_value", out="dense", bias=True),
        *_mlp(d, inter, names=("dense_h_to_4h", "dense_4h_to_h"), bias=True),
    ]
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=None,
        tied=tied,
        block=block,
        block_other=2 * _ln(d),
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=_ln(d) + _ln(d),  # embedding LayerNorm + final LayerNorm
        notes=["BLOOM uses ALiBi: no position embeddings, no length limit in the config."],
    )


def _vit(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = _heads(c, d, ("num_attention_heads",))
    inter = c.int("intermediate_size")
    image = c.int("image_size", default=224)
    patch = c.int("patch_size", default=16)
    channels = c.int("num_channels", default=3)
    qkv_bias = c.bool("qkv_bias", default=True)
    patches = (image // patch) ** 2
    block = [
        *_attention(
            d,
            h,
            kv,
            hd,
            names=("query", "key", "value", "attention.output.dense"),
            qkv_bias=qkv_bias,
            out_bias=True,
        ),
        _lin("intermediate.dense", d, inter, True, "mlp_in"),
        _lin("output.dense", inter, d, True, "mlp_out"),
    ]
    # [CLS] token + position per patch and [CLS] + the patch projection (a strided Conv2d).
    embedding = d + (patches + 1) * d + channels * patch * patch * d + d
    head, note = _encoder_head(c, family, d, 0)
    return _assemble(
        c,
        family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=0,
        positions=patches + 1,
        tied=False,
        block=block,
        block_other=2 * _ln(d),
        embedding=embedding,
        lm_head=0,
        other=_ln(d) + head,
        notes=[note, f"One image is {patches + 1} tokens."],
    )


def _t5(c: _Config, family: str) -> ModelArchitecture:
    d = c.int("d_model")
    enc_layers = c.int("num_layers")
    dec_layers = c.int("num_decoder_layers", default=enc_layers)
    h = c.int("num_heads")
    hd = c.int("d_kv")
    inter = c.int("d_ff")
    vocab = c.int("vocab_size")
    buckets = c.int("relative_attention_num_buckets", default=32)
    tied = c.bool("tie_word_embeddings", default=True)
    gated = c.str("feed_forward_proj", "relu").startswith("gated-")
    mlp = (
        _gated_mlp(d, inter, names=("wi_0", "wi_1", "wo"))
        if gated
        else _mlp(d, inter, names=("wi", "wo"), bias=False)
    )
    self_attn = _attention(d, h, h, hd, names=("q", "k", "v", "o"), prefix="SelfAttention.")
    cross_attn = _attention(
        d, h, h, hd, names=("q", "k", "v", "o"), prefix="EncDecAttention.", role="cross_attn"
    )
    # RMSNorm without bias; the relative position bias lives in the first block of each stack
    # (every block in UMT5).
    rel_blocks_enc = enc_layers if family == "umt5" else 1
    rel_blocks_dec = dec_layers if family == "umt5" else 1
    encoder = enc_layers * (_sum(self_attn) + _sum(mlp) + 2 * d) + rel_blocks_enc * buckets * h + d
    block = [*self_attn, *cross_attn, *mlp]
    return _assemble(
        c,
        family,
        d=d,
        layers=dec_layers,
        h=h,
        kv=h,
        hd=hd,
        inter=inter,
        gated=gated,
        vocab=vocab,
        positions=c.opt_int("n_positions"),
        tied=tied,
        block=block,
        block_other=3 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=rel_blocks_dec * buckets * h + d,
        encoder=encoder,
        encoder_layers=enc_layers,
        notes=["T5 uses relative position buckets: sequence length is not fixed by the config."],
    )


def _bart_like(c: _Config, family: str) -> ModelArchitecture:
    """BART, mBART and Whisper: post-2019 fairseq encoder-decoders with biased projections."""
    d = c.int("d_model")
    enc_layers = c.int("encoder_layers")
    dec_layers = c.int("decoder_layers")
    enc_h, _, _ = _heads(c, d, ("encoder_attention_heads",))
    h, kv, hd = _heads(c, d, ("decoder_attention_heads",))
    enc_inter = c.int("encoder_ffn_dim")
    inter = c.int("decoder_ffn_dim")
    vocab = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", default=True)
    whisper = family == "whisper"
    names = ("q_proj", "k_proj", "v_proj", "out_proj")

    def attention(prefix: str, role: str) -> list[LinearShape]:
        linears = _attention(
            d, h, kv, hd, names=names, prefix=prefix, qkv_bias=True, out_bias=True, role=role
        )
        if whisper:  # Whisper's k_proj has no bias
            linears[1] = linears[1].model_copy(update={"bias": False})
        return linears

    block = [
        *attention("self_attn.", "attn"),
        *attention("encoder_attn.", "cross_attn"),
        *_mlp(d, inter, bias=True),
    ]
    enc_block = _sum(attention("self_attn.", "attn")) + _sum(_mlp(d, enc_inter, bias=True))
    encoder = enc_layers * (enc_block + 2 * _ln(d))
    if whisper:
        mels = c.int("num_mel_bins")
        source_positions = c.int("max_source_positions")
        positions = c.int("max_target_positions")
        # Two 1-D convolutions (kernel 3) over the mel spectrogram, then fixed sinusoidal
        # positions stored as an embedding (counted with the embeddings), and a final LayerNorm.
        encoder += (mels * d * 3 + d) + (d * d * 3 + d) + _ln(d)
        embedding = vocab * d + positions * d + source_positions * d
        other = _ln(d)  # decoder final LayerNorm
        notes = ["Whisper's encoder always sees 30 s of audio: 1500 positions."]
    else:
        positions = c.int("max_position_embeddings")
        # Learned positions with 2 extra rows (fairseq offset) in each stack, and a LayerNorm
        # after each stack's embeddings; mBART adds a final LayerNorm per stack.
        encoder += _ln(d)
        embedding = vocab * d + 2 * (positions + 2) * d
        other = _ln(d)
        if family == "mbart":
            encoder += _ln(d)
            other += _ln(d)
        notes = []
    return _assemble(
        c,
        family,
        d=d,
        layers=dec_layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=positions,
        tied=tied,
        block=block,
        block_other=3 * _ln(d),
        embedding=embedding,
        lm_head=0 if tied else vocab * d,
        other=other,
        encoder=encoder,
        encoder_layers=enc_layers,
        notes=notes,
    )


_Family = Callable[[_Config, str], ModelArchitecture]

# model_type -> (family name, counting function)
_FAMILIES: dict[str, tuple[str, _Family]] = {
    "gpt2": ("gpt2", _gpt2),
    "bert": ("bert", _bert),
    "roberta": ("roberta", _bert),
    "xlm-roberta": ("roberta", _bert),
    "distilbert": ("distilbert", _distilbert),
    "t5": ("t5", _t5),
    "mt5": ("t5", _t5),
    "umt5": ("umt5", _t5),
    "bart": ("bart", _bart_like),
    "mbart": ("mbart", _bart_like),
    "whisper": ("whisper", _bart_like),
    **{name: (name, _llama) for name in _LLAMA_LIKE},
    "phi": ("phi", _phi),
    "mixtral": ("mixtral", _moe),
    "qwen2_moe": ("qwen2_moe", _moe),
    "deepseek_v2": ("deepseek_v2", _deepseek),
    "deepseek_v3": ("deepseek_v3", _deepseek),
    "falcon": ("falcon", _falcon),
    "RefinedWebModel": ("falcon", _falcon),  # Falcon-7B before transformers 4.33
    "RefinedWeb": ("falcon_rw_40b", _falcon),  # Falcon-40B before transformers 4.33
    "gpt_neox": ("gpt_neox", _gpt_neox),
    "gpt_bigcode": ("gpt_bigcode", _gpt_bigcode),
    "mpt": ("mpt", _mpt),
    "gptj": ("gptj", _gptj),
    "opt": ("opt", _opt),
    "bloom": ("bloom", _bloom),
    "vit": ("vit", _vit),
}

# architectures[0] -> model_type, for configs without (or with an unknown) model_type.
_ARCHITECTURES = {
    "GPT2LMHeadModel": "gpt2",
    "GPTBigCodeForCausalLM": "gpt_bigcode",
    "MPTForCausalLM": "mpt",
    "MptForCausalLM": "mpt",
    "GPT2Model": "gpt2",
    "BertModel": "bert",
    "BertForMaskedLM": "bert",
    "BertForPreTraining": "bert",
    "RobertaModel": "roberta",
    "RobertaForMaskedLM": "roberta",
    "DistilBertModel": "distilbert",
    "DistilBertForMaskedLM": "distilbert",
    "T5ForConditionalGeneration": "t5",
    "T5Model": "t5",
    "BartForConditionalGeneration": "bart",
    "BartModel": "bart",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "PhiForCausalLM": "phi",
    "Phi3ForCausalLM": "phi3",
    "MixtralForCausalLM": "mixtral",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "FalconForCausalLM": "falcon",
    "RWForCausalLM": "RefinedWebModel",
    "GPTNeoXForCausalLM": "gpt_neox",
    "GPTJForCausalLM": "gptj",
    "OPTForCausalLM": "opt",
    "BloomForCausalLM": "bloom",
    "ViTModel": "vit",
    "ViTForImageClassification": "vit",
    "WhisperForConditionalGeneration": "whisper",
}


def supported_model_types() -> list[str]:
    return sorted(_FAMILIES)


def _family_of(c: _Config) -> str | None:
    model_type = c.raw.get("model_type")
    if isinstance(model_type, str) and model_type in _FAMILIES:
        return model_type
    architecture = c.architecture()
    if architecture in _ARCHITECTURES:
        return _ARCHITECTURES[architecture]
    return None


def architecture_from_config(config: dict) -> ModelArchitecture:
    """Shape and exact parameter count from a Hugging Face config.json (as a dict).

    Raises ConfigError (naming the field) when the config is not one or a field is malformed.
    An unknown architecture gets an approximate count from the common fields, marked exact=False.
    """
    c = _Config(config)
    model_type = _family_of(c)
    if model_type is not None:
        family, count = _FAMILIES[model_type]
        return count(c, family)
    text_config = c.raw.get("text_config")
    if isinstance(text_config, dict) and text_config:
        inner = architecture_from_config(
            {"architectures": c.raw.get("architectures"), **text_config}
        )
        return inner.model_copy(
            update={
                "exact": False,
                "notes": [
                    *inner.notes,
                    "Only the language model inside this multimodal config is "
                    "counted; its vision/audio encoder is not.",
                ],
            }
        )
    return _generic(c)


def _generic(c: _Config) -> ModelArchitecture:
    """An unknown model_type: a Llama-shaped estimate from the fields most configs share."""
    raw_type = c.raw.get("model_type")
    label = repr(raw_type) if raw_type else "no model_type"
    d = c.int("hidden_size", "n_embd", "d_model", "dim")
    layers = c.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    vocab = c.int("vocab_size")
    h = c.int("num_attention_heads", "n_head", "num_heads", "n_heads", default=max(1, d // 128))
    kv = c.int("num_key_value_heads", "num_kv_heads", default=h)
    hd = c.int("head_dim", default=max(1, d // h))
    gated = c.str("hidden_act", c.str("activation_function")) in {"silu", "swiglu", "swish"}
    inter = c.int(
        "intermediate_size",
        "n_inner",
        "ffn_dim",
        "d_ff",
        "hidden_dim",
        default=4 * d if not gated else int(8 * d / 3),
    )
    tied = c.bool("tie_word_embeddings", default=False)
    block = [
        *_attention(d, h, kv, hd),
        *(_gated_mlp(d, inter) if gated else _mlp(d, inter, bias=False)),
    ]
    return _assemble(
        c,
        "unknown",
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=gated,
        vocab=vocab,
        positions=c.opt_int("max_position_embeddings"),
        tied=tied,
        block=block,
        block_other=2 * d,
        embedding=vocab * d,
        lm_head=0 if tied else vocab * d,
        other=d,
        exact=False,
        source="config.json (generic estimate)",
        notes=[
            f"Architecture {label} is not one the estimator knows "
            f"(known: {', '.join(sorted({f for f, _ in _FAMILIES.values()}))}"
            "). The count is an estimate from hidden_size, num_hidden_layers, "
            "vocab_size and intermediate_size, assuming a Llama-like block; "
            "enter the parameter count from the model card if you know it."
        ],
    )


# --- A number typed by the researcher --------------------------------------------------------

# Decoder shapes of well-known models (hidden size, layers), from which a typed count borrows the
# nearest: GPT-2 124M/355M/774M/1.5B, Llama-2 7B/13B/70B, GPT-3 175B (Brown et al. 2020, table 2.1).
_REFERENCE_SHAPES = [
    (768, 12),
    (1024, 24),
    (1280, 36),
    (1600, 48),
    (2048, 24),
    (2560, 32),
    (4096, 32),
    (5120, 40),
    (6656, 60),
    (8192, 80),
    (12288, 96),
    (16384, 126),
]


def architecture_from_params(params: int, *, hint: dict | None = None) -> ModelArchitecture:
    """A plausible decoder for a typed-in count, so activations can be estimated (exact=False).

    `hint` may fix any of hidden_size, num_hidden_layers, num_attention_heads, vocab_size,
    intermediate_size, max_position_embeddings and params_active (MoE).
    """
    if isinstance(params, bool) or not isinstance(params, int) or params <= 0:
        raise ConfigError(
            f"The parameter count must be a positive integer, got {params!r}", field="params"
        )
    hint = dict(hint or {})
    h_cfg = _Config(hint)
    vocab = h_cfg.int("vocab_size", default=32000)
    d = h_cfg.opt_int("hidden_size")
    if d is None:
        # Blocks hold ~12 d^2 parameters each; pick the reference shape whose size is nearest.
        def size(shape: tuple[int, int]) -> int:
            dd, ll = shape
            return 12 * dd * dd * ll + 2 * vocab * dd

        d = min(_REFERENCE_SHAPES, key=lambda s: abs(math.log(size(s) / params)))[0]
    layers = h_cfg.opt_int("num_hidden_layers")
    if layers is None:
        layers = max(1, round((params - 2 * vocab * d) / (12 * d * d)))
    h = h_cfg.int("num_attention_heads", default=max(1, d // 128))
    if d % h:
        raise ConfigError(
            f"hint field 'num_attention_heads' ({h}) must divide the hidden size ({d})",
            field="num_attention_heads",
        )
    inter = h_cfg.int("intermediate_size", default=4 * d)
    active = h_cfg.int("params_active", default=params)
    block = [*_attention(d, h, h, d // h), *_mlp(d, inter, bias=False)]
    return ModelArchitecture(
        family="unknown",
        architecture=None,
        num_layers=layers,
        hidden_size=d,
        num_attention_heads=h,
        num_kv_heads=h,
        head_dim=d // h,
        intermediate_size=inter,
        gated_mlp=False,
        vocab_size=vocab,
        max_position_embeddings=h_cfg.opt_int("max_position_embeddings"),
        tied_embeddings=False,
        layer_linears=block,
        params_total=params,
        params_active=min(active, params),
        params_embedding=vocab * d,
        params_lm_head=vocab * d,
        source="typed by researcher",
        exact=False,
        notes=[
            f"The count {params:,} is as typed; the shape ({layers} layers of width {d}) is "
            "a guess derived from it, so activation memory and FLOPs are approximate."
        ],
    )


# --- Hugging Face Hub metadata ---------------------------------------------------------------

DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}

# Relative difference under which the Hub's count and ours are "the same model". Unpacked
# quantised counts carry scales, zero points and (bitsandbytes) absmax statistics: a few per cent.
_AGREEMENT = 0.01
_AGREEMENT_QUANTISED = 0.05


def _quant_bits(q: dict[str, Any] | None) -> int | None:
    if not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    if q.get("load_in_4bit") or method in {"awq", "gptq"} and not q.get("bits"):
        return 4
    if q.get("load_in_8bit"):
        return 8
    bits = q.get("bits") or q.get("w_bit")
    if isinstance(bits, int) and not isinstance(bits, bool) and bits > 0:
        return bits
    if method == "fp8":
        return 8
    return None


def _unpacked_count(metadata: HubModelMetadata, bits: int | None) -> int:
    """Elements as stored, with packed low-bit integers unpacked to one per weight.

    GPTQ/AWQ pack 32/bits weights into each I32 (their I32 qzeros/g_idx are unpacked too, a small
    overcount), bitsandbytes-4bit packs two per U8. Their F16/F32 scales are counted as they are:
    the result is an estimate, within a few per cent.
    """
    total = 0
    for dtype, count in metadata.safetensors_parameters.items():
        if bits and bits < 8 and dtype in {"I32", "U32"}:
            total += count * 32 // bits
        elif bits and bits < 8 and dtype == "U8":
            total += count * 8 // bits
        else:
            total += count
    return total


def _explain_difference(arch: ModelArchitecture, difference: int) -> str:
    """Name the stored extras that make up `difference` exactly, or return ""."""
    positions = arch.max_position_embeddings or 0
    extras = {
        # A tied embedding saved a second time as lm_head.weight.
        "the tied embedding a second time (as the LM head)": (
            arch.vocab_size * arch.hidden_size if arch.tied_embeddings else 0
        ),
        # GPT-2-era checkpoints: h.N.attn.bias, a (1, 1, n_positions, n_positions) causal mask.
        "a causal-mask buffer per layer": arch.num_layers * positions * positions,
        # Older Llama conversions: rotary_emb.inv_freq, head_dim / 2 per layer.
        "a rotary inv_freq buffer per layer": arch.num_layers * (arch.head_dim // 2),
    }
    names = [name for name, size in extras.items() if size]
    for r in range(1, len(names) + 1):
        for combo in itertools.combinations(names, r):
            if sum(extras[name] for name in combo) == difference:
                return " and ".join(combo)
    return ""


def architecture_from_hub(metadata: HubModelMetadata) -> ModelArchitecture:
    """Combine the Hub's safetensors counts with config.json's shape.

    The config count is exact for a known family, so it wins when both agree; the Hub's counts
    include buffers (GPT-2's causal masks), a tied embedding stored twice, and quantised weights
    packed several to an integer (../shared/hf-hub-notes.md §3.2), so a difference is explained in
    the notes rather than silently taken. With no usable config the Hub count is used as is.
    """
    bits = _quant_bits(
        metadata.quantization_config or (metadata.config or {}).get("quantization_config")
    )
    stored_bytes = (
        sum(
            DTYPE_BYTES.get(dtype, 2) * count
            for dtype, count in metadata.safetensors_parameters.items()
        )
        or None
    )
    hub_count = (
        _unpacked_count(metadata, bits)
        if metadata.safetensors_parameters
        else metadata.safetensors_total
    )
    extra = {"stored_weight_bytes": stored_bytes, "quantization_bits": bits}

    arch: ModelArchitecture | None = None
    config_problem = ""
    if metadata.config and any(
        k in metadata.config for k in ("hidden_size", "n_embd", "d_model", "dim")
    ):
        try:
            arch = architecture_from_config(metadata.config)
        except ConfigError as error:
            config_problem = error.message
    if arch is None and not hub_count:
        if config_problem:
            raise ConfigError(config_problem, field="config.json")
        raise ConfigError(
            f"The Hub has neither safetensors counts nor a config.json with "
            f"dimensions for {metadata.repo_id}; type the parameter count instead.",
            field="config.json",
        )
    quant_note = (
        f"Quantised to {bits} bits: the Hub's packed integer counts were unpacked." if bits else ""
    )
    if arch is None:
        # No shape from the config: a guessed shape around the Hub's count.
        guess = architecture_from_params(hub_count)
        notes = [
            f"Parameter count {hub_count:,} from the Hub's safetensors metadata"
            + (" (quantised weights unpacked, an estimate)" if bits and bits < 8 else "")
            + "; it may include stored buffers.",
            "No usable config.json: the layer shape is a guess from the count.",
        ]
        if config_problem:
            notes.append(f"config.json was not usable: {config_problem}")
        if quant_note:
            notes.append(quant_note)
        summary = metadata.config or {}
        architectures = summary.get("architectures")
        return guess.model_copy(
            update={
                "architecture": architectures[0]
                if isinstance(architectures, list)
                and architectures
                and isinstance(architectures[0], str)
                else None,
                "source": "hub safetensors",
                "notes": notes,
                "exact": not (bits and bits < 8),
                **extra,
            }
        )

    notes = list(arch.notes)
    if quant_note:
        notes.append(quant_note)
    if not hub_count:
        return arch.model_copy(update={"notes": notes, **extra})
    if arch.family == "unknown":
        # The Hub's count is a real count; the config only gave a generic estimate.
        notes.append(
            f"Parameter count {hub_count:,} from the Hub's safetensors metadata "
            "(it may include stored buffers); the shape is from config.json."
        )
        ratio = arch.params_active / arch.params_total
        return arch.model_copy(
            update={
                "params_total": hub_count,
                "params_active": round(hub_count * ratio),
                "source": "hub safetensors",
                "exact": not (bits and bits < 8),
                "notes": notes,
                **extra,
            }
        )
    ours = arch.params_total
    difference = hub_count - ours
    explained = _explain_difference(arch, difference)
    if difference == 0:
        notes.append("The Hub's safetensors count agrees exactly.")
    elif explained:
        notes.append(
            f"The Hub's safetensors count ({hub_count:,}) is {difference:+,} because the "
            f"checkpoint also stores {explained}; those are not counted as parameters."
        )
    elif abs(difference) <= (_AGREEMENT_QUANTISED if bits else _AGREEMENT) * ours:
        notes.append(
            f"The Hub's safetensors count ({hub_count:,}) differs by {difference:+,} "
            f"({difference / ours:+.2%}): "
            + (
                "scales and zero points of the quantisation."
                if bits
                else "stored buffers (masks, rotary tables) or task heads, which are not "
                "parameters of the model counted here."
            )
        )
    else:
        notes.append(
            f"The Hub's safetensors count ({hub_count:,}) differs from the config count "
            f"by {difference / ours:+.1%}: the config may not describe these weights. "
            "Check the repository before relying on the estimate."
        )
        return arch.model_copy(update={"notes": notes, "exact": False, **extra})
    return arch.model_copy(
        update={
            "notes": notes,
            "source": f"{arch.source}, checked against hub safetensors",
            **extra,
        }
    )
