"""Recurrent and state-space hybrids: Google RecurrentGemma (Griffin) and IBM Bamba, counted
exactly; Zyphra's Zamba and Zamba2 refused with their reason
(advisor/engine/architecture/recurrent.py).

Each count is transformers 5.24's num_parameters() for the config, built on the meta device,
and the published figure where one exists: recurrentgemma-2b and -2b-it 2,682,862,080 (the
Hub's safetensors total); recurrentgemma-9b and -9b-it "9B" (arXiv:2404.07839; their Hub total,
9,628,553,216, also stores a copy of the tied head, 256,000 x 4,096); Bamba-9B "9B (9.78B)"
(model card).
"""

from __future__ import annotations

import pytest

from advisor import model_configs
from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config, known_families
from advisor.engine.architecture.registry import supported_model_types
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_targeted_linears
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload


def _config(repo: str) -> dict:
    return model_configs.find_bundled(repo).config


def _arch(repo: str):
    return architecture_from_config(_config(repo))


RELEASES = [
    ("google/recurrentgemma-2b", "recurrent_gemma", 2_682_862_080),
    ("google/recurrentgemma-2b-it", "recurrent_gemma", 2_682_862_080),
    ("google/recurrentgemma-9b", "recurrent_gemma", 8_579_977_216),
    ("google/recurrentgemma-9b-it", "recurrent_gemma", 8_579_977_216),
    ("ibm-ai-platform/Bamba-9B", "bamba", 9_780_235_392),
    ("ibm-ai-platform/Bamba-9B-v2", "bamba", 9_780_235_392),
]


@pytest.mark.parametrize(("repo", "family", "total"), RELEASES)
def test_each_release_counts_as_transformers_builds_it(repo, family, total):
    arch = _arch(repo)
    assert (arch.family, arch.params_total, arch.params_active) == (family, total, total)
    assert arch.exact


_RG = {
    "architectures": ["RecurrentGemmaForCausalLM"],
    "model_type": "recurrent_gemma",
    "hidden_size": 96,
    "intermediate_size": 250,  # the MLP takes half: 125
    "num_attention_heads": 4,
    "num_hidden_layers": 5,
    "num_key_value_heads": 1,
    "vocab_size": 1000,
    "attention_window_size": 64,
    "conv1d_width": 4,
}
_BA = {
    "architectures": ["BambaForCausalLM"],
    "model_type": "bamba",
    "hidden_size": 64,
    "intermediate_size": 150,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 5,
    "vocab_size": 1000,
    "attn_layer_indices": [1, 3],
    "mamba_n_heads": 8,
    "mamba_d_state": 16,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
}
_DROP = object()


@pytest.mark.parametrize(
    ("base", "extra", "total"),
    [
        (_RG, {}, 435_170),
        (_RG, {"attention_bias": True}, 435_314),
        (_RG, {"num_key_value_heads": 2}, 439_778),
        (_RG, {"num_key_value_heads": 4}, 448_994),
        (_RG, {"lru_width": 128}, 487_650),
        (_RG, {"conv1d_width": 3}, 434_786),
        (_RG, {"block_types": ["recurrent", "attention"]}, 424_994),
        (_RG, {"block_types": ["attention"]}, 394_466),
        (_RG, {"block_types": ["recurrent"]}, 445_346),
        (_RG, {"_block_types": ["attention"]}, 435_170),  # transformers 5 ignores it
        (_RG, {"tie_word_embeddings": False}, 531_170),
        (_RG, {"intermediate_size": 251}, 435_170),
        (_RG, {"num_hidden_layers": 7}, 564_694),
        (_RG, {"head_dim": 7}, 418_850),
        (_RG, {"hidden_size": 100, "lru_width": 96}, 453_322),
        (_BA, {}, 381_544),
        (_BA, {"attention_bias": True}, 381_928),
        (_BA, {"mlp_bias": True}, 383_364),
        (_BA, {"mamba_proj_bias": True}, 382_624),
        (_BA, {"mamba_conv_bias": False}, 381_064),
        (_BA, {"head_dim": 24}, 393_832),
        (_BA, {"mamba_n_groups": 2}, 388_168),
        (_BA, {"mamba_d_head": 16}, 381_544),
        (_BA, {"tie_word_embeddings": True}, 317_544),
        (_BA, {"attn_layer_indices": [0, 9]}, 397_344),  # index 9 is past the last layer
        (_BA, {"attn_layer_indices": _DROP}, 413_144),
        (_BA, {"mamba_expand": 3, "mamba_n_heads": 12}, 420_364),
        (_BA, {"num_key_value_heads": 4}, 389_736),
    ],
)
def test_flag_variants_count_as_transformers_builds_them(base, extra, total):
    config = {k: v for k, v in {**base, **extra}.items() if v is not _DROP}
    arch = architecture_from_config(config)
    assert (arch.params_total, arch.params_active) == (total, total)


def test_recurrentgemma_layers_follow_the_griffin_pattern_and_its_cache_stops_at_the_window():
    """recurrentgemma-2b: layers 2, 5, ..., 23 attend (8 of 26; one KV head of 256 over the
    last 2,048 tokens); the other 18 keep a conv window of 3 x 2,560 in bf16 and 2,560
    float32 values: 17.2 MB a sequence from 2,048 tokens on, whatever the length."""
    arch = _arch("google/recurrentgemma-2b")
    shape = shape_from_architecture(arch)
    assert (shape.softmax_layers, shape.linear_attention_layers) == (8, 18)
    (group,) = arch.attention_groups
    assert (group.layers, group.kv_heads, group.head_dim, group.window) == (8, 1, 256, 2048)
    state = 18 * (2560 * 3 * 2 + 2560 * 4)
    assert kv_cache_bytes(shape, workload(seq_len=1024, new_tokens=0)) == (
        8 * 2 * 256 * 1024 * 2 + state
    )
    for seq in (8192, 131072):
        assert kv_cache_bytes(shape, workload(seq_len=seq, new_tokens=0)) == (
            8 * 2 * 256 * 2048 * 2 + state
        )
    # Attention reads at most the window; the recurrent layers read nothing.
    assert shape.attention_reads(8192) == 8 * 2560 * (2 * 2048 - 2048**2 / 8192)
    long = training_flops_per_token(shape, workload(task="full_finetune", seq_len=131072))
    short = training_flops_per_token(shape, workload(task="full_finetune", seq_len=8192))
    assert long / short < 1.01


def test_recurrentgemma_lora_adapts_its_linear_modules_not_the_rg_lru_gates():
    arch = _arch("google/recurrentgemma-9b")
    shape = shape_from_architecture(arch)
    names = [lin.name for lin in lora_targeted_linears(shape, workload(task="lora"))]
    assert names == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "linear_y",
        "linear_x",
        "linear_out",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    # The gates are 16 diagonal blocks of 256 x 256 (with biases) per recurrent layer: counted
    # in the parameters and the FLOPs, but parameter tensors PEFT does not adapt.
    gates = [lin for lin in arch.layer_linears if lin.name.startswith("rg_lru.")]
    assert [(g.count_per_layer, g.in_features, g.module, g.layers) for g in gates] == [
        (16, 256, False, 26),
        (16, 256, False, 26),
    ]
    # The recurrent block keeps 18 lru_width-wide tensors per token for backward.
    assert arch.linear_attention.saved_per_token == 18 * 4096


def test_recurrentgemma_refuses_a_block_pattern_it_cannot_build():
    with pytest.raises(ConfigError) as err:
        architecture_from_config({**_RG, "block_types": ["recurrent", "mlp"]})
    assert err.value.field == "block_types"
    with pytest.raises(ConfigError) as err:
        architecture_from_config({**_RG, "lru_width": 98})
    assert err.value.field == "lru_width"


def test_bamba_caches_keys_and_values_in_three_layers_and_a_mamba_state_in_29():
    """Bamba-9B: layers 9, 18, 27 attend (8 KV heads x 128); the other 29 keep a Mamba-2
    state: a 4-wide window over 8,192 + 2 x 128 channels in bf16 and 128 heads x 64 x 128
    float32 values."""
    arch = _arch("ibm-ai-platform/Bamba-9B")
    shape = shape_from_architecture(arch)
    assert (shape.softmax_layers, shape.linear_attention_layers) == (3, 29)
    state = 29 * ((8192 + 2 * 128) * 4 * 2 + 128 * 64 * 128 * 4)
    for seq in (1024, 65536):
        assert kv_cache_bytes(shape, workload(seq_len=seq, new_tokens=0)) == (
            3 * 2 * 8 * 128 * seq * 2 + state
        )
    names = [lin.name for lin in lora_targeted_linears(shape, workload(task="lora"))]
    assert names == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "in_proj",
        "out_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    # zxbcdt (8,192 + 8,448 + 128), the scan output (8,192) and one group's rstd.
    assert arch.linear_attention.saved_per_token == 8192 + 8448 + 128 + 8192 + 2


@pytest.mark.parametrize(
    ("config", "name", "where"),
    [
        (
            {
                "model_type": "zamba2",
                "architectures": ["Zamba2ForCausalLM"],
                "num_mem_blocks": 2,
                "layers_block_type": ["mamba"] * 5 + ["hybrid", "mamba", "hybrid"],
            },
            "Zamba2",
            "2 shared attention blocks of weights at 2 depths",
        ),
        (
            {"architectures": ["Zamba2ForCausalLM"], "hidden_size": 2048},
            "Zamba2",
            "1 shared attention block of weights at several depths",
        ),
        (
            {"model_type": "zamba", "num_hidden_layers": 76},
            "Zamba",
            "1 shared attention block of weights at 12 depths",
        ),
    ],
)
def test_zamba_is_refused_with_the_reason(config, name, where):
    with pytest.raises(ConfigError) as refused:
        architecture_from_config(config)
    assert f"cannot count {name} (model_type" in refused.value.message
    assert where in refused.value.message
    assert refused.value.field == "model_type"


def test_the_refused_families_are_not_listed_as_counted():
    for family in ("zamba", "zamba2"):
        assert family not in known_families()
        assert family not in supported_model_types()
    assert {"recurrent_gemma", "bamba"} <= set(known_families())


@pytest.mark.parametrize(
    "repo", ["google/recurrentgemma-2b", "google/recurrentgemma-9b", "ibm-ai-platform/Bamba-9B"]
)
def test_bf16_inference_holds_two_bytes_a_parameter_and_a_small_cache(repo):
    config = _config(repo)
    result = estimate(
        EstimateRequest(config=config, task="inference", tokens=10**6), default_catalog()
    )
    params = architecture_from_config(config).params_total
    gpus = result.recommendation.num_gpus
    assert result.memory.weights * gpus == pytest.approx(2 * params, rel=0.01)
    assert result.memory.kv_cache < 0.5e9
