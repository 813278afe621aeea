"""BLIP-2 (blip-2), InstructBLIP (instructblip), Idefics2 (idefics2) and SigLIP 2 (siglip for the
fixed-resolution releases, siglip2 for NaFlex).

Every count equals transformers 5.24's for the same config, built on the meta device
(Blip2ForConditionalGeneration, InstructBlipForConditionalGeneration,
Idefics2ForConditionalGeneration, SiglipModel, Siglip2Model), except where the language model is
Flan-T5: transformers 5.24's T5Config forces tie_word_embeddings to true, so its meta-device
build holds one vocabulary table fewer than the checkpoint stores; the engine's T5 reader keeps
Flan-T5's own lm_head (as for google/flan-t5-xl), and so does the count here. The releases'
sources are in advisor/model_configs/index.json.
"""

from __future__ import annotations

import copy

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture, sliding_window_of
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload


def _config(repo: str) -> dict:
    return copy.deepcopy(find_bundled(repo).config)


def _arch(repo: str):
    return architecture_from_config(_config(repo))


def _merge(base: dict, top: dict | None = None, **subs: dict) -> dict:
    config = copy.deepcopy(base)
    config.update(top or {})
    for name, fields in subs.items():
        config[name] = {**config.get(name, {}), **fields}
    return config


# --- BLIP-2 and InstructBLIP ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "total"),
    [
        ("Salesforce/blip2-opt-2.7b", 3_744_761_856),
        ("Salesforce/blip2-opt-6.7b", 7_752_869_376),
        # transformers 5.24 builds 3,876,648,448 and 12,098,000,384 (Flan-T5's head tied)
        ("Salesforce/blip2-flan-t5-xl", 3_942_446_592),
        ("Salesforce/blip2-flan-t5-xxl", 12_229_596_672),
    ],
)
def test_each_blip2_release_counts_as_transformers_builds_it(repo, total):
    arch = _arch(repo)

    assert (arch.family, arch.params_total, arch.params_active) == ("blip-2", total, total)
    assert arch.exact


def test_blip2_opt_is_its_vision_model_q_former_and_opt():
    """blip2-opt-2.7b: EVA ViT-g 985,952,256 (39 blocks of 1,408, a 3 x 1,408 qkv bias), the
    Q-Former 105,137,664 (12 layers, cross-attention in 6), 32 x 768 query tokens, the
    language projection 768 x 2,560 + bias and OPT-2.7B 2,651,678,720 with its head tied."""
    arch = _arch("Salesforce/blip2-opt-2.7b")
    opt = 2_651_678_720

    assert arch.params_total - opt == 985_952_256 + 105_137_664 + 32 * 768 + 768 * 2560 + 2560
    assert arch.tied_embeddings
    assert arch.params_lm_head == 0
    assert not arch.is_encoder_decoder
    assert "an image adds 32 tokens (the Q-Former's query tokens)" in arch.notes[-1]


def test_blip2_flan_t5_puts_the_query_tokens_in_the_encoder():
    """blip2-flan-t5-xl: Flan-T5-XL's 24 encoder and 24 decoder layers; the 32 query tokens
    join the encoder's input, and the decoder caches 32 heads x 64 per layer and token."""
    arch = _arch("Salesforce/blip2-flan-t5-xl")
    shape = shape_from_architecture(arch)

    assert arch.is_encoder_decoder
    assert (arch.encoder_layers, arch.num_layers) == (24, 24)
    assert arch.params_lm_head == 32_128 * 2048
    assert "language model's encoder's input" in arch.notes[-1]
    assert shape.num_kv_heads * shape.head_dim == 32 * 64


def test_blip2_keeps_opt_s_kv_cache_and_lora_targets():
    """OPT-2.7B caches K and V of 2,560 per layer and token (32 layers, bf16); LoRA's
    q_proj/v_proj are the language model's, the vision model and Q-Former being outside."""
    shape = shape_from_architecture(_arch("Salesforce/blip2-opt-2.7b"))
    per_token = 32 * 2560 * 2 * 2

    short = kv_cache_bytes(shape, workload(seq_len=512, new_tokens=0))
    long = kv_cache_bytes(shape, workload(seq_len=1024, new_tokens=0))

    assert long - short == 512 * per_token
    names = {lin.name for lin in shape.linears}
    assert {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"} <= names
    assert all(lin.in_features == 2560 or lin.out_features == 2560 for lin in shape.linears)


@pytest.mark.parametrize(
    ("change", "total"),
    [
        ({"vision_config": {"qkv_bias": False}}, 3_744_597_120),
        ({"qformer_config": {"cross_attention_frequency": 3, "num_hidden_layers": 5}},
         3_681_758_976),
        ({"qformer_config": {"use_qformer_text_input": True}}, 3_801_449_472),
        ({"top": {"num_query_tokens": 17}}, 3_744_750_336),
        ({"text_config": {"word_embed_proj_dim": 512, "tie_word_embeddings": False}},
         3_670_116_352),
    ],
)  # fmt: skip
def test_blip2_flag_variants_count_as_transformers_builds_them(change, total):
    change = dict(change)
    config = _merge(_config("Salesforce/blip2-opt-2.7b"), change.pop("top", None), **change)

    assert architecture_from_config(config).params_total == total


def _instructblip(text: dict) -> dict:
    base = _config("Salesforce/blip2-opt-2.7b")
    return {
        **base,
        "model_type": "instructblip",
        "architectures": ["InstructBlipForConditionalGeneration"],
        # the [DEC] token the authors add: 30,522 + 1 (convert_instructblip_original_to_pytorch)
        "qformer_config": {"model_type": "instructblip_qformer", "vocab_size": 30523},
        "vision_config": {"model_type": "instructblip_vision_model"},
        "text_config": text,
    }


def test_instructblip_counts_as_transformers_builds_it():
    """InstructBLIP's Q-Former adds word, position and LayerNorm embeddings for the instruction
    and a text feed-forward in every layer: 80,522,496 more than BLIP-2's on OPT-2.7B. Vicuna-7B
    (Llama, vocabulary 32,001, untied) and Flan-T5-XL (its head kept, as above) as released."""
    opt = _instructblip(_config("Salesforce/blip2-opt-2.7b")["text_config"])
    vicuna = _instructblip(
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "max_position_embeddings": 2048,
            "vocab_size": 32001,
            "tie_word_embeddings": False,
        }
    )
    t5 = _instructblip(_config("Salesforce/blip2-flan-t5-xl")["text_config"])

    counted = [architecture_from_config(c) for c in (opt, vicuna, t5)]

    assert [a.params_total for a in counted] == [3_825_284_352, 7_913_210_624, 4_022_969_088]
    assert {a.family for a in counted} == {"instructblip"}
    assert counted[0].params_total - 3_744_761_856 == 80_522_496
    assert not counted[1].tied_embeddings


def test_blip2_with_a_language_model_it_cannot_count_is_refused():
    config = _merge(_config("Salesforce/blip2-opt-2.7b"), text_config={"model_type": "bart"})

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert raised.value.field == "text_config"


def test_a_blip2_q_former_that_is_not_an_object_is_refused():
    config = {**_config("Salesforce/blip2-opt-2.7b"), "qformer_config": [768]}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert raised.value.field == "qformer_config"


def test_a_blip2_inference_request_holds_its_16_bit_weights():
    config = _config("Salesforce/blip2-opt-6.7b")
    result = estimate(
        EstimateRequest(
            model_id="Salesforce/blip2-opt-6.7b", config=config, task="inference", tokens=10**6
        ),
        default_catalog(),
    )

    assert result.params_total == 7_752_869_376
    assert result.recommendation is not None
    assert result.recommendation.fits
    assert result.recommendation.memory.weights == pytest.approx(2 * 7_752_869_376, rel=0.01)


# --- Idefics2 ---------------------------------------------------------------------------------


def test_idefics2_8b_counts_as_transformers_builds_it():
    """SigLIP-So400m at 980 px (70 x 70 positions), the connector and Mistral-7B with its own
    head (vocabulary 32,003); an image is 64 latents, five times that when split."""
    arch = _arch("HuggingFaceM4/idefics2-8b")

    assert (arch.family, arch.params_total, arch.params_active) == (
        "idefics2",
        8_402_768_112,
        8_402_768_112,
    )
    assert not arch.tied_embeddings
    assert arch.params_lm_head == 32_003 * 4096
    assert "an image adds 64 tokens (the perceiver's latents), 320 where" in arch.notes[-1]


def test_idefics2_caches_mistral_s_grouped_kv_within_its_window():
    """Mistral-7B: 8 K/V heads of 128 per layer, 32 layers, within a 4,096-token window."""
    config = _config("HuggingFaceM4/idefics2-8b")
    shape = shape_from_architecture(architecture_from_config(config))

    assert (shape.num_kv_heads, shape.head_dim, shape.num_layers) == (8, 128, 32)
    assert sliding_window_of(config, 32) == (4096, 32)


@pytest.mark.parametrize(
    ("top", "text", "perceiver", "total"),
    [
        ({}, {}, {"resampler_n_latents": 10, "resampler_depth": 2, "resampler_n_heads": 6,
                  "resampler_head_dim": 40, "num_key_value_heads": 3}, 433_054_960),
        ({"tie_word_embeddings": True}, {}, {}, 440_878_832),
        # the text_config's own flag is not read: Idefics2Config's governs the head
        ({"tie_word_embeddings": None}, {"tie_word_embeddings": True}, {}, 441_390_832),
    ],
)  # fmt: skip
def test_idefics2_variants_count_as_transformers_builds_them(top, text, perceiver, total):
    small = {
        "hidden_size": 512,
        "intermediate_size": 1000,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    config = _merge(
        _config("HuggingFaceM4/idefics2-8b"),
        top,
        text_config={**small, **text},
        perceiver_config=perceiver,
    )

    assert architecture_from_config(config).params_total == total


def test_idefics2_perceiver_heads_must_group():
    config = _merge(
        _config("HuggingFaceM4/idefics2-8b"), perceiver_config={"num_key_value_heads": 5}
    )

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert raised.value.field == "perceiver_config"


def test_an_idefics2_lora_request_holds_its_bf16_weights_and_adapters():
    config = _config("HuggingFaceM4/idefics2-8b")
    result = estimate(
        EstimateRequest(
            model_id="HuggingFaceM4/idefics2-8b",
            config=config,
            task="lora",
            seq_len=2048,
            tokens=10**7,
        ),
        default_catalog(),
    )

    assert result.params_total == 8_402_768_112
    assert result.recommendation is not None
    assert result.recommendation.fits
    weights = result.recommendation.memory.weights
    assert 2 * 8_402_768_112 < weights < 1.03 * 2 * 8_402_768_112  # and the adapters


# --- SigLIP 2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "total", "active", "pair"),
    [
        ("google/siglip2-base-patch16-224", 375_187_970, 287_796_858, 196 + 64),
        ("google/siglip2-so400m-patch14-384", 1_136_008_498, 722_033_935, 729 + 64),
        ("google/siglip2-giant-opt-patch16-256", 1_871_393_906, 1_308_246_960, 256 + 64),
        ("google/siglip2-giant-opt-patch16-384", 1_871_885_426, 1_383_691_992, 576 + 64),
    ],
)
def test_each_fixed_resolution_siglip2_release_is_a_siglip_model(repo, total, active, pair):
    """The fixed-resolution SigLIP 2 checkpoints are SiglipModel (model_type siglip) with
    Gemma's 256,000-token vocabulary; their totals equal MTEB's published n_parameters."""
    arch = _arch(repo)

    assert (arch.family, arch.params_total, arch.params_active) == ("siglip", total, active)
    assert arch.max_position_embeddings == pair
    assert arch.vocab_size == 0


@pytest.mark.parametrize(
    ("vision", "total", "pair"),
    [
        ({}, 203_202_050, 256 + 64),  # Siglip2Config's defaults: base, patch 16, 256 patches
        ({"vision_use_head": False, "num_patches": 300}, 196_148_738, 300 + 64),
    ],
)
def test_siglip2_naflex_counts_as_transformers_builds_it(vision, total, pair):
    """Siglip2Model: a Linear patch embedding and a num_patches-row position table."""
    config = {"model_type": "siglip2", "architectures": ["Siglip2Model"]}
    if vision:
        config["vision_config"] = vision

    arch = architecture_from_config(config)

    assert (arch.family, arch.params_total) == ("siglip2", total)
    assert arch.max_position_embeddings == pair


def test_a_siglip2_embedding_request_keeps_no_kv_cache():
    config = _config("google/siglip2-so400m-patch14-384")
    result = estimate(
        EstimateRequest(
            model_id="google/siglip2-so400m-patch14-384",
            config=config,
            task="inference",
            tokens=10**7,
        ),
        default_catalog(),
    )

    assert result.recommendation is not None
    memory = result.recommendation.memory
    assert memory.kv_cache == 0
    assert memory.weights == pytest.approx(2 * 1_136_008_498, rel=0.01)
