"""Self-supervised speech encoders (wav2vec 2.0 / XLSR / XLS-R, HuBERT, WavLM, data2vec-audio)
are counted exactly: each release's config.json (bundled in advisor/model_configs, whose index
says where each came from) and variants of every flag the reader reads give the number of
parameters transformers 5.24 builds (the parameters of the class architectures[0] names, built
on the meta device; the positional convolution's weight-norm parametrisation included).

A token is one frame of the feature encoder (320 samples, 20 ms at 16 kHz). The feature
encoder's FLOPs and activations per frame (architecture.model.Frontend) were checked against
the convolutions' shapes and, for what autograd keeps, against torch's saved-tensor hooks on
CPU (wav2vec2-base: 162,593 elements per frame measured, 162,624 counted)."""

from dataclasses import replace

import pytest

from advisor.engine import estimate
from advisor.engine.activations import inference_activations, training_activations
from advisor.engine.architecture import architecture_from_config, known_families
from advisor.engine.compute import frontend_training_flops, training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES, kv_cache_bytes
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

# repo_id -> (family, transformers' count of the class architectures[0] names)
RELEASES = {
    "facebook/wav2vec2-base": ("wav2vec2", 95_044_608),  # Wav2Vec2ForPreTraining
    "facebook/wav2vec2-base-960h": ("wav2vec2", 94_396_320),  # Wav2Vec2ForCTC
    "facebook/wav2vec2-large-960h-lv60-self": ("wav2vec2", 315_471_520),
    "facebook/wav2vec2-large-xlsr-53": ("wav2vec2", 317_390_592),
    "facebook/wav2vec2-xls-r-300m": ("wav2vec2", 317_390_592),
    "facebook/wav2vec2-xls-r-1b": ("wav2vec2", 965_514_752),
    "facebook/hubert-base-ls960": ("hubert", 94_371_712),  # HubertModel
    "facebook/hubert-large-ll60k": ("hubert", 315_438_720),
    "facebook/hubert-large-ls960-ft": ("hubert", 315_471_520),  # HubertForCTC
    "microsoft/wavlm-base": ("wavlm", 94_381_936),  # WavLMModel
    "microsoft/wavlm-base-plus": ("wavlm", 94_381_936),
    "microsoft/wavlm-large": ("wavlm", 315_453_120),
}


def bundled(repo_id: str) -> dict:
    return find_bundled(repo_id).config


@pytest.mark.parametrize("repo_id", RELEASES)
def test_each_release_counts_as_transformers_builds_it(repo_id):
    family, count = RELEASES[repo_id]
    arch = architecture_from_config(bundled(repo_id))

    assert (arch.family, arch.params_total, arch.params_active) == (family, count, count)
    assert arch.exact is True
    assert arch.family in ENCODER_ONLY_FAMILIES


# facebook/data2vec-audio-base-960h (not bundled: no published count found): the base shape,
# a LayerNorm after every conv, five plain positional convs of kernel 19.
DATA2VEC_AUDIO_BASE_960H = {
    "model_type": "data2vec-audio",
    "architectures": ["Data2VecAudioForCTC"],
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "conv_dim": [512] * 7,
    "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
    "conv_stride": [5, 2, 2, 2, 2, 2, 2],
    "conv_bias": False,
    "num_conv_pos_embeddings": 5,
    "conv_pos_kernel_size": 19,
    "num_conv_pos_embedding_groups": 16,
    "mask_time_prob": 0.05,
    "vocab_size": 32,
}

# A small shape for the flag variants: odd widths, three conv layers, a 9-wide positional conv.
SMALL = {
    "hidden_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 200,
    "conv_dim": [32, 48, 40],
    "conv_kernel": [7, 3, 2],
    "conv_stride": [4, 3, 2],
    "num_feat_extract_layers": 3,
    "num_conv_pos_embeddings": 9,
    "num_conv_pos_embedding_groups": 8,
    "vocab_size": 29,
}
W2V_CTC, W2V_PT = "facebook/wav2vec2-base-960h", "facebook/wav2vec2-base"
W2V_LARGE, HUBERT = "facebook/wav2vec2-large-960h-lv60-self", "facebook/hubert-base-ls960"
HUBERT_CTC, WAVLM, WAVLM_LARGE = (
    "facebook/hubert-large-ls960-ft",
    "microsoft/wavlm-base",
    "microsoft/wavlm-large",
)

# (base release, overrides on SMALL, transformers' count on the meta device)
VARIANTS = [
    (W2V_CTC, {}, 255_310),
    (
        W2V_CTC,
        {"feat_extract_norm": "layer", "conv_bias": True, "do_stable_layer_norm": True},
        255_606,
    ),  # fmt: skip
    (W2V_CTC, {"mask_time_prob": 0.0}, 255_214),  # no masked_spec_embed
    (W2V_CTC, {"mask_time_prob": 0.0, "mask_feature_prob": 0.1}, 255_310),
    (
        W2V_PT,
        {
            "codevector_dim": 60,
            "proj_codevector_dim": 50,
            "num_codevector_groups": 3,
            "num_codevectors_per_group": 17,
        },
        263_508,
    ),  # fmt: skip
    (W2V_CTC, {"architectures": ["Wav2Vec2Model"]}, 252_497),
    (
        W2V_CTC,
        {
            "architectures": ["Wav2Vec2ForSequenceClassification"],
            "num_labels": 7,
            "classifier_proj_size": 33,
        },
        255_936,
    ),  # fmt: skip
    (
        W2V_CTC,
        {
            "architectures": ["Wav2Vec2ForSequenceClassification"],
            "num_labels": 7,
            "use_weighted_layer_sum": True,
        },
        279_132,
    ),  # fmt: skip
    (
        W2V_CTC,
        {
            "architectures": ["Wav2Vec2ForAudioFrameClassification"],
            "num_labels": 5,
            "use_weighted_layer_sum": True,
        },
        252_986,
    ),  # fmt: skip
    (W2V_LARGE, {"adapter_attn_dim": 16}, 265_734),  # MMS's attention adapters
    (HUBERT, {"feat_proj_layer_norm": False}, 252_417),
    (HUBERT, {"conv_pos_batch_norm": True}, 252_680),
    (HUBERT_CTC, {"adapter_attn_dim": 12}, 263_418),
    (
        HUBERT,
        {
            "architectures": ["HubertForSequenceClassification"],
            "num_labels": 4,
            "use_weighted_layer_sum": True,
        },
        278_361,
    ),  # fmt: skip
    (WAVLM, {"num_buckets": 100}, 253_509),
    (WAVLM_LARGE, {"architectures": ["WavLMForCTC"]}, 257_378),
    (WAVLM, {"architectures": ["WavLMForAudioFrameClassification"], "num_labels": 3}, 254_680),
]


@pytest.mark.parametrize(("base", "fields", "count"), VARIANTS)
def test_flag_variants_count_as_transformers_builds_them(base, fields, count):
    config = {**bundled(base), **SMALL, **fields}

    assert architecture_from_config(config).params_total == count


def test_data2vec_audio_counts_as_transformers_builds_it():
    small = {**SMALL, "num_conv_pos_embeddings": 3, "conv_pos_kernel_size": 7, "conv_bias": True}
    seqcls = {**SMALL, "architectures": ["Data2VecAudioForSequenceClassification"]}
    bare = {**DATA2VEC_AUDIO_BASE_960H, "architectures": ["Data2VecAudioModel"]}

    assert architecture_from_config(DATA2VEC_AUDIO_BASE_960H).params_total == 93_188_896
    assert architecture_from_config(bare).params_total == 93_164_288
    assert architecture_from_config({**DATA2VEC_AUDIO_BASE_960H, **small}).params_total == 269_613
    assert (
        architecture_from_config({**DATA2VEC_AUDIO_BASE_960H, **seqcls, "num_labels": 6})
    ).params_total == 466_430
    assert {"wav2vec2", "hubert", "wavlm", "data2vec-audio"} <= set(known_families())


def test_a_token_is_a_20_ms_frame_and_the_notes_say_how_long_a_sequence_is():
    arch = architecture_from_config(bundled(W2V_CTC))
    front = arch.frontend

    assert (front.samples_per_token, front.seconds_per_token) == (320, 0.02)
    assert "N x 0.02 s" in arch.notes[0]
    assert "20 s of audio is 1,000 frames" in arch.notes[0]
    assert arch.max_position_embeddings is None  # convolutional positions: no limit
    assert (arch.vocab_size, arch.params_lm_head) == (32, 0)  # the CTC head: per frame


def test_the_feature_encoder_is_counted_as_the_embedding_with_its_own_flops():
    arch = architecture_from_config(bundled(W2V_CTC))
    front = arch.frontend

    # Seven convs (512 channels, no bias) and the first one's GroupNorm.
    assert arch.params_embedding == front.params == 4_200_448
    # Per frame: 2 x inputs x kernel x outputs x positions, layer by layer (64, 32, ..., 1).
    assert front.forward_flops == 98_172_928
    # Kept for backward when trained: conv, norm and GELU inputs (torch's saved-tensor hooks
    # measure 162,593 per frame on CPU); the GroupNorm's output fp32 under autocast.
    assert (front.saved, front.saved_fp32) == (162_624, 32_768)
    assert front.working == 320 + 2 * 512 * 64
    large = architecture_from_config(bundled(W2V_LARGE)).frontend
    assert large.saved == 194_880  # a LayerNorm after every conv (measured 195,083)


def test_lora_adapts_the_blocks_linears_and_wavlm_adds_its_gate():
    names = {lin.name for lin in architecture_from_config(bundled(W2V_CTC)).layer_linears}
    wavlm = {lin.name for lin in architecture_from_config(bundled(WAVLM)).layer_linears}

    assert names == {"q_proj", "k_proj", "v_proj", "out_proj", "intermediate_dense", "output_dense"}
    assert wavlm == names | {"gru_rel_pos_linear"}


def _shape_and_workload(repo_id: str, task: str, **fields):
    config = bundled(repo_id)
    shape = shape_from_architecture(architecture_from_config(config))
    request = EstimateRequest(config=config, task=task, seq_len=1000, micro_batch=8,
                              batch_size=8, tokens=10**7, precision="bf16", **fields)  # fmt: skip
    return shape, build_workload(request, shape)


def test_pretraining_trains_the_feature_encoder_and_fine_tuning_runs_it_forward():
    shape, tune = _shape_and_workload(W2V_PT, "full_finetune")
    _, pre = _shape_and_workload(W2V_PT, "pretrain")
    forward = shape.frontend.forward_flops

    assert frontend_training_flops(shape, tune) == forward
    assert frontend_training_flops(shape, pre) == 3 * forward
    assert training_flops_per_token(shape, pre) - training_flops_per_token(
        shape, replace(pre, task="full_finetune")
    ) == pytest.approx(2 * forward)
    # Pre-training keeps the feature encoder's tensors (autocast: the GroupNorm output fp32)
    # and the contrastive loss's 3 x 101 x 256 fp32 values per frame.
    tokens = 8 * 1000
    extra = tokens * (162_624 * 2 + 32_768 * 2 + 3 * 101 * 256 * 4)
    assert training_activations(shape, pre) - training_activations(shape, tune) == pytest.approx(
        extra
    )


def test_inference_holds_the_first_convolutions_and_no_kv_cache():
    shape, wl = _shape_and_workload(W2V_CTC, "inference")

    assert wl.new_tokens == 0
    assert kv_cache_bytes(shape, wl) == 0
    # The first conv's 512 x 64 values per frame, twice, outweigh a block's working set.
    assert inference_activations(shape, wl) == 8 * 1000 * (320 + 2 * 512 * 64) * 2


def test_wavlm_keeps_its_attention_scores_whatever_kernel_is_asked_for():
    wavlm, fused = _shape_and_workload(WAVLM, "full_finetune", flash_attention=True)
    w2v, w2v_fused = _shape_and_workload(W2V_CTC, "full_finetune", flash_attention=True)
    scores = 8 * 12 * 1000 * 1000  # batch x heads x frames^2, per layer

    # Under autocast each layer keeps fp32 probabilities, their 16-bit cast, the dropout mask
    # and its fp32 output (11 bytes a score); the first layer's fp32 bias is kept once.
    extra = training_activations(wavlm, fused) - training_activations(w2v, w2v_fused)
    assert extra == pytest.approx(12 * scores * 11 + 4 * scores, rel=0.01)
    assert training_activations(wavlm, fused) == training_activations(
        wavlm, replace(fused, flash_attention=False)
    )
    assert any("gated relative-position bias" in note for note in wavlm.notes)


@pytest.mark.parametrize("repo_id", [W2V_CTC, HUBERT, WAVLM])
def test_an_estimate_holds_the_weights_in_bf16(repo_id):
    config = bundled(repo_id)
    result = estimate(
        EstimateRequest(config=config, task="inference", tokens=10**6, precision="bf16"),
        default_catalog(),
    )
    params = architecture_from_config(config).params_total

    assert result.memory.weights == pytest.approx(2 * params, rel=0.01)
    assert (result.memory.kv_cache, result.memory.logits) == (0, 0)
    assert any("0.02 s" in w for w in result.warnings)


def test_fine_tuning_a_ctc_model_fits_a_small_gpu_at_20_seconds_a_clip():
    result = estimate(
        EstimateRequest(
            config=bundled(W2V_CTC),
            task="full_finetune",
            seq_len=1000,
            batch_size=8,
            tokens=10**7,
            precision="bf16",
        ),  # fmt: skip
        default_catalog(),
    )

    assert 1e9 < result.memory.total_bytes < 24e9


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"add_adapter": True}, "add_adapter"),
        ({"architectures": ["Wav2Vec2ForXVector"]}, "Wav2Vec2ForXVector"),
        ({"architectures": ["Wav2Vec2ForMaskedLM"]}, "Wav2Vec2ForMaskedLM"),
    ],
)
def test_what_it_cannot_count_is_refused(fields, words):
    with pytest.raises(ConfigError, match=words):
        architecture_from_config({**bundled(W2V_CTC), **fields})
