"""The bundled config.json files: each one counts to its model's published size.

Every entry of advisor/model_configs/index.json names a published figure (a model card, a paper,
the Hub's safetensors total or an exact count printed by public code) and a tolerance: 0 where
the source gives the exact integer, otherwise the precision the source states (e.g. "7.61B" is
within 0.5 %). The engine's count must fall inside it, exactly as the index records it.
"""

from __future__ import annotations

import json

import pytest

from advisor import model_configs
from advisor.engine.architecture import architecture_from_config, known_families
from advisor.hub import validate_repo_id

ENTRIES = model_configs.entries()


def test_at_least_a_hundred_models_are_bundled():
    assert len(ENTRIES) >= 100
    assert len({entry["repo_id"].lower() for entry in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["repo_id"] for e in ENTRIES])
def test_bundled_config_counts_to_the_published_size(entry):
    bundled = model_configs.find_bundled(entry["repo_id"])
    arch = architecture_from_config(bundled.config)

    assert arch.exact is True
    assert arch.family == entry["model_type"]
    assert arch.params_total == entry["params_total"]
    assert arch.params_active == entry["params_active"]
    published, tolerance = entry["published_params"], entry["tolerance"]
    assert abs(arch.params_total - published) <= tolerance * published, entry["published_source"]
    assert 0 <= tolerance <= 0.05  # loose figures ("7B") are allowed at most 5 %
    assert validate_repo_id(entry["repo_id"]) == entry["repo_id"]
    assert entry["licence"]
    assert entry["published_source"]
    assert entry["config_source"]


def test_every_family_researchers_use_now_has_bundled_models():
    bundled = {entry["model_type"] for entry in ENTRIES}
    wanted = {
        "qwen2", "qwen3", "qwen3_moe", "qwen2_moe", "llama", "gemma", "gemma2", "gemma3_text",
        "gemma3", "phi", "phi3", "mistral", "mixtral", "deepseek_v2", "deepseek_v3", "olmo",
        "olmo2", "gpt2", "openai-gpt", "bert", "roberta", "distilbert", "t5", "bart", "mbart",
        "falcon", "gpt_neox", "opt", "bloom", "vit", "whisper", "mpt", "gpt_bigcode", "gptj",
        "phimoe", "gpt_oss",
    }  # fmt: skip
    assert wanted <= bundled
    # The engine reports mT5 as t5 and DeBERTa-v2/v3 as deberta (the family, not the model_type).
    assert bundled <= set(known_families()) | {"t5", "deberta"}


def test_the_published_sizes_of_the_brief_hold():
    # Issue 15: gpt2 has 124,439,808 parameters; issue 13: Qwen3-30B-A3B 30.5B total, 3.3B active.
    gpt2 = architecture_from_config(model_configs.find_bundled("openai-community/gpt2").config)
    qwen = architecture_from_config(model_configs.find_bundled("Qwen/Qwen3-30B-A3B").config)

    assert gpt2.params_total == 124_439_808
    assert round(qwen.params_total / 1e9, 1) == 30.5
    assert round(qwen.params_active / 1e9, 1) == 3.4  # 3.35B with embeddings and head


def test_lookup_by_alias_and_any_case():
    assert model_configs.find_bundled("gpt2").repo_id == "openai-community/gpt2"
    assert (
        model_configs.find_bundled("META-LLAMA/llama-3.1-8b").repo_id == "meta-llama/Llama-3.1-8B"
    )
    assert model_configs.find_bundled("someone/not-bundled") is None


def test_bundled_files_are_plain_config_json_objects():
    for entry in ENTRIES:
        raw = json.loads((model_configs.DIRECTORY / entry["file"]).read_text(encoding="utf-8"))
        assert isinstance(raw, dict)
        assert isinstance(raw.get("model_type"), str)
