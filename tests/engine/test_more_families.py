"""ModernBERT, DeBERTa-v3, ESM-2, DINOv2 and ELECTRA are counted exactly: each release's
config.json (tests/engine/configs, whose README says how faithful each copy is) and some of its
heads and flags give the number of parameters transformers 5.24 builds (num_parameters() of the
class on the meta device)."""

import pytest

from advisor.engine.architecture import architecture_from_config
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES
from tests.engine.inputs import config

# config.json as released (architectures[0], or the bare model where it names none).
RELEASES = {
    "answerdotai__ModernBERT-base": 149_655_232,
    "answerdotai__ModernBERT-large": 395_881_664,
    "microsoft__deberta-v3-xsmall": 70_682_112,
    "microsoft__deberta-v3-base": 183_831_552,
    "microsoft__deberta-v3-large": 434_012_160,
    "microsoft__mdeberta-v3-base": 278_218_752,
    "facebook__esm2_t6_8M_UR50D": 7_512_474,
    "facebook__esm2_t12_35M_UR50D": 33_501_394,
    "facebook__esm2_t30_150M_UR50D": 148_140_154,
    "facebook__esm2_t33_650M_UR50D": 651_043_254,
    "facebook__esm2_t36_3B_UR50D": 2_839_005_634,
    "facebook__dinov2-small": 22_056_576,
    "facebook__dinov2-base": 86_580_480,
    "facebook__dinov2-large": 304_368_640,
    "facebook__dinov2-giant": 1_136_480_768,
    "google__electra-base-discriminator": 109_483_009,
    "google__electra-large-discriminator": 335_142_913,
}

# (config, changed fields, transformers' count)
VARIANTS = [
    ("answerdotai__ModernBERT-base", {"architectures": ["ModernBertModel"]}, 149_014_272),
    (
        "answerdotai__ModernBERT-base",
        {"architectures": ["ModernBertForSequenceClassification"]},
        149_606_402,
    ),
    (
        "answerdotai__ModernBERT-base",
        {"norm_bias": True, "attention_bias": True, "mlp_bias": True, "classifier_bias": True},
        149_826_496,
    ),
    (
        "answerdotai__ModernBERT-base",
        {"decoder_bias": False, "tie_word_embeddings": False},
        188_287_488,
    ),
    ("microsoft__deberta-v3-base", {"architectures": ["DebertaV2ForMaskedLM"]}, 184_551_780),
    (
        "microsoft__deberta-v3-base",
        {"architectures": ["DebertaV2ForSequenceClassification"]},
        184_423_682,
    ),
    ("microsoft__deberta-v3-base", {"share_att_key": False}, 198_005_760),
    (
        "microsoft__deberta-v3-base",
        {"position_biased_input": True, "type_vocab_size": 2, "embedding_size": 512},
        151_694_336,
    ),
    (
        "microsoft__deberta-v3-base",
        {"conv_kernel_size": 3, "position_buckets": -1, "norm_rel_ebd": "none"},
        185_995_008,
    ),
    ("microsoft__deberta-v3-base", {"relative_attention": False}, 183_438_336),
    ("facebook__esm2_t6_8M_UR50D", {"architectures": ["EsmModel"]}, 7_511_801),
    (
        "facebook__esm2_t6_8M_UR50D",
        {"architectures": ["EsmForSequenceClassification"]},
        7_512_443,
    ),
    (
        "facebook__esm2_t6_8M_UR50D",
        {"position_embedding_type": "absolute", "emb_layer_norm_before": True},
        7_841_434,
    ),
    (
        "facebook__dinov2-small",
        {"architectures": ["Dinov2ForImageClassification"]},
        22_058_114,
    ),
    ("facebook__dinov2-base", {"use_swiglu_ffn": True}, 86_592_768),
    (
        "facebook__dinov2-base",
        {"image_size": 224, "qkv_bias": False, "use_mask_token": False},
        85_697_280,
    ),
    (
        "google__electra-base-discriminator",
        {"architectures": ["ElectraForMaskedLM"], "embedding_size": 128},
        89_255_610,
    ),
    (
        "google__electra-base-discriminator",
        {"architectures": ["ElectraForSequenceClassification"]},
        109_483_778,
    ),
]


@pytest.mark.parametrize(
    ("name", "changes", "expected"),
    [(name, {}, n) for name, n in RELEASES.items()] + VARIANTS,
    ids=[*RELEASES, *(f"{name}-{i}" for i, (name, _, _) in enumerate(VARIANTS))],
)
def test_counts_as_transformers_builds(name, changes, expected):
    arch = architecture_from_config({**config(name), **changes})
    assert arch.exact
    assert arch.params_total == expected
    assert arch.family in ENCODER_ONLY_FAMILIES


def test_an_unknown_head_is_the_bare_model_and_not_exact():
    arch = architecture_from_config(
        {**config("facebook__esm2_t6_8M_UR50D"), "architectures": ["EsmForSomethingNew"]}
    )
    assert not arch.exact
    assert arch.params_total == 7_511_801


def test_esmfold_is_refused():
    from advisor.engine.errors import ConfigError

    with pytest.raises(ConfigError, match="ESMFold"):
        architecture_from_config(
            {**config("facebook__esm2_t6_8M_UR50D"), "architectures": ["EsmForProteinFolding"]}
        )


def test_the_electra_discriminator_scores_no_vocabulary():
    from advisor.engine.memory_terms import masked_lm_head
    from advisor.engine.shape import shape_from_architecture

    def head(name, changes=None):
        raw = {**config(name), **(changes or {})}
        return masked_lm_head(shape_from_architecture(architecture_from_config(raw)))

    assert not head("google__electra-base-discriminator")
    assert head("google__electra-base-discriminator", {"architectures": ["ElectraForMaskedLM"]})
    assert head("answerdotai__ModernBERT-base")
    assert not head("microsoft__deberta-v3-base")
