"""The Hub's safetensors counts, read against config.json's exact count: the one Hub mapping.

The Hub's counts are stored tensor elements, not parameters (../shared/hf-hub-notes.md §3.2):
they include buffers (GPT-2's causal masks), a tied embedding stored twice, and quantised weights
packed several to an integer. The config count is exact for a known family, so it wins; the
difference is explained in the notes. With no usable config the Hub count is used as it is.
"""

from __future__ import annotations

import itertools
from typing import Any

from advisor.engine.architecture.config import MAX_PARAMS, Config
from advisor.engine.architecture.model import ModelArchitecture
from advisor.engine.architecture.registry import architecture_from_config, runs_remote_code
from advisor.engine.architecture.typed import architecture_from_params
from advisor.engine.errors import ConfigError
from advisor.engine.models import HubModelMetadata

# Bytes per element of each safetensors dtype (the safetensors format's Dtype enum:
# docs.rs/safetensors, `Dtype`), the one table the engine and the lookups use.
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


def check_hub_counts(counts: dict[str, Any], total: Any = None) -> None:
    """Refuse Hub counts no real checkpoint has (issue 11: a total of 1e308 crashed math.log)."""
    for dtype, count in [*counts.items(), ("total", total)]:
        if count is None and dtype == "total":
            continue
        field = "safetensors_total" if dtype == "total" else "safetensors_parameters"
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(
                f"The Hub's safetensors count for {dtype} is not a whole number of elements",
                field=field,
            )
        if count > MAX_PARAMS:
            raise ConfigError(
                f"The Hub's safetensors count for {dtype} ({float(count):.3g} elements) is "
                f"beyond any real model (limit {MAX_PARAMS:.0e})",
                field=field,
            )


def quant_method(q: dict[str, Any] | None) -> str:
    return str(q.get("quant_method", "")).lower() if isinstance(q, dict) else ""


def quantization_bits(q: dict[str, Any] | None) -> int | None:
    if not isinstance(q, dict) or not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    if q.get("load_in_4bit") or method in {"awq", "gptq"} and not q.get("bits"):
        return 4
    if q.get("load_in_8bit"):
        return 8
    bits = q.get("bits") or q.get("w_bit")
    if isinstance(bits, int) and not isinstance(bits, bool) and 0 < bits <= 64:
        return bits
    if method == "fp8":
        return 8
    if method == "mxfp4":  # gpt-oss: two 4-bit experts' weights per U8, U8 scales beside
        return 4
    return None


def unpacked_count(counts: dict[str, int], bits: int | None, method: str = "") -> int:
    """Elements as stored, with packed low-bit integers unpacked to one per weight.

    GPTQ/AWQ pack 32/bits weights into each I32 (their I32 qzeros/g_idx are unpacked too, a small
    overcount), bitsandbytes-4bit packs two per U8. Their F16/F32 scales are counted as they are:
    the result is an estimate, within a few per cent. MXFP4 (gpt-oss) stores each block of 32
    weights as 16 bytes of values and one byte of shared scale, both U8: 17 bytes per 32 weights.
    """
    total = 0
    for dtype, count in counts.items():
        if method == "mxfp4" and dtype == "U8":
            total += count * 32 // 17
        elif bits and bits < 8 and dtype in {"I32", "U32"}:
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
        # What the family stores beyond its parameters (Qwen3.5's mtp.* weights, ...).
        **arch.stored_extras,
    }
    names = [name for name, size in extras.items() if size]
    for r in range(1, len(names) + 1):
        for combo in itertools.combinations(names, r):
            if sum(extras[name] for name in combo) == difference:
                return " and ".join(combo)
    return ""


def compare_with_hub(arch: ModelArchitecture, hub_count: int, bits: int | None) -> tuple[str, bool]:
    """(note, trusted): why the Hub's stored count differs from the architecture's, if it does.

    `trusted` is False when the difference is too large to be buffers, a stored tied copy or
    quantisation overhead: the config may not describe these weights.
    """
    ours = arch.params_total
    difference = hub_count - ours
    if difference == 0:
        return "The Hub's safetensors count agrees exactly.", True
    explained = _explain_difference(arch, difference)
    if explained:
        return (
            f"The Hub's safetensors count ({hub_count:,}) is {difference:+,} because the "
            f"checkpoint also stores {explained}; those are not counted as parameters.",
            True,
        )
    if abs(difference) <= (_AGREEMENT_QUANTISED if bits else _AGREEMENT) * ours:
        reason = (
            "scales and zero points of the quantisation."
            if bits
            else "stored buffers (masks, rotary tables) or task heads, which are not "
            "parameters of the model counted here."
        )
        return (
            f"The Hub's safetensors count ({hub_count:,}) differs by {difference:+,} "
            f"({difference / ours:+.2%}): " + reason,
            True,
        )
    return (
        f"The Hub's safetensors count ({hub_count:,}) differs from the config count "
        f"by {difference / ours:+.1%}: the config may not describe these weights. "
        "Check the repository before relying on the estimate.",
        False,
    )


_DIMENSIONS = ("hidden_size", "n_embd", "d_model", "dim")


def _has_dimensions(config: dict | None) -> bool:
    """config.json sizes the model: at its top level, or in text_config where a
    vision-language model (Gemma 3, Qwen3-VL, Llama 4, Qwen3.5) keeps its language model's."""
    if not config:
        return False
    text = config.get("text_config")
    return any(k in config for k in _DIMENSIONS) or (
        isinstance(text, dict) and any(k in text for k in _DIMENSIONS)
    )


def _config_architecture(metadata: HubModelMetadata) -> tuple[ModelArchitecture | None, str]:
    if _has_dimensions(metadata.config):
        try:
            return architecture_from_config(metadata.config), ""
        except ConfigError as error:
            return None, error.message
    return None, ""


def _from_hub_count(
    metadata: HubModelMetadata, hub_count: int, bits: int | None, problem: str, extra: dict
) -> ModelArchitecture:
    """No usable config: the Hub's count as it is, around a shape guessed from it."""
    guess = architecture_from_params(hub_count)
    notes = [
        f"Parameter count {hub_count:,} from the Hub's safetensors metadata"
        + (" (quantised weights unpacked, an estimate)" if bits and bits < 8 else "")
        + "; it may include stored buffers.",
        "No usable config.json: the layer shape is a guess from the count.",
    ]
    if problem:
        notes.append(f"config.json was not usable: {problem}")
    if bits:
        notes.append(f"Quantised to {bits} bits: the Hub's packed integer counts were unpacked.")
    architectures = (metadata.config or {}).get("architectures")
    name = architectures[0] if isinstance(architectures, list) and architectures else None
    return guess.model_copy(
        update={
            "architecture": name[:200] if isinstance(name, str) else None,
            "source": "hub safetensors",
            "notes": notes,
            "exact": not (bits and bits < 8),
            # A family the engine cannot count may still say it runs its own code.
            "remote_code": isinstance(metadata.config, dict)
            and runs_remote_code(Config(metadata.config)),
            **extra,
        }
    )


def architecture_from_hub(metadata: HubModelMetadata) -> ModelArchitecture:
    """Combine the Hub's safetensors counts with config.json's shape (see the module's doc)."""
    check_hub_counts(metadata.safetensors_parameters, metadata.safetensors_total)
    quantization = metadata.quantization_config or (metadata.config or {}).get(
        "quantization_config"
    )
    bits = quantization_bits(quantization)
    counts = metadata.safetensors_parameters
    stored_bytes = sum(DTYPE_BYTES.get(dtype, 2) * n for dtype, n in counts.items()) or None
    hub_count = (
        unpacked_count(counts, bits, quant_method(quantization))
        if counts
        else metadata.safetensors_total
    )
    if hub_count and hub_count > MAX_PARAMS:
        check_hub_counts({}, hub_count)
    extra = {"stored_weight_bytes": stored_bytes, "quantization_bits": bits}

    arch, problem = _config_architecture(metadata)
    if arch is None:
        if hub_count:
            return _from_hub_count(metadata, hub_count, bits, problem, extra)
        if problem:
            raise ConfigError(problem, field="config.json")
        raise ConfigError(
            f"The Hub has neither safetensors counts nor a config.json with "
            f"dimensions for {metadata.repo_id}; type the parameter count instead.",
            field="config.json",
        )
    notes = list(arch.notes)
    if bits:
        notes.append(f"Quantised to {bits} bits: the Hub's packed integer counts were unpacked.")
    if not hub_count:
        return arch.model_copy(update={"notes": notes, **extra})
    note, trusted = compare_with_hub(arch, hub_count, bits)
    notes.append(note)
    if not trusted:
        return arch.model_copy(update={"notes": notes, "exact": False, **extra})
    return arch.model_copy(
        update={
            "notes": notes,
            "source": f"{arch.source}, checked against hub safetensors",
            **extra,
        }
    )
