"""Gemma 4 (E2B, E4B, 26B-A4B, 31B): layers that differ in head size, key/value heads, window and
caching, per-layer embeddings, a dense MLP beside the experts. Engine 1.12 refused model_type
'gemma4'; the counts below equal transformers' num_parameters for each release, and the Hub's
totals are explained to the parameter (advisor/model_configs/index.json)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine.architecture import architecture_from_config, architecture_from_hub
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_trainable_params
from advisor.engine.models import HubModelMetadata
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.test_memory import workload

RELEASES = [
    # repo, parameters, the Hub's safetensors total
    ("google/gemma-4-E2B-it", 5_104_297_504, 5_123_178_051),
    ("google/gemma-4-E4B-it", 7_941_100_832, 7_996_156_490),
    ("google/gemma-4-26B-A4B-it", 25_805_933_872, 25_805_936_206),
    ("google/gemma-4-31B-it", 31_273_086_512, 31_273_088_876),
]


def _config(repo: str) -> dict:
    return find_bundled(repo).config


def _shape(repo: str):
    return shape_from_architecture(architecture_from_config(_config(repo)))


@pytest.mark.parametrize(("repo", "params", "hub_total"), RELEASES)
def test_every_release_is_counted_and_its_hub_total_explained(repo, params, hub_total):
    """The Hub's totals add a scalar buffer per layer, the large models' vision standardisation
    buffers, and in the E models the k/v projections of the KV-shared layers, which the
    checkpoints still carry and transformers does not load."""
    metadata = HubModelMetadata(
        repo_id=repo, safetensors_parameters={"BF16": hub_total}, config=_config(repo)
    )

    arch = architecture_from_hub(metadata)

    assert (arch.family, arch.params_total) == ("gemma4", params)
    assert arch.exact
    assert "because the checkpoint also stores a scalar buffer per layer" in arch.notes[-1]


def test_the_language_model_alone_and_the_moe_active_count_match_the_card():
    """Google's card: 31B 30.7B, 26B-A4B 25.2B total and 3.8B active, without the vision
    tower."""
    text_31b = {**_config("google/gemma-4-31B-it")["text_config"], "model_type": "gemma4_text"}
    text_moe = {**_config("google/gemma-4-26B-A4B-it")["text_config"], "model_type": "gemma4_text"}

    dense, moe = architecture_from_config(text_31b), architecture_from_config(text_moe)

    assert dense.params_total == 30_697_345_280
    assert (moe.params_total, moe.params_active) == (25_233_141_760, 3_822_530_560)


def test_kv_shared_layers_and_wider_full_layers_shape_the_cache():
    """E4B at 32,768 tokens: 20 sliding layers of 2 x 256 (512-token window) and 4 full layers
    of 2 x 512 cache keys and values; its last 18 layers reuse them and cache nothing."""
    shape = _shape("google/gemma-4-E4B-it")
    wl = workload(seq_len=32768, new_tokens=0)

    values = 20 * 2 * 2 * 256 * 512 + 4 * 2 * 2 * 512 * 32768

    assert kv_cache_bytes(shape, wl) == values * 2
    caching = sum(g.layers for g in shape.attention_groups if g.caches)
    assert (caching, shape.num_layers) == (24, 42)


def test_k_eq_v_full_layers_still_cache_keys_and_values():
    """31B's full layers have no v_proj (values are their keys before the norm and rotary
    embedding) but cache both: 4 heads x 512, twice, per token."""
    shape = _shape("google/gemma-4-31B-it")
    wl = workload(seq_len=32768, new_tokens=0)

    values = 50 * 2 * 16 * 256 * 1024 + 10 * 2 * 4 * 512 * 32768

    assert kv_cache_bytes(shape, wl) == values * 2
    assert not any(lin.name == "v_proj" and lin.out_features == 4 * 512 for lin in shape.linears)


def test_lora_adapts_each_layer_kind_with_its_own_widths():
    """q_proj is 32 x 256 wide in the 50 sliding layers and 32 x 512 in the 10 full ones."""
    shape = _shape("google/gemma-4-31B-it")
    wl = workload(task="lora", lora_rank=16, lora_targets=("q_proj",))

    assert lora_trainable_params(shape, wl) == 16 * (50 * (5376 + 8192) + 10 * (5376 + 16384))


def test_per_layer_embeddings_cost_memory_not_compute():
    """E4B's per-layer tables (262,144 x 42 x 256) are embeddings: in the weights, not in the
    FLOPs per token; the gates and projections that use them are counted in each block."""
    shape = _shape("google/gemma-4-E4B-it")
    table = 262_144 * 42 * 256

    assert shape.params_embedding == 262_144 * 2560 + table
    assert shape.flop_params == shape.params_total - table  # the tied head still multiplies
    gates = [lin for lin in shape.linears if lin.name == "per_layer_input_gate"]
    assert [(g.in_features, g.out_features, shape.blocks_with(g)) for g in gates] == [
        (2560, 256, 42)
    ]


def test_attention_flops_follow_each_layer_kind():
    shape = _shape("google/gemma-4-31B-it")
    wl = workload(task="full_finetune", seq_len=32768, new_tokens=0)

    attention = training_flops_per_token(shape, wl) - training_flops_per_token(
        shape, replace(wl, seq_len=0)
    )

    reads = 50 * 32 * 256 * (2 * 1024 - 1024 * 1024 / 32768) + 10 * 32 * 512 * 32768
    assert attention == pytest.approx(12 * reads)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_kv_shared_layers": 60}, "num_kv_shared_layers"),
        ({"layer_types": ["full_attention"] * 59}, "layer_types"),
        ({"enable_moe_block": True, "num_experts": 8, "top_k_experts": 9}, "top_k_experts"),
    ],
)
def test_a_config_that_cannot_describe_a_gemma4_is_refused_naming_its_field(change, field):
    config = _config("google/gemma-4-31B-it")
    text = {**config["text_config"], "moe_intermediate_size": 704, **change}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**config, "text_config": text})

    assert raised.value.field == field
