"""Gemma 3n (E2B, E4B; pre-trained and instruction-tuned): per-layer embeddings, AltUp, Laurel,
MatFormer widths, KV-shared layers, a MobileNet-V5 vision tower and a USM audio tower. Engine
1.14 refused model_type 'gemma3n'. Every count below is transformers 5's num_parameters on the
meta device (Gemma3nForConditionalGeneration with timm's mobilenetv5_300m_enc, or
Gemma3nForCausalLM), and the Hub totals are explained to the parameter
(advisor/model_configs/index.json)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine import estimate
from advisor.engine.activations import training_activations
from advisor.engine.architecture import architecture_from_config, architecture_from_hub
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_trainable_params
from advisor.engine.models import EstimateRequest, HubModelMetadata
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload

RELEASES = [
    # repo, transformers' count, the Hub's safetensors total (the -it releases' exact figure;
    # the pre-trained checkpoints store the same tensors)
    ("google/gemma-3n-E2B-it", 5_418_464_192, 5_439_438_272),
    ("google/gemma-3n-E2B", 5_418_464_192, 5_439_438_272),
    ("google/gemma-3n-E4B-it", 7_818_517_072, 7_849_978_192),
    ("google/gemma-3n-E4B", 7_818_517_072, 7_849_978_192),
]


def _config(repo: str) -> dict:
    return find_bundled(repo).config


def _shape(repo: str):
    return shape_from_architecture(architecture_from_config(_config(repo)))


def _text(repo: str) -> dict:
    return {**_config(repo)["text_config"], "architectures": ["Gemma3nForCausalLM"]}


@pytest.mark.parametrize(("repo", "params", "hub_total"), RELEASES)
def test_every_release_is_counted_and_its_hub_total_explained(repo, params, hub_total):
    """The checkpoints still store the k/v projections and k norms of the KV-shared layers
    (E2B 10 x 2,097,408, E4B 15 x 2,097,408), which transformers 5 does not build."""
    metadata = HubModelMetadata(
        repo_id=repo, safetensors_parameters={"BF16": hub_total}, config=_config(repo)
    )

    arch = architecture_from_hub(metadata)

    assert (arch.family, arch.params_total, arch.params_active) == ("gemma3n", params, params)
    assert arch.exact
    assert hub_total - params == (10 if "E2B" in repo else 15) * (2 * 2048 * 512 + 256)
    assert "key/value projections of the KV-shared layers" in arch.notes[-1]


@pytest.mark.parametrize(
    ("repo", "params"),
    [("google/gemma-3n-E2B-it", 4_435_182_688), ("google/gemma-3n-E4B-it", 6_835_235_568)],
)
def test_the_language_model_alone_counts_as_gemma3n_for_causal_lm(repo, params):
    arch = architecture_from_config(_text(repo))

    assert (arch.family, arch.params_total) == ("gemma3n_text", params)


def test_the_effective_size_is_the_language_model_without_its_embedding_tables():
    """Google: E2B runs with 'an effective memory load of just under 2 billion (1.91B)
    parameters' when the PLE table is cached off the accelerator and the towers are not
    loaded. That is the language model as the checkpoint stores it, less its token and
    per-layer embedding tables. transformers loads all of it on the GPU: the engine counts
    the whole model's weights."""
    text = architecture_from_config(_text("google/gemma-3n-E2B-it"))
    stored = text.params_total + sum(text.stored_extras.values())
    table = 262_144 * 30 * 256

    assert text.params_embedding == 262_400 * 2048 + table
    assert stored - text.params_embedding == 1_905_495_648  # "1.91B"
    assert architecture_from_config(_config("google/gemma-3n-E2B-it")).params_total > 5.4e9


def test_kv_shared_layers_cache_nothing_and_sliding_layers_keep_their_window():
    """E2B at 32,768 tokens: of the first 20 layers 16 sliding (512-token window) and 4 full
    cache 2 x 256 keys and values per head pair; the last 10 read them."""
    shape = _shape("google/gemma-3n-E2B-it")
    wl = workload(seq_len=32768, new_tokens=0)

    values = 16 * 2 * 2 * 256 * 512 + 4 * 2 * 2 * 256 * 32768

    assert kv_cache_bytes(shape, wl) == values * 2
    groups = [(g.layers, g.window, g.caches) for g in shape.attention_groups]
    assert groups == [(16, 512, True), (8, 512, False), (4, None, True), (2, None, False)]


def test_per_layer_embeddings_cost_memory_not_compute():
    """E4B's per-layer table (262,144 x 35 x 256) is an embedding; the projection of the
    embedded token to it, and each block's gate and projection, are matmuls."""
    shape = _shape("google/gemma-3n-E4B-it")
    table = 262_144 * 35 * 256

    assert shape.params_embedding == 262_400 * 2048 + table
    assert shape.flop_params == shape.params_total - table  # the tied head still multiplies
    per_layer = {
        lin.name: (lin.in_features, lin.out_features, shape.blocks_with(lin))
        for lin in shape.linears
    }
    assert per_layer["per_layer_input_gate"] == (2048, 256, 35)
    assert per_layer["per_layer_projection"] == (256, 2048, 35)
    assert per_layer["linear_left"] == (2048, 64, 35)  # Laurel
    assert per_layer["modality_router"] == (2048, 4, 35)  # AltUp
    assert per_layer["prediction_coefs"] == (4, 16, 35)
    assert per_layer["k_proj"] == (2048, 512, 20)  # the 15 KV-shared layers have none


def test_lora_adapts_q_in_every_layer_and_k_only_where_the_layer_caches():
    shape = _shape("google/gemma-3n-E2B-it")

    q = lora_trainable_params(shape, workload(task="lora", lora_rank=16, lora_targets=("q_proj",)))
    k = lora_trainable_params(shape, workload(task="lora", lora_rank=16, lora_targets=("k_proj",)))

    assert q == 16 * 30 * (2048 + 2048)
    assert k == 16 * 20 * (2048 + 512)


def _small(**change) -> dict:
    config = {
        "model_type": "gemma3n_text",
        "vocab_size": 1000,
        "vocab_size_per_layer_input": 600,
        "hidden_size": 96,
        "hidden_size_per_layer_input": 16,
        "intermediate_size": 200,
        "num_hidden_layers": 10,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 40,
        "laurel_rank": 8,
        "altup_num_inputs": 4,
        "num_kv_shared_layers": 5,
        "sliding_window": 32,
    }
    return {**config, **change}


@pytest.mark.parametrize(
    ("change", "params"),
    [
        ({}, 1_281_768),
        ({"attention_bias": True}, 1_285_128),
        ({"tie_word_embeddings": False}, 1_377_768),
        ({"num_key_value_heads": 4}, 1_358_568),
        ({"num_key_value_heads": 1, "head_dim": 24}, 1_104_888),
        ({"num_kv_shared_layers": 0}, 1_358_768),
        (
            {
                "num_kv_shared_layers": 8,
                "layer_types": ["full_attention"] + ["sliding_attention"] * 9,
            },
            1_235_568,
        ),
        ({"altup_num_inputs": 1}, 1_222_812),
        ({"altup_num_inputs": 3}, 1_261_936),
        ({"laurel_rank": 1}, 1_268_328),
        ({"intermediate_size": [100, 200, 300, 200, 100, 64, 64, 64, 500, 200]}, 1_221_864),
        ({"layer_types": ["sliding_attention", "full_attention"] * 5}, 1_281_768),
        ({"hidden_size_per_layer_input": 7, "vocab_size_per_layer_input": 1000}, 1_229_839),
        ({"num_hidden_layers": 11, "num_kv_shared_layers": 3}, 1_433_304),
    ],
)
def test_flag_variants_count_as_transformers_builds_them(change, params):
    assert architecture_from_config(_small(**change)).params_total == params


def test_matformer_widths_give_each_block_its_own_mlp():
    shape = shape_from_architecture(
        architecture_from_config(
            _small(intermediate_size=[100, 200, 300, 200, 100, 64, 64, 64, 500, 200])
        )
    )

    widths = {
        lin.out_features: shape.blocks_with(lin) for lin in shape.linears if lin.name == "up_proj"
    }
    assert widths == {64: 3, 100: 2, 200: 3, 300: 1, 500: 1}
    assert shape.intermediate_size == 500


def _composite(**change) -> dict:
    config = {
        **_config("google/gemma-3n-E2B-it"),
        "text_config": {k: v for k, v in _small().items() if k != "model_type"},
    }
    for key, value in change.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    return config


@pytest.mark.parametrize(
    ("change", "params"),
    [
        ({}, 977_567_304),
        ({"tie_word_embeddings": False}, 977_663_304),
        (
            {
                "audio_config": {
                    "hidden_size": 96,
                    "conf_num_hidden_layers": 2,
                    "conf_num_attention_heads": 3,
                    "conf_conv_kernel_size": 3,
                    "input_feat_size": 80,
                    "sscp_conv_channel_size": [16, 8],
                    "vocab_size": 50,
                }
            },
            296_347_152,
        ),
        (
            {
                "audio_config": {
                    "sscp_conv_kernel_size": [[5, 3], [3, 5]],
                    "sscp_conv_stride_size": [[2, 3], [1, 2]],
                }
            },
            977_051_976,
        ),
        ({"vision_config": {"architecture": "mobilenetv5_base", "vocab_size": 64}}, 763_908_296),
        ({"vision_config": {"hidden_size": 1024}}, 977_335_880),
    ],
)
def test_tower_variants_count_as_transformers_builds_them(change, params):
    assert architecture_from_config(_composite(**change)).params_total == params


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_kv_shared_layers": 6}, "num_kv_shared_layers"),  # no full layer left to read
        ({"num_kv_shared_layers": 12}, "num_kv_shared_layers"),
        ({"intermediate_size": [64] * 3}, "intermediate_size"),
        ({"activation_sparsity_pattern": [0.95] * 3}, "activation_sparsity_pattern"),
        ({"layer_types": ["full_attention"] * 9}, "layer_types"),
        ({"num_attention_heads": 5}, "num_attention_heads"),
    ],
)
def test_a_config_transformers_refuses_is_refused_naming_its_field(change, field):
    with pytest.raises(ConfigError) as raised:
        architecture_from_config(_small(**change))

    assert raised.value.field == field


@pytest.mark.parametrize(
    "vision", [{"architecture": "resnet50"}, {"model_args": {"depth": 3}}], ids=str
)
def test_a_vision_tower_the_engine_cannot_count_is_refused(vision):
    with pytest.raises(ConfigError) as raised:
        architecture_from_config(_composite(vision_config=vision))

    assert raised.value.field == "vision_config"
    assert "timm architecture" in str(raised.value)


def test_an_e4b_inference_request_holds_all_its_bf16_weights_on_the_gpu():
    """transformers' default load puts the per-layer embedding table on the GPU too."""
    result = estimate(
        EstimateRequest(
            model_id="google/gemma-3n-E4B-it",
            config=_config("google/gemma-3n-E4B-it"),
            task="inference",
            tokens=10**6,
        ),
        default_catalog(),
    )

    assert result.params_total == 7_818_517_072
    assert result.recommendation is not None
    assert result.recommendation.fits
    # On one GPU (the cheapest option splits it over two T4s with tensor parallelism).
    one_gpu = next(o for o in result.options if o.strategy == "single" and o.fits)
    assert one_gpu.memory.weights == pytest.approx(2 * 7_818_517_072, rel=0.01)


def test_altup_keeps_four_copies_of_the_hidden_state_for_backward():
    """With checkpointing a layer keeps its input: under AltUp that is four copies of the
    hidden state, so the kept inputs are four times a plain model's of the same width."""
    config = find_bundled("google/gemma-3n-E4B-it").config
    shape = shape_from_architecture(architecture_from_config(config))
    assert shape.residual_streams == 4
    request = EstimateRequest(
        config=config,
        task="lora",
        seq_len=4096,
        micro_batch=1,
        batch_size=1,
        gradient_checkpointing=True,
        tokens=10**6,
    )
    wl = build_workload(request, shape)
    one_stream = replace(shape, residual_streams=1)
    kept = training_activations(shape, wl) - training_activations(one_stream, wl)
    # 35 layers x 4,096 tokens x 2,048 wide x 2 bytes x 3 more copies, and one layer's
    # predictions and corrections on top.
    inputs = shape.total_layers * 4096 * 2048 * 2 * 3
    assert inputs < kept < 1.2 * inputs
