"""Llama 3.2 Vision (mllama) and the dual encoders CLIP and SigLIP.

Every count equals transformers 5.24's for the same config, built on the meta device
(MllamaForConditionalGeneration, MllamaForCausalLM, CLIPModel, SiglipModel); the releases'
sources are in advisor/model_configs/index.json.
"""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_trainable_params
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload


def _config(repo: str) -> dict:
    return find_bundled(repo).config


def _shape(repo: str):
    return shape_from_architecture(architecture_from_config(_config(repo)))


# --- Llama 3.2 Vision -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "total"),
    [
        ("meta-llama/Llama-3.2-11B-Vision", 10_670_220_835),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", 10_670_220_835),
        ("meta-llama/Llama-3.2-90B-Vision", 88_593_355_323),
        ("meta-llama/Llama-3.2-90B-Vision-Instruct", 88_593_355_323),
    ],
)
def test_each_llama_3_2_vision_release_counts_as_transformers_builds_it(repo, total):
    """11B-Vision-Instruct's Hub safetensors total is 10,670,220,835 to the parameter."""
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total, arch.params_active) == ("mllama", total, total)
    assert arch.exact


def test_the_11b_model_is_its_language_model_vision_model_and_projector():
    """MllamaTextModel 9,249,855,504 (embed_tokens of 128,256 + 8 rows), the untied
    lm_head 128,256 x 4,096, the vision model 863,567,379 (32 local + 8 gated global layers,
    tile and position tables) and the projector 7,680 x 4,096 + bias."""
    arch = architecture_from_config(_config("meta-llama/Llama-3.2-11B-Vision-Instruct"))

    assert arch.params_embedding == (128_256 + 8) * 4096
    assert arch.params_lm_head == 128_256 * 4096
    assert not arch.tied_embeddings
    projector = 7680 * 4096 + 4096
    assert arch.params_total == 9_249_855_504 + 525_336_576 + 863_567_379 + projector
    assert "Includes the vision model (863,567,379 parameters)" in arch.notes[-1]


@pytest.mark.parametrize(
    ("text", "vision", "total"),
    [
        ({}, {}, 285_163),
        # head_dim is hidden // heads (70 // 4 = 17: q/k/v narrower than the hidden size)
        (
            {"hidden_size": 70, "num_key_value_heads": 4},
            {"hidden_size": 30},
            323_647,
        ),
        # indices repeated or outside the stack build no extra cross-attention layer
        ({"cross_attention_layers": [1, 1, 4, 9, -1]}, {}, 285_163),
        ({"cross_attention_layers": []}, {}, 285_095),
        ({"num_hidden_layers": 40, "cross_attention_layers": None}, {}, 1_365_047),
        (
            {},
            {"max_num_tiles": 2, "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]]},
            268_139,
        ),
        ({}, {"num_global_layers": 0, "num_channels": 1, "image_size": 60}, 257_863),
        ({"head_dim": 32}, {}, 285_163),  # not read by the Mllama attention classes
        ({"tie_word_embeddings": True}, {}, 285_163),  # the class ties nothing
    ],
)
def test_mllama_flag_variants_count_as_transformers_builds_them(text, vision, total):
    base_text = {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 300,
        "cross_attention_layers": [1, 3],
    }
    base_vision = {
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 4,
        "num_global_layers": 2,
        "attention_heads": 4,
        "image_size": 56,
        "patch_size": 14,
        "vision_output_dim": 96,
        "max_num_tiles": 4,
    }
    text_config = {k: v for k, v in {**base_text, **text}.items() if v is not None}
    config = {
        "model_type": "mllama",
        "text_config": text_config,
        "vision_config": {**base_vision, **vision},
    }

    assert architecture_from_config(config).params_total == total


def test_mllama_defaults_and_the_text_only_class():
    """Empty sub-configs take transformers' defaults (448 px tiles); MllamaForCausalLM builds
    the language model, cross-attention layers included, and its own head."""
    defaults = {"model_type": "mllama", "text_config": {}, "vision_config": {}}
    text = _config("meta-llama/Llama-3.2-11B-Vision")["text_config"]
    text_only = architecture_from_config({**text, "architectures": ["MllamaForCausalLM"]})

    assert architecture_from_config(defaults).params_total == 10_642_941_475
    assert (text_only.family, text_only.params_total) == ("mllama_text_model", 9_775_192_080)
    small = {
        "model_type": "mllama_text_model",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 300,
        "cross_attention_layers": [1, 3],
    }
    assert architecture_from_config(small).params_total == 193_284


def test_the_cross_attention_layers_cache_the_image_not_the_text():
    """11B at 2,048 + 256 tokens: 32 self-attention layers cache 8 KV heads x 128 x 2 (K and
    V) x 2 bytes per token; the 8 cross-attention layers the same per vision state, 4 tiles
    x 1,601 patches = 6,404 of them, however long the text."""
    shape = _shape("meta-llama/Llama-3.2-11B-Vision-Instruct")
    per_value = 8 * 128 * 2 * 2

    short = kv_cache_bytes(shape, workload(seq_len=2048, new_tokens=256))
    long = kv_cache_bytes(shape, workload(seq_len=32768, new_tokens=256))

    image = 8 * 6404 * per_value
    assert short == 32 * 2304 * per_value + image
    assert long - short == 32 * (32768 - 2048) * per_value


def test_each_text_token_reads_every_vision_state_in_the_cross_attention_layers():
    """Training FLOPs per token: 6 x matmul parameters + 12 x query width x tokens read; a
    cross-attention layer reads all 6,404 vision states (12,808 in the full-layer count
    causal self-attention uses)."""
    shape = _shape("meta-llama/Llama-3.2-11B-Vision-Instruct")
    wl = workload(task="full_finetune", seq_len=4096, new_tokens=0)

    attention = training_flops_per_token(shape, wl) - 6 * shape.flop_params

    assert attention == pytest.approx(12 * 4096 * (32 * 4096 + 8 * 2 * 6404))


def test_lora_adapts_both_layer_kinds_in_the_blocks_that_have_them():
    """PEFT's q_proj matches self_attn.q_proj in 32 blocks and cross_attn.q_proj in 8; both
    are 4,096 x 4,096. k_proj is 4,096 -> 1,024 in both kinds."""
    shape = _shape("meta-llama/Llama-3.2-11B-Vision-Instruct")
    r = 16
    roles = {lin.name: (lin.role, shape.blocks_with(lin)) for lin in shape.linears}

    assert roles["q_proj"] == ("attn_q", 32)
    assert roles["cross_attn.k_proj"] == ("cross_attn_k", 8)
    assert roles["down_proj"] == ("mlp_down", 40)
    only_q = lora_trainable_params(
        shape, workload(task="lora", lora_rank=r, lora_targets=("q_proj",))
    )
    assert only_q == r * 40 * (4096 + 4096)
    only_k = lora_trainable_params(
        shape, workload(task="lora", lora_rank=r, lora_targets=("k_proj",))
    )
    assert only_k == r * 40 * (4096 + 1024)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"text_config": [1]}, "text_config"),
        ({"vision_config": "clip"}, "vision_config"),
        (
            {"text_config": {"num_attention_heads": 32, "num_key_value_heads": 5}},
            "num_key_value_heads",
        ),
        ({"vision_config": {"image_size": 10, "patch_size": 14}}, "vision_config"),
        ({"text_config": {"cross_attention_layers": "3,8"}}, "cross_attention_layers"),
    ],
)
def test_malformed_mllama_configs_are_refused_naming_the_field(change, field):
    config = {"model_type": "mllama", "text_config": {}, "vision_config": {}, **change}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert raised.value.field == field


def test_an_11b_vision_inference_request_holds_its_bf16_weights_and_image_cache():
    config = _config("meta-llama/Llama-3.2-11B-Vision-Instruct")
    result = estimate(
        EstimateRequest(
            model_id="meta-llama/Llama-3.2-11B-Vision-Instruct",
            config=config,
            task="inference",
            tokens=10**6,
        ),
        default_catalog(),
    )

    assert result.params_total == 10_670_220_835
    assert result.recommendation is not None
    assert result.recommendation.fits
    memory = result.recommendation.memory
    assert memory.weights == pytest.approx(2 * 10_670_220_835, rel=0.01)
    assert memory.kv_cache >= 8 * 6404 * 8 * 128 * 2 * 2  # at least one image's cache
    assert any("6,404 vision states" in w for w in result.warnings)


# --- CLIP and SigLIP --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "family", "total", "active", "pair"),
    [
        ("openai/clip-vit-base-patch32", "clip", 151_277_313, 83_041_386, 50 + 77),
        ("openai/clip-vit-large-patch14", "clip", 427_616_513, 291_700_248, 257 + 77),
        ("google/siglip-base-patch16-224", "siglip", 203_155_970, 115_764_858, 196 + 64),
        ("google/siglip-so400m-patch14-384", "siglip", 877_960_498, 463_985_935, 729 + 64),
    ],
)
def test_each_dual_encoder_counts_as_transformers_builds_it(repo, family, total, active, pair):
    """All parameters of CLIPModel / SiglipModel; active per token is the token-weighted mean
    of the two towers (a patch passes through the vision tower only, a text token through the
    text tower only), and one image-text pair is the image's patches (CLIP: and its class
    token) plus the text's padded length."""
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active)
    assert arch.max_position_embeddings == pair
    assert arch.vocab_size == 0
    assert arch.params_lm_head == 0
    assert f"one image-text pair is {pair} tokens" in arch.notes[-1]


def test_a_pair_runs_each_tower_over_its_own_tokens():
    """CLIP ViT-B/32: the matmul FLOPs of one pair (50 patch tokens through the vision tower
    and its projection, 77 text tokens through the text tower and its projection) equal
    2 x active matmul parameters x 127 tokens, within the integer mean's rounding."""
    shape = _shape("openai/clip-vit-base-patch32")
    d, text_d = 768, 512
    vision_blocks = 12 * (4 * (d * d + d) + 2 * d * 3072 + 3072 + d + 4 * d)
    per_patch = 3 * 32 * 32 * d + 4 * d + vision_blocks + d * 512  # conv, 2 LNs, proj
    text_blocks = 12 * (4 * (text_d * text_d + text_d) + 2 * text_d * 2048 + 2048 + text_d)
    per_text = text_blocks + 12 * 4 * text_d + 2 * text_d + text_d * 512
    pair = per_patch * 50 + per_text * 77

    assert shape.flop_params * 127 == pytest.approx(pair, abs=127)


@pytest.mark.parametrize(
    ("family", "top", "text", "vision", "total"),
    [
        ("clip", {}, {}, {}, 151_277_313),  # transformers' defaults: ViT-B/32
        ("clip", {"projection_dim": 256}, {}, {}, 150_949_633),
        (
            "clip",
            {},
            {"max_position_embeddings": 100, "vocab_size": 1000},
            {"image_size": 96, "patch_size": 16, "num_channels": 1},
            124_331_521,
        ),
        ("siglip", {}, {}, {}, 203_155_970),  # defaults: base, patch 16, 224 px
        ("siglip", {}, {}, {"vision_use_head": False}, 196_068_866),
        ("siglip", {}, {"projection_size": 512}, {}, 202_959_106),
    ],
)
def test_dual_encoder_flag_variants_count_as_transformers_builds_them(
    family, top, text, vision, total
):
    config = {"model_type": family, **top, "text_config": text, "vision_config": vision}

    assert architecture_from_config(config).params_total == total


def test_a_dual_encoder_keeps_no_kv_cache_and_generates_nothing():
    config = _config("google/siglip-so400m-patch14-384")
    result = estimate(
        EstimateRequest(
            model_id="google/siglip-so400m-patch14-384",
            config=config,
            task="inference",
            tokens=10**7,
        ),
        default_catalog(),
    )

    assert result.recommendation is not None
    assert result.recommendation.fits
    memory = result.recommendation.memory
    assert memory.kv_cache == 0
    assert memory.logits == 0
    assert memory.weights == pytest.approx(2 * 877_960_498, rel=0.01)


def test_a_dual_encoder_with_a_malformed_tower_is_refused():
    with pytest.raises(ConfigError) as raised:
        architecture_from_config({"model_type": "clip", "text_config": [], "vision_config": {}})

    assert raised.value.field == "text_config"
