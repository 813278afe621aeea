"""DeepSeek-V3.2 (deepseek_v32), Ministral 3 (mistral3 with a ministral3 language model, and
Ministral3ForCausalLM), GLM-4.1V / GLM-4.5V / GLM-4.6V-Flash (glm4v, glm4v_moe, glm46v) and
Qwen2-Audio (qwen2_audio) are counted exactly: each bundled release's config.json
(advisor/model_configs/index.json says where each came from and which published figure it meets)
and made-up variants of every flag the readers read count to the number of parameters
transformers 5.24 builds (num_parameters() of the class architectures[0] names, on the meta
device, tied weights once)."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload


def _config(repo: str) -> dict:
    return find_bundled(repo).config


@pytest.mark.parametrize(
    ("repo", "family", "total", "active"),
    [
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32", 671_877_929_216, 38_403_807_488),
        ("deepseek-ai/DeepSeek-V3.2", "deepseek_v32", 671_877_929_216, 38_403_807_488),
        ("mistralai/Ministral-3-3B-Base-2512", "mistral3", 3_849_090_048, None),
        ("mistralai/Ministral-3-8B-Base-2512", "mistral3", 8_918_026_240, None),
        ("mistralai/Ministral-3-14B-Base-2512", "mistral3", 13_945_031_680, None),
        ("zai-org/GLM-4.1V-9B-Thinking", "glm4v", 10_292_777_472, None),
        ("zai-org/GLM-4.5V", "glm4v_moe", 107_710_927_360, 14_282_805_760),
        ("Qwen/Qwen2-Audio-7B", "qwen2_audio", 8_397_094_912, None),
        ("Qwen/Qwen2-Audio-7B-Instruct", "qwen2_audio", 8_397_094_912, None),
    ],
)
def test_each_release_counts_as_transformers_builds_it(repo, family, total, active):
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active or total)
    assert arch.exact


# --- DeepSeek-V3.2: DeepSeek Sparse Attention ---------------------------------------------------

_V32_SMALL = {
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 96,
    "num_hidden_layers": 5,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "n_shared_experts": 1,
    "n_routed_experts": 16,
    "num_experts_per_tok": 4,
    "kv_lora_rank": 64,
    "q_lora_rank": 96,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 32,
    "v_head_dim": 24,
    "n_group": 4,
    "topk_group": 2,
    "index_topk": 64,
    "index_head_dim": 48,
    "index_n_heads": 6,
    "first_k_dense_replace": 2,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize(
    ("change", "total", "active"),
    [
        ({}, 6_081_024, 3_426_816),
        ({"attention_bias": True}, 6_083_184, 3_428_976),
        ({"n_shared_experts": 2}, 6_302_208, 3_648_000),
        ({"first_k_dense_replace": 0}, 7_809_536, 3_385_856),
        ({"mlp_layer_types": ["sparse", "dense", "sparse", "sparse", "sparse"]}, 6_945_280, None),
        ({"moe_layer_freq": 2}, 6_081_024, 3_426_816),  # transformers 5 does not read it
        ({"tie_word_embeddings": True}, 5_825_024, 3_170_816),
        ({"index_head_dim": 32, "index_n_heads": 3}, 5_964_384, 3_310_176),
        # No index_* fields: DeepseekV32Config's 64 heads of 128.
        ({"index_head_dim": None, "index_n_heads": None, "index_topk": None}, 10_052_384, None),
    ],
)
def test_deepseek_v32_variants_count_as_transformers_builds_them(change, total, active):
    config = {k: v for k, v in {**_V32_SMALL, **change}.items() if v is not None}

    arch = architecture_from_config(config)

    assert arch.params_total == total
    if active is not None:
        assert arch.params_active == active


def test_deepseek_v32_adds_a_lightning_indexer_to_every_attention_layer():
    arch = architecture_from_config(_config("deepseek-ai/DeepSeek-V3.2-Exp"))

    indexer = {lin.name: (lin.in_features, lin.out_features) for lin in arch.layer_linears}
    assert indexer["indexer.wq_b"] == (1536, 64 * 128)
    assert indexer["indexer.wk"] == (7168, 128)
    assert indexer["indexer.weights_proj"] == (7168, 64)
    per_layer = 1536 * 8192 + 7168 * 128 + 2 * 128 + 7168 * 64  # wq_b, wk, k_norm, weights_proj
    # DeepSeek-V3's count, less its 58 x 256 router biases (buffers in transformers 5).
    assert arch.params_total == 671_026_419_200 - 58 * 256 + 61 * per_layer
    # The experts are 3-D parameters in transformers 5: "all-linear" LoRA leaves them alone.
    assert not any(lin.module for lin in arch.layer_linears if lin.role.startswith("expert"))
    stored = sum(arch.stored_extras.values())
    assert round((arch.params_total + stored) / 1e9) == 685  # the Hub page's 685B


def test_deepseek_v32_caches_the_latent_and_the_indexer_key_and_reads_top_k_tokens():
    shape = shape_from_architecture(architecture_from_config(_config("deepseek-ai/DeepSeek-V3.2")))
    wl = workload(seq_len=32768, new_tokens=0)

    # 512 latent + 64 rotary key + 128 indexer key per token and layer, in bf16.
    assert kv_cache_bytes(shape, wl) == 61 * 704 * 32768 * 2
    assert kv_cache_bytes(shape, wl, tp=8) == kv_cache_bytes(shape, wl)  # replicated
    # MLA reads at most 2,048 tokens a query (averaging as a 2,048-token window does); the
    # indexer scores every token at 64 x 128 (a score, no value pass: half a read's cost).
    sparse = 2 * 2048 - 2048 * 2048 / 32768
    assert shape.attention_reads(32768) == 61 * (128 * 192 * sparse + 64 * 128 // 2 * 32768)
    assert shape.attention_reads(32768) < 0.3 * 61 * 128 * 192 * 32768  # dense MLA's
    # Within 2,048 tokens every token is read, as dense attention does.
    assert shape.attention_reads(2048) == 61 * (128 * 192 + 64 * 128 // 2) * 2048


def test_deepseek_v32_needs_its_query_latent():
    with pytest.raises(ConfigError, match="q_lora_rank"):
        architecture_from_config({**_V32_SMALL, "q_lora_rank": None})


def test_deepseek_v32_refuses_a_malformed_mlp_layer_types():
    with pytest.raises(ConfigError, match="mlp_layer_types"):
        architecture_from_config({**_V32_SMALL, "mlp_layer_types": ["sparse"] * 4})


# --- Ministral 3 ---------------------------------------------------------------------------------

_MINISTRAL3_TEXT = {
    "model_type": "ministral3",
    "hidden_size": 256,
    "intermediate_size": 300,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "vocab_size": 1000,
}


def _ministral3_vlm(text: dict, **outer) -> dict:
    vision = {
        "hidden_size": 64,
        "intermediate_size": 100,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "head_dim": 16,
        "patch_size": 14,
    }
    return {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "tie_word_embeddings": False,
        "text_config": text,
        "vision_config": vision,
        **outer,
    }


@pytest.mark.parametrize(
    ("config", "total"),
    [
        (_ministral3_vlm(_MINISTRAL3_TEXT), 2_592_128),
        # No head_dim: Ministral3Config's 128, not hidden // heads (64).
        (
            _ministral3_vlm({k: v for k, v in _MINISTRAL3_TEXT.items() if k != "head_dim"}),
            2_592_128,
        ),
        (
            _ministral3_vlm(
                {**_MINISTRAL3_TEXT, "tie_word_embeddings": True}, tie_word_embeddings=True
            ),
            2_336_128,
        ),
        (
            _ministral3_vlm(
                _MINISTRAL3_TEXT, multimodal_projector_bias=True, vision_feature_layer=[-1, -2]
            ),
            2_609_024,
        ),
        ({**_MINISTRAL3_TEXT, "architectures": ["Ministral3ForCausalLM"]}, 2_384_640),
        ({**_MINISTRAL3_TEXT, "sliding_window": 4096}, 2_384_640),
    ],
)
def test_ministral3_variants_count_as_transformers_builds_them(config, total):
    assert architecture_from_config(config).params_total == total


def test_ministral3_3b_ties_its_head_and_the_larger_ones_do_not():
    small = architecture_from_config(_config("mistralai/Ministral-3-3B-Base-2512"))
    large = architecture_from_config(_config("mistralai/Ministral-3-8B-Base-2512"))

    assert (small.tied_embeddings, small.params_lm_head) == (True, 0)
    assert (large.tied_embeddings, large.params_lm_head) == (False, 131072 * 4096)
    assert (large.num_kv_heads, large.head_dim, large.num_layers) == (8, 128, 34)


def test_a_ministral3_sliding_window_bounds_every_layer():
    arch = architecture_from_config({**_MINISTRAL3_TEXT, "sliding_window": 4096})

    assert [(g.layers, g.window) for g in arch.attention_groups] == [(3, 4096)]


# --- GLM-4.1V, GLM-4.5V, GLM-4.6V-Flash ----------------------------------------------------------

_GLM4V_VISION = {
    "depth": 2,
    "hidden_size": 96,
    "out_hidden_size": 256,
    "intermediate_size": 200,
    "num_heads": 4,
    "attention_bias": True,
    "image_size": 112,
    "patch_size": 16,
}
_GLM4V_TEXT = {
    "hidden_size": 256,
    "intermediate_size": 300,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "head_dim": 48,  # Glm4vTextAttention ignores it: hidden // heads
}
_GLM4V_MOE_TEXT = {
    "hidden_size": 256,
    "intermediate_size": 300,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 40,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 2,
    "first_k_dense_replace": 2,
    "attention_bias": True,
    "vocab_size": 1000,
}


def _glm4v(family: str, text: dict, **outer) -> dict:
    names = {
        "glm4v": "Glm4vForConditionalGeneration",
        "glm46v": "Glm46VForConditionalGeneration",
        "glm4v_moe": "Glm4vMoeForConditionalGeneration",
    }
    return {
        "architectures": [names[family]],
        "model_type": family,
        "text_config": text,
        "vision_config": {**_GLM4V_VISION, "attention_bias": family != "glm4v_moe"},
        **outer,
    }


@pytest.mark.parametrize(
    ("config", "total", "active"),
    [
        (_glm4v("glm4v", _GLM4V_TEXT), 2_490_688, None),
        (_glm4v("glm4v", _GLM4V_TEXT, tie_word_embeddings=True), 2_234_688, None),
        (_glm4v("glm4v", {**_GLM4V_TEXT, "tie_word_embeddings": True}), 2_234_688, None),
        (_glm4v("glm46v", _GLM4V_TEXT), 2_490_688, None),
        (_glm4v("glm4v_moe", _GLM4V_MOE_TEXT), 3_147_264, 2_557_440),
        (
            # attention_bias off, first_k_dense_replace (1) and head_dim (hidden // heads) absent
            _glm4v(
                "glm4v_moe",
                {
                    k: v
                    for k, v in {**_GLM4V_MOE_TEXT, "attention_bias": False}.items()
                    if k not in ("first_k_dense_replace", "head_dim")
                },
            ),
            3_704_064,
            2_819_328,
        ),
    ],
)
def test_glm4v_variants_count_as_transformers_builds_them(config, total, active):
    arch = architecture_from_config(config)

    assert arch.params_total == total
    assert arch.params_active == (active or total)


def test_glm45v_is_glm45_air_with_a_vision_tower_and_no_multi_token_prediction_layer():
    v = architecture_from_config(_config("zai-org/GLM-4.5V"))
    air = architecture_from_config(_config("zai-org/GLM-4.5-Air"))

    assert (v.num_experts, v.experts_per_token, v.shared_experts) == (128, 8, 1)
    assert (v.num_kv_heads, v.head_dim) == (8, 128)
    assert 0.8e9 < v.params_total - air.params_total < 0.9e9  # the vision tower and merger
    assert v.stored_extras == {"the routers' score-correction biases (buffers)": 45 * 128}


def test_a_glm4v_merger_that_does_not_meet_the_language_model_is_refused():
    config = _glm4v("glm4v", _GLM4V_TEXT)
    config["vision_config"]["out_hidden_size"] = 128

    with pytest.raises(ConfigError, match="out_hidden_size"):
        architecture_from_config(config)


# --- Qwen2-Audio ------------------------------------------------------------------------------


def _qwen2_audio(**text) -> dict:
    return {
        "architectures": ["Qwen2AudioForConditionalGeneration"],
        "model_type": "qwen2_audio",
        "audio_config": {
            "d_model": 96,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "encoder_ffn_dim": 200,
            "num_mel_bins": 80,
            "max_source_positions": 300,
        },
        "text_config": {
            "model_type": "qwen2",
            "hidden_size": 256,
            "intermediate_size": 300,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 1000,
            **text,
        },
    }


def test_qwen2_audio_counts_its_whisper_encoder_and_never_ties_its_head():
    assert architecture_from_config(_qwen2_audio()).params_total == 1_625_488
    # Qwen2AudioForConditionalGeneration declares no tied weights.
    tied = architecture_from_config({**_qwen2_audio(tie_word_embeddings=True)})
    assert tied.params_total == 1_625_488


def test_qwen2_audio_is_qwen_7b_with_an_encoder_and_projector():
    arch = architecture_from_config(_config("Qwen/Qwen2-Audio-7B"))

    assert (arch.num_layers, arch.num_kv_heads, arch.vocab_size) == (32, 32, 156032)
    assert not arch.is_encoder_decoder  # the audio's tokens join the text's sequence
    assert any("750 tokens" in note for note in arch.notes)


def test_qwen2_audio_with_another_language_model_is_refused():
    with pytest.raises(ConfigError, match="qwen2"):
        architecture_from_config(_qwen2_audio(model_type="llama"))


# --- End to end -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "repo",
    [
        "mistralai/Ministral-3-8B-Base-2512",
        "zai-org/GLM-4.1V-9B-Thinking",
        "zai-org/GLM-4.5V",
        "Qwen/Qwen2-Audio-7B-Instruct",
    ],
)
def test_bf16_inference_holds_two_bytes_a_parameter(repo):
    config = _config(repo)
    total = architecture_from_config(config).params_total

    result = estimate(
        EstimateRequest(model_id=repo, config=config, task="inference", precision="bf16"),
        default_catalog(),
    )

    gpus = result.recommendation.num_gpus
    assert result.memory.weights * gpus == pytest.approx(2 * total, rel=0.02)
    assert result.memory.kv_cache > 0


def test_deepseek_v32_bf16_inference_spans_nodes_with_a_small_cache():
    """1.34 TB of bf16 weights: vLLM spreads them over nodes; the latent and indexer cache of a
    request stays a sliver of that. (In fp8 its experts, 3-D parameters in transformers 5,
    stay 16-bit in the engine's count, as glm4_moe's do.)"""
    config = _config("deepseek-ai/DeepSeek-V3.2-Exp")
    total = architecture_from_config(config).params_total
    request = EstimateRequest(
        task="inference", config=config, precision="bf16", framework="vllm", tokens=10**8
    )

    result = estimate(request, default_catalog())

    option = result.recommendation
    assert option.nodes > 1
    assert option.memory.weights * option.num_gpus == pytest.approx(2 * total, rel=0.02)
    assert 0 < option.memory.kv_cache < 0.01 * option.memory.weights
