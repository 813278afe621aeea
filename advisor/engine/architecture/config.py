"""Reading config.json: typed, bounded access where every error names the offending field.

Every count that reaches the formula passes through `Config.int`, so a config (typed, uploaded or
fetched from the Hub) cannot carry a number no real model has: 1e308 layers would overflow the
memory formulas and 1e40 would give a meaningless 9e42-parameter answer (issue 11).
"""

from __future__ import annotations

from typing import Any

from advisor.engine.errors import ConfigError

# The largest value any real model uses, with a wide margin. The largest published values as of
# 2025: vocabulary 262,144 (Gemma 3, google/gemma-3-1b-pt config.json), 126 layers
# (Llama-3.1-405B), hidden size 18,432 (Nemotron-4-340B, arXiv:2406.11704 table 1), 256 routed
# experts (DeepSeek-V3, arXiv:2412.19437 §4.2), 10M-token context (Llama 4 Scout model card).
LIMITS = {
    "vocab": 4_194_304,  # 2**22
    "layers": 4_096,
    "width": 1_048_576,  # hidden, intermediate, head and LoRA-rank sizes: 2**20
    "heads": 65_536,
    "experts": 65_536,
    "positions": 2**27,  # 134M tokens
    "other": 2**24,
}
# Total parameters: the same limit the request applies to a typed count (request_checks.LIMITS).
MAX_PARAMS = 10**13
LIMITS["params"] = MAX_PARAMS

_KIND_OF = {
    "vocab_size": "vocab",
    "vocab_size_per_layer_input": "vocab",  # Gemma 4's per-layer embedding table
    "type_vocab_size": "vocab",
    "num_labels": "vocab",
    "relative_attention_num_buckets": "vocab",
    "num_mel_bins": "vocab",
    "params_active": "params",
}


def _kind(name: str) -> str:
    if name in _KIND_OF:
        return _KIND_OF[name]
    if "layer" in name or name in {"first_k_dense_replace", "decoder_sparse_step"}:
        return "layers"
    if "expert" in name or name in {"moe_layer_freq"}:
        return "experts"
    if "head" in name and "dim" not in name:
        return "heads"
    if "position" in name or name in {"n_positions", "n_ctx", "max_seq_len", "seq_length"}:
        return "positions"
    if name in {"image_size", "patch_size", "num_channels", "expansion_ratio"}:
        return "other"
    return "width"


class Config:
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
        return check_int(value, name, minimum=minimum)

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
        if len(value) > LIMITS["layers"]:
            raise ConfigError(
                f"config.json field '{name}' lists {len(value):,} layers, more than any real "
                f"model has (limit {LIMITS['layers']:,})",
                field=name,
            )
        return value

    def architecture(self) -> str | None:
        value = self.raw.get("architectures")
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0][:200]
        return None

    def model_type(self) -> str | None:
        value = self.raw.get("model_type")
        return value[:100] if isinstance(value, str) and value else None

    def remote_model_class(self) -> str | None:
        """The model class `auto_map` points to in the model's own repository
        ("modeling_qwen.QWenLMHeadModel"), or None. transformers' Auto classes load that code
        (with trust_remote_code=True) instead of a class of their own."""
        auto_map = self.raw.get("auto_map")
        if not isinstance(auto_map, dict):
            return None
        for key, value in auto_map.items():
            if isinstance(key, str) and key.startswith("AutoModel") and isinstance(value, str):
                return value[:200]
        return None


def check_int(value: Any, name: str, *, minimum: int = 1, limit: int | None = None) -> int:
    """A whole number >= minimum and within the real-model limit for `name`'s kind."""
    # JSON has one number type: accept 4096.0 but not 4096.5, True, "4096", inf or nan.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        shown = repr(value) if not isinstance(value, int | float) or abs(value) < 1e15 else "huge"
        raise ConfigError(f"config.json field '{name}' must be {kind}, got {shown}", field=name)
    limit = limit if limit is not None else LIMITS[_kind(name)]
    if value > limit:
        shown = f"{value:,}" if value < 10**15 else f"{float(value):.3g}"
        raise ConfigError(
            f"config.json field '{name}' is {shown}, beyond any real model (limit {limit:,})",
            field=name,
        )
    return value


def heads(c: Config, d: int, heads_field: tuple[str, ...], kv_field: tuple[str, ...] = ()):
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


def encoder_dims(c: Config) -> tuple[int, int, int, int, int, int]:
    """(hidden size, layers, heads, kv heads, head dim, MLP width) under the names BERT-style
    encoders and ViTs use (hidden_size, num_hidden_layers, num_attention_heads,
    intermediate_size), with heads()'s checks."""
    d = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    h, kv, hd = heads(c, d, ("num_attention_heads",))
    return d, layers, h, kv, hd, c.int("intermediate_size")
