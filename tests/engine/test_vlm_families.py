"""LLaVA 1.5, LLaVA-NeXT, LLaVA-OneVision, PaliGemma 2 and SmolVLM (Idefics3) counted exactly:
each expected total is transformers 5.24's num_parameters() of the class in `architectures`,
built on the meta device from the config kept in tests/engine/configs. llava-1.5-7b's config is
the released one and its total the published 7,063,427,072; the others are reconstructions of
their releases (each file's `_source` says from what), so they check the counter against
transformers, not a published figure."""

from __future__ import annotations

import pytest

from advisor.engine.architecture.registry import architecture_from_config
from tests.engine.inputs import config

COUNTS = [
    ("llava-hf__llava-1.5-7b-hf", "llava", 7_063_427_072),
    ("llava-hf__llava-1.5-13b-hf", "llava", 13_351_494_656),
    ("llava-hf__llava-v1.6-mistral-7b-hf", "llava_next", 7_566_747_648),
    ("llava-hf__llava-onevision-qwen2-7b-ov-hf", "llava_onevision", 8_030_807_584),
    ("google__paligemma2-3b-pt-224", "paligemma", 3_032_242_416),
    ("HuggingFaceTB__SmolVLM-256M-Instruct", "idefics3", 256_484_928),
]


@pytest.mark.parametrize(("name", "family", "expected"), COUNTS)
def test_vision_language_model_counts_match_transformers(name, family, expected):
    arch = architecture_from_config(config(name))
    assert arch.family == family
    assert arch.params_total == expected
    assert arch.exact


def test_llava_projector_flags_change_the_count_as_transformers_does():
    base = config("llava-hf__llava-1.5-7b-hf")
    variant = {**base, "multimodal_projector_bias": False, "vision_feature_layer": [-2, -5]}
    assert architecture_from_config(variant).params_total == 7_067_613_184
    assert architecture_from_config({**base, "tie_word_embeddings": True}).params_total == (
        6_932_092_928
    )


def test_smolvlm_scale_factor_sets_the_connector_width():
    variant = {**config("HuggingFaceTB__SmolVLM-256M-Instruct"), "scale_factor": 2}
    variant["tie_word_embeddings"] = True
    assert architecture_from_config(variant).params_total == 222_791_232


def test_notes_say_how_many_tokens_an_image_adds():
    notes = " ".join(architecture_from_config(config("llava-hf__llava-1.5-7b-hf")).notes)
    assert "576 tokens" in notes
    notes = " ".join(architecture_from_config(config("google__paligemma2-3b-pt-224")).notes)
    assert "256 tokens" in notes
    notes = " ".join(architecture_from_config(config("HuggingFaceTB__SmolVLM-256M-Instruct")).notes)
    assert "64 tokens per 512 px tile" in notes
