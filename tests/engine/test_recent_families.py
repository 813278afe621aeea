"""Families released in 2025-26 that engine 1.12 refused: GLM-4.5 / 4.6, Mistral Small 3.x
(Pixtral vision tower), SmolLM3, OLMo 3, ERNIE 4.5 MoE and Seed-OSS. Each count equals
transformers 5.24's num_parameters for the released config (built on the meta device), and
where the Hub's total differs the difference is what the checkpoint stores and transformers
does not load (advisor/model_configs/index.json names the sources)."""

from __future__ import annotations

import pytest

from advisor.engine.architecture import architecture_from_config, architecture_from_hub
from advisor.engine.errors import ConfigError
from advisor.engine.models import HubModelMetadata
from advisor.engine.shape import sliding_window_of
from advisor.model_configs import find_bundled


def _config(repo: str) -> dict:
    return find_bundled(repo).config


@pytest.mark.parametrize(
    ("repo", "family", "total", "active"),
    [
        ("zai-org/GLM-4.5", "glm4_moe", 352_797_814_784, 33_632_251_904),
        ("zai-org/GLM-4.5-Air", "glm4_moe", 106_852_245_504, 13_424_123_904),
        ("zai-org/GLM-4.6", "glm4_moe", 352_797_814_784, 33_632_251_904),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral3", 24_011_361_280, None),
        ("HuggingFaceTB/SmolLM3-3B", "smollm3", 3_075_098_624, None),
        ("allenai/Olmo-3-1025-7B", "olmo3", 7_298_011_136, None),
        ("allenai/Olmo-3-1125-32B", "olmo3", 32_233_522_176, None),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "seed_oss", 36_151_104_512, None),
        ("baidu/ERNIE-4.5-21B-A3B-PT", "ernie4_5_moe", 21_825_437_888, 3_352_150_208),
    ],
)
def test_each_release_counts_as_transformers_builds_it(repo, family, total, active):
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total) == (family, total)
    assert arch.params_active == (active or total)


@pytest.mark.parametrize(
    ("repo", "hub_total", "copy"),
    [
        # The MTP layer, its own copy of the embedding and LM head, and the routers' bias
        # buffers; GLM-4.6's checkpoint has no such copy.
        ("zai-org/GLM-4.5", 358_337_791_296, True),
        ("zai-org/GLM-4.5-Air", 110_468_824_832, True),
        ("zai-org/GLM-4.6", 356_785_898_816, False),
    ],
)
def test_glm_hub_totals_are_explained_to_the_parameter(repo, hub_total, copy):
    metadata = HubModelMetadata(
        repo_id=repo, safetensors_parameters={"BF16": hub_total}, config=_config(repo)
    )

    arch = architecture_from_hub(metadata)

    assert arch.exact
    assert "the multi-token-prediction layer, which transformers does not load" in (arch.notes[-1])
    assert "score-correction biases" in arch.notes[-1]
    assert ("own copy of the embedding and LM head" in arch.notes[-1]) is copy


def test_mistral_small_keeps_its_own_lm_head_unless_the_config_ties_it():
    """Mistral Small's config.json does not say; its checkpoint stores lm_head apart from the
    embedding, so from_pretrained unties it (the Hub's 24,011,361,280 counts both). A config
    that ties it at the top level saves 131,072 x 5,120."""
    config = _config("mistralai/Mistral-Small-3.1-24B-Instruct-2503")

    tied = architecture_from_config({**config, "tie_word_embeddings": True})

    assert tied.params_total == 24_011_361_280 - 131_072 * 5120
    assert any("Pixtral vision encoder" in note for note in tied.notes)


def test_a_mistral3_wrapper_around_an_unknown_language_model_is_refused():
    config = _config("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    text = {**config["text_config"], "model_type": "ministral"}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**config, "text_config": text})

    assert raised.value.field == "text_config"
    assert "'ministral'" in str(raised.value)


def test_olmo3_sliding_layers_bound_their_cache():
    assert sliding_window_of(_config("allenai/Olmo-3-1025-7B"), 32) == (4096, 24)


def test_ernie_routes_in_all_but_its_first_layer():
    arch = architecture_from_config(_config("baidu/ERNIE-4.5-21B-A3B-PT"))

    assert "1 of 28 layers use a dense MLP." in arch.notes


def test_seed_oss_has_query_key_value_biases_unless_the_config_turns_them_off():
    config = _config("ByteDance-Seed/Seed-OSS-36B-Instruct")
    without_key = {k: v for k, v in config.items() if k != "attention_bias"}

    unbiased = architecture_from_config({**config, "attention_bias": False})

    assert architecture_from_config(without_key).params_total == 36_151_104_512
    # q (80 x 128), k and v (8 x 128 each) biases in 64 layers
    assert unbiased.params_total == 36_151_104_512 - 64 * (80 + 16) * 128


def test_exaone4_local_global_pattern_bounds_three_in_four_layers_cache():
    """EXAONE 4.0-32B's config gives sliding_window 4096 and the pattern "LLLG" (no
    layer_types): 48 of its 64 layers keep at most 4,096 tokens."""
    config = {"model_type": "exaone4", "sliding_window": 4096, "sliding_window_pattern": "LLLG"}

    assert sliding_window_of(config, 64) == (4096, 48)
    assert sliding_window_of({**config, "sliding_window_pattern": "LLXG"}, 64) == (None, 0)
