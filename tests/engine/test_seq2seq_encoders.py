"""Marian (OPUS-MT), M2M-100 / NLLB-200 and Pegasus encoder-decoders, and the MPNet, CamemBERT
and Longformer encoders, are counted exactly: each release's config.json (bundled in
advisor/model_configs, whose index says where each came from) and variants of every flag the
readers read give the number of parameters transformers 5.24 builds (num_parameters() of the
class on the meta device). ALBERT is refused with the reason."""

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

# repo_id -> (family, transformers' count)
RELEASES = {
    "Helsinki-NLP/opus-mt-en-de": ("marian", 74_410_496),
    "Helsinki-NLP/opus-mt-en-fr": ("marian", 75_133_952),
    "facebook/nllb-200-distilled-600M": ("m2m_100", 615_073_792),
    "facebook/nllb-200-distilled-1.3B": ("m2m_100", 1_370_638_336),
    "facebook/nllb-200-1.3B": ("m2m_100", 1_370_638_336),
    "facebook/nllb-200-3.3B": ("m2m_100", 3_344_863_232),
    "facebook/m2m100_418M": ("m2m_100", 483_905_536),
    "facebook/m2m100_1.2B": ("m2m_100", 1_239_470_080),
    "google/pegasus-large": ("pegasus", 570_797_056),
    "google/pegasus-xsum": ("pegasus", 569_748_480),
    "microsoft/mpnet-base": ("mpnet", 109_518_527),
    "sentence-transformers/all-mpnet-base-v2": ("mpnet", 109_486_464),
    "almanach/camembert-base": ("roberta", 110_655_493),
    "almanach/camembert-large": ("roberta", 336_695_557),
    "allenai/longformer-base-4096": ("longformer", 148_659_456),
}


def bundled(repo_id: str) -> dict:
    return find_bundled(repo_id).config


def marian(vocab: int, **fields) -> dict:
    """An OPUS-MT config.json (Helsinki-NLP/opus-mt-*: 512 wide, 6 + 6 layers)."""
    return {
        **bundled("Helsinki-NLP/opus-mt-en-de"),
        "vocab_size": vocab,
        "decoder_vocab_size": vocab,
        "pad_token_id": vocab - 1,
        "decoder_start_token_id": vocab - 1,
        **fields,
    }


# Releases not bundled (no published count found), as their Hub configs give them.
UNBUNDLED = [
    # opus-mt-mul-en: vocabulary 64172 (decoder_vocab_size and pad 64171 in a fine-tune's
    # config.json that keeps the base model's fields, found with the 'docs' search corpus).
    (marian(64172), "marian", 77_518_848),
    # opus-mt-tc-big-fr-en: candle's marian.rs copies its config.json: 1024 wide, 16 heads,
    # ffn 4096, 1024 positions, vocabulary 53017.
    (
        marian(
            53017,
            d_model=1024,
            encoder_attention_heads=16,
            decoder_attention_heads=16,
            encoder_ffn_dim=4096,
            decoder_ffn_dim=4096,
            max_position_embeddings=1024,
            activation_function="relu",
        ),
        "marian",
        232_743_936,
    ),
    # longformer-large-4096: longformer-base's fields at RoBERTa-large's shape.
    (
        {
            **bundled("allenai/longformer-base-4096"),
            "attention_window": [512] * 24,
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
        },
        "longformer",
        434_600_960,
    ),
]

# (release, changed fields, transformers' count)
VARIANTS = [
    ("Helsinki-NLP/opus-mt-en-de", {"architectures": ["MarianModel"]}, 74_410_496),
    # Separate vocabularies: the encoder reads vocab_size, the decoder (and the tied head)
    # decoder_vocab_size.
    (
        "Helsinki-NLP/opus-mt-en-de",
        {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 40000, "pad_token_id": 0},
        94_890_496,
    ),
    (
        "Helsinki-NLP/opus-mt-en-de",
        {
            "share_encoder_decoder_embeddings": False,
            "decoder_vocab_size": 40000,
            "pad_token_id": 0,
            "tie_word_embeddings": False,
        },
        115_370_496,
    ),
    # Untied, transformers 5 ties nothing: shared, both stacks' tables and the head.
    ("Helsinki-NLP/opus-mt-en-de", {"tie_word_embeddings": False}, 163_653_632),
    (
        "Helsinki-NLP/opus-mt-en-de",
        {"architectures": ["MarianModel"], "tie_word_embeddings": False},
        133_905_920,
    ),
    (
        "Helsinki-NLP/opus-mt-en-de",
        {
            "encoder_layers": 12,
            "decoder_layers": 3,
            "encoder_ffn_dim": 3000,
            "decoder_ffn_dim": 1000,
            "encoder_attention_heads": 4,
            "max_position_embeddings": 300,
        },
        88_982_616,
    ),
    ("facebook/nllb-200-distilled-600M", {"architectures": ["M2M100Model"]}, 615_073_792),
    ("facebook/nllb-200-distilled-600M", {"tie_word_embeddings": False}, 1_402_138_624),
    (
        "facebook/nllb-200-distilled-600M",
        {
            "encoder_layers": 6,
            "num_hidden_layers": 6,
            "decoder_ffn_dim": 2048,
            "max_position_embeddings": 4096,
        },
        489_140_224,
    ),
    ("google/pegasus-large", {"architectures": ["PegasusModel"]}, 570_797_056),
    (
        "google/pegasus-large",
        {"architectures": ["PegasusModel"], "tie_word_embeddings": False},
        767_616_000,
    ),
    (
        "google/pegasus-large",
        {"tie_word_embeddings": False, "decoder_layers": 4, "max_position_embeddings": 2048},
        666_562_560,
    ),
    ("microsoft/mpnet-base", {"architectures": ["MPNetForSequenceClassification"]}, 109_488_002),
    (
        "microsoft/mpnet-base",
        {"architectures": ["MPNetForTokenClassification"], "num_labels": 5},
        108_899_717,
    ),
    ("microsoft/mpnet-base", {"architectures": ["MPNetForQuestionAnswering"]}, 108_897_410),
    (
        "microsoft/mpnet-base",
        {
            "relative_attention_num_buckets": 64,
            "max_position_embeddings": 1026,
            "num_attention_heads": 8,
        },
        109_911_871,
    ),
    (
        "almanach/camembert-base",
        {"architectures": ["CamembertForSequenceClassification"], "num_labels": 3},
        110_624_259,
    ),
    ("almanach/camembert-base", {"architectures": ["CamembertModel"]}, 110_621_952),
    ("allenai/longformer-base-4096", {"architectures": ["LongformerForMaskedLM"]}, 148_711_257),
    (
        "allenai/longformer-base-4096",
        {"architectures": ["LongformerForSequenceClassification"]},
        148_660_994,
    ),
    (
        "allenai/longformer-base-4096",
        {"architectures": ["LongformerForTokenClassification"], "num_labels": 7},
        148_074_247,
    ),
    (
        "allenai/longformer-base-4096",
        {"attention_window": 256, "type_vocab_size": 2, "max_position_embeddings": 16386},
        158_097_408,
    ),
]


@pytest.mark.parametrize(("repo_id", "expected"), RELEASES.items(), ids=list(RELEASES))
def test_each_release_counts_as_transformers_builds_it(repo_id, expected):
    family, total = expected
    arch = architecture_from_config(bundled(repo_id))
    assert arch.exact
    assert (arch.family, arch.params_total, arch.params_active) == (family, total, total)


@pytest.mark.parametrize(("config", "family", "total"), UNBUNDLED)
def test_releases_without_a_bundled_config(config, family, total):
    arch = architecture_from_config(config)
    assert (arch.family, arch.params_total) == (family, total)


@pytest.mark.parametrize(
    ("repo_id", "changes", "expected"),
    VARIANTS,
    ids=[f"{repo}-{i}" for i, (repo, _, _) in enumerate(VARIANTS)],
)
def test_flag_variants_count_as_transformers_builds_them(repo_id, changes, expected):
    arch = architecture_from_config({**bundled(repo_id), **changes})
    assert arch.exact
    assert arch.params_total == expected


def test_marian_is_an_encoder_decoder_with_a_shared_tied_vocabulary():
    arch = architecture_from_config(bundled("Helsinki-NLP/opus-mt-en-de"))
    assert arch.is_encoder_decoder
    assert (arch.encoder_layers, arch.num_layers) == (6, 6)
    # Six encoder blocks of 3,152,384 parameters (q/k/v/out and fc1/fc2 with biases, two
    # LayerNorms); no final LayerNorm. One 58,101 x 512 table plus the two frozen sinusoidal
    # tables; the head is tied.
    assert arch.params_encoder == 6 * 3_152_384
    assert arch.params_embedding == 58_101 * 512 + 2 * 512 * 512
    assert arch.params_lm_head == 0
    assert arch.max_position_embeddings == 512
    # KV cache per token and decoder layer: keys and values of 8 heads x 64.
    shape = shape_from_architecture(arch)
    assert shape.kv_dim == 512
    names = {lin.name for lin in arch.layer_linears}
    assert {"self_attn.q_proj", "self_attn.v_proj", "encoder_attn.k_proj", "fc1"} <= names
    assert {lin.role for lin in arch.layer_linears} >= {"cross_attn_k", "cross_attn_v"}


def test_nllb_positions_are_a_buffer_and_its_stacks_end_in_a_layernorm():
    arch = architecture_from_config(bundled("facebook/nllb-200-distilled-600M"))
    assert arch.params_embedding == 256_206 * 1024  # no position parameters
    # 12 pre-norm encoder blocks of 12,596,224 and the encoder's final LayerNorm.
    assert arch.params_encoder == 12 * 12_596_224 + 2 * 1024
    assert arch.max_position_embeddings == 1024


def test_mpnet_counts_its_relative_bias_once_and_names_its_projections_q_k_v_o():
    arch = architecture_from_config(bundled("sentence-transformers/all-mpnet-base-v2"))
    assert arch.family in ENCODER_ONLY_FAMILIES
    assert [lin.name for lin in arch.layer_linears][:4] == ["q", "k", "v", "o"]
    assert arch.max_position_embeddings == 512  # 514 rows from padding_idx + 1
    without_bias = architecture_from_config(
        {**bundled("sentence-transformers/all-mpnet-base-v2"), "relative_attention_num_buckets": 1}
    )
    assert arch.params_total - without_bias.params_total == 31 * 12


def test_camembert_is_counted_as_the_roberta_it_is():
    camembert = bundled("almanach/camembert-base")
    as_roberta = {**camembert, "model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}
    assert (
        architecture_from_config(camembert).params_total
        == architecture_from_config(as_roberta).params_total
    )


def test_longformer_attends_within_its_window():
    arch = architecture_from_config(bundled("allenai/longformer-base-4096"))
    assert arch.family in ENCODER_ONLY_FAMILIES
    assert arch.max_position_embeddings == 4096
    (group,) = arch.attention_groups
    assert (group.layers, group.window, group.query_width) == (12, 256, 768)
    # The global projections are linears of every block (PEFT can adapt them).
    assert {"query_global", "key_global", "value_global"} <= {
        lin.name for lin in arch.layer_linears
    }
    shape = shape_from_architecture(arch)
    # At 4,096 tokens a token reads about 512 keys (2 x 256 - 256^2 / 4,096 = 496), not 4,096.
    assert shape.attention_reads(4096) == 12 * 768 * 496
    per_layer = {
        **bundled("allenai/longformer-base-4096"),
        "attention_window": [256] * 6 + [512] * 6,
    }
    windows = {g.window: g.layers for g in architecture_from_config(per_layer).attention_groups}
    assert windows == {128: 6, 256: 6}


@pytest.mark.parametrize("window", [511, 0, [512] * 11, "512"])
def test_a_malformed_attention_window_is_refused_by_name(window):
    with pytest.raises(ConfigError) as refused:
        architecture_from_config(
            {**bundled("allenai/longformer-base-4096"), "attention_window": window}
        )
    assert refused.value.field == "attention_window"


def test_albert_is_refused_with_the_reason():
    with pytest.raises(ConfigError) as refused:
        architecture_from_config(
            {"model_type": "albert", "architectures": ["AlbertForMaskedLM"], "hidden_size": 768}
        )
    assert "shares 1 block of weights across its 12 layers" in refused.value.message
    assert refused.value.field == "model_type"


def test_an_unknown_head_is_refused_rather_than_counted_as_the_generator():
    with pytest.raises(ConfigError):
        architecture_from_config(
            {**bundled("facebook/m2m100_418M"), "architectures": ["M2M100ForSomethingNew"]}
        )


@pytest.mark.parametrize(
    ("repo_id", "fields"),
    [
        ("Helsinki-NLP/opus-mt-en-de", {"seq_len": 256, "new_tokens": 128}),
        ("facebook/nllb-200-distilled-600M", {"seq_len": 512, "new_tokens": 256}),
        ("google/pegasus-xsum", {"seq_len": 512, "new_tokens": 64}),
        ("microsoft/mpnet-base", {"seq_len": 512}),
        ("allenai/longformer-base-4096", {"seq_len": 4096}),
    ],
)
def test_bf16_inference_holds_two_bytes_per_parameter(repo_id, fields):
    config = bundled(repo_id)
    result = estimate(
        EstimateRequest(config=config, task="inference", tokens=10**6, precision="bf16", **fields),
        default_catalog(),
    )
    params = architecture_from_config(config).params_total
    assert result.memory.weights == pytest.approx(2 * params, rel=0.01)


def test_training_a_translation_model_sizes_the_decoder_at_the_target_length():
    config = bundled("facebook/nllb-200-distilled-600M")
    fields = {"task": "lora", "seq_len": 512, "micro_batch": 8, "tokens": 10**7}
    long_target = estimate(EstimateRequest(config=config, **fields), default_catalog())
    short_target = estimate(
        EstimateRequest(config=config, new_tokens=64, **fields), default_catalog()
    )
    assert short_target.memory.activations < 0.8 * long_target.memory.activations
