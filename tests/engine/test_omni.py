"""Qwen's omni models: Qwen2.5-Omni (qwen2_5_omni) and Qwen3-Omni (qwen3_omni_moe).

Every count equals transformers 5.24's for the same config, built on the meta device
(Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniThinkerForConditionalGeneration,
Qwen3OmniMoeForConditionalGeneration, Qwen3OmniMoeThinkerForConditionalGeneration); the
releases' sources are in advisor/model_configs/index.json.
"""

from __future__ import annotations

import copy

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.architecture.omni import (
    q25_bigvgan_params,
    q25_dit_params,
    q25_talker_params,
)
from advisor.engine.architecture.qwen3_omni import q3_code2wav_params, q3_talker_params
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_trainable_params
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload

Q25_7B = "Qwen/Qwen2.5-Omni-7B"
Q25_3B = "Qwen/Qwen2.5-Omni-3B"
Q3 = "Qwen/Qwen3-Omni-30B-A3B-Instruct"


def _config(repo: str) -> dict:
    return copy.deepcopy(find_bundled(repo).config)


def _count(config: dict) -> int:
    return architecture_from_config(config).params_total


def _set(config: dict, path: str, value) -> dict:
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node[key]
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return config


def _thinker(repo: str) -> dict:
    """The thinker's own config, as a thinker-only checkpoint saves it."""
    config = _config(repo)
    thinker = config["thinker_config"]
    if config["model_type"] == "qwen2_5_omni":
        thinker["architectures"] = ["Qwen2_5OmniThinkerForConditionalGeneration"]
    else:
        thinker["architectures"] = ["Qwen3OmniMoeThinkerForConditionalGeneration"]
    return thinker


# --- the releases -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "family", "total", "active"),
    [
        (Q25_7B, "qwen2_5_omni", 10_732_225_408, 8_931_813_888),
        (Q25_3B, "qwen2_5_omni", 5_537_120_640, 4_703_464_448),
        (Q3, "qwen3_omni_moe", 35_259_818_545, 4_540_115_568),
        ("Qwen/Qwen3-Omni-30B-A3B-Thinking", "qwen3_omni_moe", 31_719_205_488, 4_540_115_568),
        ("Qwen/Qwen3-Omni-30B-A3B-Captioner", "qwen3_omni_moe", 31_719_205_488, 4_540_115_568),
    ],
)
def test_each_omni_release_counts_as_transformers_builds_it(repo, family, total, active):
    """The active count is the thinker's per token: the talker and vocoder never run for its
    tokens (and Qwen3's thinker routes 8 of 128 experts)."""
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active)
    assert arch.exact


def test_the_hub_totals_are_the_counts_plus_the_dits_stored_rotary_frequencies():
    """The Hub's safetensors totals: Qwen2.5-Omni-7B 10,732,225,440 and -3B 5,537,120,672,
    32 more than transformers builds each (the token2wav DiT's 32 rotary frequencies, a buffer
    in transformers); Qwen3-Omni-30B-A3B-Instruct 35,259,818,545 exactly, and its Thinking and
    Captioner releases 31,719,205,488, the thinker alone."""
    assert 10_732_225_440 - _count(_config(Q25_7B)) == 32
    assert 5_537_120_672 - _count(_config(Q25_3B)) == 32
    assert _count(_config(Q3)) == 35_259_818_545


def test_the_7b_is_its_thinker_talker_dit_and_bigvgan():
    """thinker 8,931,813,888 (lm_head untied: 152,064 x 3,584), talker 1,351,360,256,
    token2wav's DiT 333,607,760 and BigVGAN 115,443,504, module by module in transformers."""
    config = _config(Q25_7B)
    arch = architecture_from_config(config)
    token2wav = config["token2wav_config"]

    assert q25_talker_params(config["talker_config"]) == 1_351_360_256
    assert q25_dit_params(token2wav["dit_config"]) == 333_607_760
    assert q25_bigvgan_params(token2wav["bigvgan_config"]) == 115_443_504
    assert arch.params_lm_head == 152_064 * 3584
    assert not arch.tied_embeddings
    assert arch.params_total - arch.params_active == 1_351_360_256 + 333_607_760 + 115_443_504


def test_qwen3_omni_is_its_thinker_talker_and_code2wav():
    """thinker 31,719,205,488, talker 3,324,596,480 (its MoE, the two projections, codec head
    and the 141,570,304-parameter code predictor), code2wav 216,016,577."""
    config = _config(Q3)

    assert q3_talker_params(config["talker_config"]) == 3_324_596_480
    assert q3_code2wav_params(config["code2wav_config"]) == 216_016_577
    assert _count(_thinker(Q3)) == 31_719_205_488


@pytest.mark.parametrize(
    ("repo", "family", "total", "active"),
    [
        (Q25_7B, "qwen2_5_omni_thinker", 8_931_813_888, 8_931_813_888),
        (Q25_3B, "qwen2_5_omni_thinker", 4_703_464_448, 4_703_464_448),
        (Q3, "qwen3_omni_moe_thinker", 31_719_205_488, 4_540_115_568),
    ],
)
def test_the_thinker_alone_is_what_a_thinker_fine_tune_trains(repo, family, total, active):
    arch = architecture_from_config(_thinker(repo))

    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active)
    assert not any("speech half" in note for note in arch.notes)


def test_the_note_says_what_loads_and_what_a_thinker_fine_tune_trains():
    notes = " ".join(architecture_from_config(_config(Q25_7B)).notes)

    assert "8,931,813,888" in notes  # the thinker's size
    assert "qwen2_5_omni_thinker" in notes
    assert "float32" in notes  # token2wav's dtype
    assert "750 tokens" in notes  # 30 s of audio


# --- shape: what the thinker does ---------------------------------------------------------------


def test_the_kv_cache_and_flops_are_the_thinkers():
    """28 layers x 4 KV heads x 128 x (K, V) x 2 bytes = 57,344 bytes a token; the training
    FLOPs follow the thinker's active parameters, not the talker's."""
    shape = shape_from_architecture(architecture_from_config(_config(Q25_7B)))
    thinker = shape_from_architecture(architecture_from_config(_thinker(Q25_7B)))
    wl = workload(seq_len=2048, new_tokens=0)

    assert kv_cache_bytes(shape, wl) == 2048 * 28 * 2 * 4 * 128 * 2
    train = workload(task="full_finetune", seq_len=4096, new_tokens=0)
    assert training_flops_per_token(shape, train) == training_flops_per_token(thinker, train)


def test_lora_adapts_the_thinkers_language_model():
    """A public analysis of Qwen2.5-Omni-7B: LoRA r8 on q/k/v/o of the 28 language-model
    layers trains 5,046,272 parameters. all-linear adds gate/up/down (r16: 40,370,176); in
    Qwen3-Omni the experts are parameter tensors, so all-linear is attention only."""
    q25 = shape_from_architecture(architecture_from_config(_config(Q25_7B)))
    q3 = shape_from_architecture(architecture_from_config(_config(Q3)))
    qkvo = ("q_proj", "k_proj", "v_proj", "o_proj")

    assert lora_trainable_params(q25, workload(lora_rank=8, lora_targets=qkvo)) == 5_046_272
    assert lora_trainable_params(q25, workload(lora_rank=16)) == 40_370_176
    assert lora_trainable_params(q3, workload(lora_rank=16)) == 48 * 16 * (6144 + 2560) * 2


# --- flags, each as transformers builds it -------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "path", "value", "total"),
    [
        # the thinker ties by thinker_config's flag, not text_config's
        (Q25_3B, "thinker_config.tie_word_embeddings", True, 5_225_955_712),
        (Q25_3B, "thinker_config.text_config.tie_word_embeddings", True, 5_537_120_640),
        (Q25_3B, "enable_audio_output", False, 4_703_464_448),
        (Q25_3B, "thinker_config.text_config.num_key_value_heads", 1, 5_518_237_056),
        (Q25_3B, "thinker_config.vision_config.spatial_merge_size", 3, 5_656_730_240),
        (Q25_3B, "thinker_config.audio_config.num_mel_bins", 80, 5_536_936_320),
        (Q25_3B, "talker_config.head_dim", 32, 5_515_086_720),
        (Q25_3B, "talker_config.head_dim", None, 5_581_188_480),  # hidden / heads
        (Q25_7B, "talker_config.tie_word_embeddings", True, 10_732_225_408),  # never tied
        (Q25_7B, "token2wav_config.dit_config.num_hidden_layers", 4, 10_467_744_640),
        (Q25_7B, "token2wav_config.dit_config.ff_mult", 3, 10_778_385_280),
        (Q25_7B, "token2wav_config.dit_config.mel_dim", 100, 10_732_291_988),
        (Q3, "thinker_config.tie_word_embeddings", True, 34_948_391_473),
        (Q3, "thinker_config.text_config.mlp_only_layers", [0, 5, 7], 33_461_248_561),
        (Q3, "thinker_config.text_config.decoder_sparse_step", 2, 20_871_258_673),
        (Q3, "thinker_config.text_config.head_dim", None, 34_806_827_569),
        (Q3, "thinker_config.vision_config.deepstack_visual_indexes", [3, 9], 35_229_131_825),
        (Q3, "thinker_config.audio_config.num_mel_bins", 129, 35_260_432_945),
        (Q3, "thinker_config.audio_config.downsample_hidden_size", 256, 35_252_260_785),
        (Q3, "talker_config.tie_word_embeddings", True, 35_256_672_817),
        # every talker layer is sparse, whatever these say
        (Q3, "talker_config.text_config.mlp_only_layers", [1, 2], 35_259_818_545),
        (Q3, "talker_config.text_config.decoder_sparse_step", 3, 35_259_818_545),
        (Q3, "talker_config.text_config.shared_expert_intermediate_size", 500, 35_243_352_625),
        (Q3, "talker_config.code_predictor_config.num_code_groups", 8, 35_226_264_113),
        (Q3, "talker_config.code_predictor_config.num_code_groups", None, 35_326_927_409),
        (Q3, "code2wav_config.num_key_value_heads", 4, 35_247_235_633),
        (Q3, "code2wav_config.attention_bias", True, 35_259_851_313),
        (Q3, "code2wav_config.upsampling_ratios", [2, 2, 3], 35_271_370_289),
        (Q3, "code2wav_config.decoder_dim", 1000, 35_232_153_300),
        (Q3, "enable_audio_output", False, 31_719_205_488),
    ],
)
def test_flag_variants_count_as_transformers_builds_them(repo, path, value, total):
    assert _count(_set(_config(repo), path, value)) == total


def test_token2wav_and_talker_variants_count_as_transformers_builds_them():
    q25 = _config(Q25_7B)
    _set(
        q25,
        "token2wav_config.bigvgan_config",
        {
            "upsample_initial_channel": 512,
            "upsample_rates": [4, 4, 2],
            "upsample_kernel_sizes": [8, 8, 4],
            "resblock_kernel_sizes": [3, 5],
            "resblock_dilation_sizes": [[1, 2, 3], [1, 3, 5]],
            "mel_dim": 100,
        },
    )
    _set(
        q25,
        "token2wav_config.dit_config",
        {
            "enc_channels": [128, 256, 256, 512],
            "enc_kernel_sizes": [5, 3, 3, 1],
            "enc_dilations": [1, 2, 3, 1],
            "enc_res2net_scale": 4,
            "enc_se_channels": 32,
            "enc_attention_channels": 96,
            "enc_dim": 64,
            "enc_emb_dim": 100,
        },
    )
    q3 = _set(_config(Q3), "talker_config.text_config.num_experts", None)
    _set(q3, "talker_config.text_config.num_local_experts", 64)  # transformers 5's name

    assert _count(q25) == 10_621_655_856
    assert _count(q3) == 33_748_558_385


@pytest.mark.parametrize(
    ("repo", "path", "value", "field"),
    [
        # transformers 5 fails to build these, so the engine refuses them
        (Q3, "talker_config.code_predictor_config.tie_word_embeddings", True, "talker_config"),
        (Q3, "talker_config.text_config.shared_expert_intermediate_size", None, None),
        (Q3, "talker_config.spatial_merge_size", None, "spatial_merge_size"),
        (Q25_7B, "token2wav_config.dit_config.enc_kernel_sizes", [5, 3], "enc_channels"),
        # the towers' tokens join the thinker's sequence: their width must be its width
        (Q25_7B, "thinker_config.audio_config.output_dim", 2048, "thinker_config"),
    ],
)
def test_configs_transformers_cannot_build_are_refused(repo, path, value, field):
    with pytest.raises(ConfigError) as error:
        architecture_from_config(_set(_config(repo), path, value))
    if field:
        assert error.value.field == field


# --- end to end ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("repo", "total"), [(Q25_7B, 10_732_225_408), (Q3, 35_259_818_545)])
def test_inference_holds_the_whole_models_bf16_weights(repo, total):
    result = estimate(
        EstimateRequest(model_id=repo, config=_config(repo), task="inference", tokens=10**6),
        default_catalog(),
    )

    assert result.params_total == total
    assert result.recommendation is not None
    assert result.recommendation.fits
    assert result.recommendation.memory.weights == pytest.approx(2 * total, rel=0.01)
