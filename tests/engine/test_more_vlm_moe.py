"""InternVL 3 / 3.5 "-hf", MiniMax-M2 and Hunyuan-A13B counted exactly.

Each expected total is transformers 5.24's num_parameters() of the class in `architectures`,
built on the meta device from the config kept in tests/engine/configs (reconstructions of the
releases, see that folder's README). InternVL's configs omit a top-level tie_word_embeddings,
which transformers 5's InternVLConfig defaults to true: built from config.json the head is tied
(7,400,774,144 and 7,905,988,608), but from_pretrained unties it because the checkpoint stores
lm_head.weight, and the published totals (7.94B, 8.53B) count it, as the engine does. With
tie_word_embeddings false written at the top level transformers builds the untied totals below.
"""

from __future__ import annotations

import pytest

from advisor.engine.architecture.registry import architecture_from_config
from advisor.engine.errors import ConfigError
from tests.engine.inputs import config

COUNTS = [
    ("OpenGVLab__InternVL3-8B-hf", "internvl", 7_944_373_760),
    ("OpenGVLab__InternVL3_5-8B-HF", "internvl", 8_528_318_464),
    ("MiniMaxAI__MiniMax-M2", "minimax_m2", 228_689_748_992),
    ("tencent__Hunyuan-A13B-Instruct", "hunyuan_v1_moe", 80_393_183_232),
]


@pytest.mark.parametrize(("name", "family", "expected"), COUNTS)
def test_counts_match_transformers(name, family, expected):
    arch = architecture_from_config(config(name))
    assert arch.family == family
    assert arch.params_total == expected
    assert arch.exact


def test_internvl_ties_its_head_only_where_config_json_says_so():
    base = config("OpenGVLab__InternVL3-8B-hf")
    tied = architecture_from_config({**base, "tie_word_embeddings": True})
    assert tied.params_total == 7_400_774_144  # transformers, built from this config.json
    untied = architecture_from_config({**base, "tie_word_embeddings": False})
    assert untied.params_total == 7_944_373_760


def test_internvl_counts_the_6b_tower_layout_as_transformers_does():
    """InternViT-6B's switches (rms_norm, q/k norm, no q/k/v bias) and a final LayerNorm
    (use_mean_pooling false) and a mask token, on a small tower: transformers 5.24 builds
    516,046,592."""
    base = config("OpenGVLab__InternVL3-8B-hf")
    vision = {
        **base["vision_config"],
        "hidden_size": 640,
        "intermediate_size": 2560,
        "num_hidden_layers": 4,
        "num_attention_heads": 5,
        "norm_type": "rms_norm",
        "use_qk_norm": True,
        "attention_bias": False,
        "use_mean_pooling": False,
        "use_mask_token": True,
    }
    text = {**base["text_config"], "num_hidden_layers": 2, "vocab_size": 1000}
    variant = {**base, "vision_config": vision, "text_config": text, "tie_word_embeddings": False}
    assert architecture_from_config(variant).params_total == 516_046_592


def test_internvl_notes_say_how_many_tokens_a_tile_adds():
    notes = " ".join(architecture_from_config(config("OpenGVLab__InternVL3-8B-hf")).notes)
    assert "256 tokens per 448 px tile" in notes


def test_minimax_m2_keeps_its_score_correction_biases_outside_the_count():
    arch = architecture_from_config(config("MiniMaxAI__MiniMax-M2"))
    assert arch.stored_extras == {"the routers' score-correction biases (buffers)": 62 * 256}
    assert arch.num_experts == 256
    assert arch.experts_per_token == 8
    assert 10.5e9 < arch.params_active < 11.5e9  # ~10B active without the embeddings


def test_hunyuan_reads_per_layer_expert_lists_and_refuses_uneven_ones():
    base = config("tencent__Hunyuan-A13B-Instruct")
    arch = architecture_from_config(base)
    assert (arch.num_experts, arch.experts_per_token, arch.shared_experts) == (64, 8, 1)
    assert 12e9 < arch.params_active < 13.5e9
    scalar = architecture_from_config({**base, "moe_topk": 8})
    assert scalar.params_total == arch.params_total
    with pytest.raises(ConfigError, match="moe_topk"):
        architecture_from_config({**base, "moe_topk": [8] * 31 + [4]})
    untied = architecture_from_config({**base, "tie_word_embeddings": False})
    assert untied.params_total == arch.params_total + 128_167 * 4096
