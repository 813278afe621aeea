"""What a lookup stores about a model's size, whether the Hub or a local config.json gave it.

No Hub calls here (advisor/hub/ makes those): the choice between the architecture's count
and the Hub's stored count, and the metadata built from a bundled or staff config.json.
"""

from __future__ import annotations

from typing import Any

from advisor.engine.architecture import (
    architecture_from_config,
    check_hub_counts,
    compare_with_hub,
    quant_method,
    quantization_bits,
    unpacked_count,
)
from advisor.engine.errors import ConfigError


def choose_params(
    config: dict[str, Any] | None,
    counts: dict[str, int],
    total: int | None,
    counts_source: str,
    quantization: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The model's parameter count, where it comes from, and why the Hub's total differs.

    The architecture's count wins when the engine knows the family: the Hub's safetensors
    total counts stored tensors, buffers and duplicated tied weights included (GPT-2:
    137,022,720 stored, 124,439,808 parameters; ../shared/hf-hub-notes.md §3.2). The Hub's total
    is kept beside it, with the reason, only when the two differ.
    """
    chosen: dict[str, Any] = {
        "params_total": total,
        "params_source": counts_source if total else "",
        "safetensors_note": "",
        "notes": [],
    }
    if config is None:
        return chosen
    try:
        arch = architecture_from_config(config)
    except ConfigError as exc:
        chosen["notes"].append(f"config.json could not be counted: {exc.message}")
        return chosen
    if not arch.exact:
        chosen["notes"].append("The parameter count from config.json is approximate.")
    if not total:
        chosen.update(params_total=arch.params_total, params_source=arch.source)
        return chosen
    bits = quantization_bits(quantization)
    stored = unpacked_count(counts, bits, quant_method(quantization)) if counts else total
    note, trusted = compare_with_hub(arch, stored, bits)
    if not trusted:
        chosen["safetensors_note"] = note
        return chosen
    chosen.update(params_total=arch.params_total, params_source=arch.source)
    if total != arch.params_total:
        chosen["safetensors_note"] = note
    return chosen


def bounded_counts(counts: dict[str, int], total: int | None, notes: list[str]):
    """The Hub's counts, or none when they are beyond any real model (issue 11)."""
    try:
        check_hub_counts(counts, total)
    except ConfigError as exc:
        notes.append(f"{exc.message}; the count was ignored.")
        return {}, None
    return counts, total


def metadata_from_config(repo_id: str, local: dict[str, Any], *, note: str) -> dict[str, Any]:
    """A lookup's answer built from a config.json the app holds (bundled or staff-added).

    Same shape as fetch_model's metadata, so the card, the JSON and the estimate read it the
    same way; `config_source` says where it came from.
    """
    config = local["config"]
    chosen = choose_params(config, {}, None, "")
    quantization = config.get("quantization_config")
    return {
        "repo_id": repo_id,
        "sha": None,
        "pipeline_tag": None,
        "library_name": None,
        "license": local.get("licence"),
        "gated": False,
        "private": False,
        "downloads": None,
        "likes": None,
        "last_modified": None,
        "safetensors_parameters": {},
        "safetensors_total": None,
        "bytes_per_dtype": {},
        **chosen,
        "notes": [note, *chosen["notes"]],
        "config_source": local["kind"],
        "config_origin": local.get("source") or "",
        "quantization_config": quantization if isinstance(quantization, dict) else None,
        "architectures": config.get("architectures"),
        "model_type": config.get("model_type"),
        "config": config,
        "files": {},
    }
