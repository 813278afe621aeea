"""Mamba-2 and short-convolution hybrids: IBM Granite 4.0, NVIDIA Nemotron-H, TII Falcon-H1,
Liquid LFM2 (advisor/engine/architecture/hybrids.py, nemotron_h.py, mamba2_mixer.py).

Each count below is transformers 5.24's num_parameters() for the config, built on the meta
device; where a published total exists it is the same number (Hub safetensors totals or GGUF
parameter counts: granite-4.0-h-small 32,207,337,984, granite-4.0-micro 3,402,836,480,
granite-4.0-h-micro 3,191,396,096, NVIDIA-Nemotron-Nano-9B-v2 8,888,227,328,
NVIDIA-Nemotron-3-Nano-30B-A3B 31,577,937,344, LFM2-350M 354,483,968, LFM2-700M 742,489,344,
LFM2-1.2B 1,170,340,608, LFM2-2.6B 2,569,272,320).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine.activations import training_activations
from advisor.engine.architecture import architecture_from_config
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes
from advisor.engine.shape import shape_from_architecture
from tests.engine.test_memory import workload

_M, _A = "mamba", "attention"


def _granite(**kw) -> dict:
    base = {
        "model_type": "granitemoehybrid",
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "num_hidden_layers": 40,
        "vocab_size": 100352,
        "tie_word_embeddings": True,
        "mamba_d_state": 128,
        "mamba_n_groups": 1,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "layer_types": [_A if i in (5, 15, 25, 35) else _M for i in range(40)],
    }
    return {**base, **kw}


def _nemotron(pattern: str, **kw) -> dict:
    base = {
        "model_type": "nemotron_h",
        "architectures": ["NemotronHForCausalLM"],
        "hybrid_override_pattern": pattern,
        "num_hidden_layers": len(pattern),
        "vocab_size": 131072,
        "num_key_value_heads": 8,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "mamba_head_dim": 64,
        "tie_word_embeddings": False,
    }
    return {**base, **kw}


def _falcon(**kw) -> dict:
    base = {
        "model_type": "falcon_h1",
        "architectures": ["FalconH1ForCausalLM"],
        "num_key_value_heads": 2,
        "head_dim": 128,
        "tie_word_embeddings": False,
        "mamba_d_state": 256,
        "mamba_n_groups": 1,
        "mamba_d_conv": 4,
        "mamba_rms_norm": False,
    }
    return {**base, **kw}


def _lfm2(**kw) -> dict:
    base = {
        "model_type": "lfm2",
        "architectures": ["Lfm2ForCausalLM"],
        "vocab_size": 65536,
        "num_key_value_heads": 8,
        "conv_L_cache": 3,
        "conv_bias": False,
        "tie_embedding": True,
        "full_attn_idxs": [2, 5, 8, 10, 12, 14],
    }
    return {**base, **kw}


P52 = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
NANO_V2 = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
NANO_V3 = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"

CONFIGS = {
    "granite-4.0-h-small": _granite(
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=768,
        shared_intermediate_size=1536,
        num_local_experts=72,
        num_experts_per_tok=10,
        mamba_n_heads=128,
        mamba_d_head=64,
    ),
    "granite-4.0-h-tiny": _granite(
        hidden_size=1536,
        num_attention_heads=12,
        num_key_value_heads=4,
        intermediate_size=512,
        shared_intermediate_size=1024,
        num_local_experts=64,
        num_experts_per_tok=6,
        mamba_n_heads=48,
        mamba_d_head=64,
    ),
    "granite-4.0-h-micro": _granite(
        hidden_size=2048,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        shared_intermediate_size=8192,
        num_local_experts=0,
        num_experts_per_tok=0,
        mamba_n_heads=64,
        mamba_d_head=64,
    ),
    "granite-4.0-micro": _granite(
        hidden_size=2560,
        num_attention_heads=40,
        num_key_value_heads=8,
        intermediate_size=8192,
        shared_intermediate_size=8192,
        num_local_experts=0,
        num_experts_per_tok=0,
        mamba_n_heads=128,
        mamba_d_head=40,
        mamba_d_state=256,
        layer_types=[_A] * 40,
    ),
    "Nemotron-H-8B-Base-8K": _nemotron(
        P52,
        hidden_size=4096,
        num_attention_heads=32,
        attention_head_dim=128,
        intermediate_size=21504,
        mamba_num_heads=128,
    ),
    "NVIDIA-Nemotron-Nano-9B-v2": _nemotron(
        NANO_V2,
        hidden_size=4480,
        num_attention_heads=40,
        head_dim=128,
        intermediate_size=15680,
        mamba_num_heads=128,
        mamba_head_dim=80,
    ),
    "NVIDIA-Nemotron-3-Nano-30B-A3B": _nemotron(
        NANO_V3,
        hidden_size=2688,
        num_attention_heads=32,
        num_key_value_heads=2,
        head_dim=128,
        intermediate_size=1856,
        moe_intermediate_size=1856,
        moe_shared_expert_intermediate_size=3712,
        n_routed_experts=128,
        num_experts_per_tok=6,
        mamba_num_heads=64,
    ),
    "Falcon-H1-3B": _falcon(
        hidden_size=2560,
        num_hidden_layers=32,
        num_attention_heads=10,
        intermediate_size=6144,
        vocab_size=65536,
        mamba_n_heads=32,
        mamba_d_head=128,
        mamba_d_ssm=4096,
    ),
    "Falcon-H1-7B": _falcon(
        hidden_size=3072,
        num_hidden_layers=44,
        num_attention_heads=12,
        intermediate_size=12288,
        vocab_size=130048,
        mamba_n_heads=24,
        mamba_d_head=128,
        mamba_d_ssm=3072,
    ),
    "LFM2-350M": _lfm2(
        hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, block_ff_dim=6656
    ),
    "LFM2-1.2B": _lfm2(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        block_ff_dim=12288,
        intermediate_size=8192,
    ),
    "LFM2-2.6B": _lfm2(
        hidden_size=2048,
        num_hidden_layers=30,
        num_attention_heads=32,
        block_ff_dim=10752,
        block_auto_adjust_ff_dim=False,
        full_attn_idxs=[2, 5, 9, 13, 17, 21, 24, 27],
    ),
}


# Two plain decoders added beside them (advisor/engine/architecture/families/).
CONFIGS["EXAONE-4.0-32B"] = {
    "model_type": "exaone4",
    "architectures": ["Exaone4ForCausalLM"],
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 27392,
    "vocab_size": 102400,
    "tie_word_embeddings": False,
}
CONFIGS["Apertus-8B-2509"] = {
    "model_type": "apertus",
    "architectures": ["ApertusForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 21504,
    "vocab_size": 131072,
    "tie_word_embeddings": False,
}


def _arch(name: str):
    return architecture_from_config(CONFIGS[name])


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        ("granite-4.0-h-small", 32_207_337_984, 8_803_121_664),
        ("granite-4.0-h-tiny", 6_939_037_248, 1_465_470_528),
        ("granite-4.0-h-micro", 3_191_396_096, 3_191_396_096),
        ("granite-4.0-micro", 3_402_836_480, 3_402_836_480),
        ("Nemotron-H-8B-Base-8K", 8_100_852_736, 8_100_852_736),
        ("NVIDIA-Nemotron-Nano-9B-v2", 8_888_227_328, 8_888_227_328),
        ("NVIDIA-Nemotron-3-Nano-30B-A3B", 31_577_937_344, 3_580_073_408),
        ("Falcon-H1-3B", 3_149_256_192, 3_149_256_192),
        ("Falcon-H1-7B", 7_585_513_568, 7_585_513_568),
        ("LFM2-350M", 354_483_968, 354_483_968),
        ("LFM2-1.2B", 1_170_340_608, 1_170_340_608),
        ("LFM2-2.6B", 2_569_272_320, 2_569_272_320),
        ("EXAONE-4.0-32B", 32_003_216_384, 32_003_216_384),
        ("Apertus-8B-2509", 8_053_338_176, 8_053_338_176),
    ],
)
def test_each_release_counts_as_transformers_builds_it(name, total, active):
    arch = _arch(name)
    assert (arch.params_total, arch.params_active) == (total, active)


def test_granite_h_small_caches_keys_and_values_in_its_four_attention_layers_only():
    """4 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes per token, plus per sequence the 36
    Mamba-2 layers' state: a 4-wide window over 8,192 + 2 x 128 channels in bf16 and 128 heads
    of 64 x 128 in float32."""
    shape = shape_from_architecture(_arch("granite-4.0-h-small"))
    wl = workload(batch_size=4, seq_len=8192, new_tokens=512)
    state = (8192 + 256) * 4 * 2 + 128 * 64 * 128 * 4
    expected = 4 * (4 * (8192 + 512) * 2 * 8 * 128 * 2 + 36 * state)
    assert kv_cache_bytes(shape, wl) == expected


def test_nemotron_h_blocks_hold_a_mixer_or_an_mlp():
    """Nemotron-H-8B: 4 of 52 layers attend, 24 scan, 24 are an MLP alone. Only the 4 cache
    keys and values; only they keep eager attention's scores."""
    arch = _arch("Nemotron-H-8B-Base-8K")
    shape = shape_from_architecture(arch)
    assert (arch.num_layers, shape.softmax_layers) == (52, 4)
    assert (arch.linear_attention.layers, arch.linear_attention.mlp_only_layers) == (24, 24)
    wl = workload(seq_len=4096, new_tokens=0)
    state = (8192 + 2 * 8 * 128) * 4 * 2 + 128 * 64 * 128 * 4
    assert kv_cache_bytes(shape, wl) == 4 * 4096 * 2 * 8 * 128 * 2 + 24 * state
    eager = workload(task="full_finetune", seq_len=4096, new_tokens=0, flash_attention=False)
    flash = replace(eager, flash_attention=True)
    growth = training_activations(shape, eager) - training_activations(shape, flash)
    one_layer = replace(shape, linear_attention=None, num_layers=1)
    per_layer_scores = training_activations(one_layer, eager) - training_activations(
        one_layer, flash
    )
    assert growth == pytest.approx(4 * per_layer_scores)


def test_falcon_h1_layers_attend_and_scan_side_by_side():
    """Every Falcon-H1-7B layer keeps a KV cache (2 KV heads x 128) and a Mamba-2 state."""
    arch = _arch("Falcon-H1-7B")
    shape = shape_from_architecture(arch)
    assert shape.softmax_layers == arch.linear_attention.layers == 44
    wl = workload(seq_len=4096, new_tokens=0)
    state = (3072 + 2 * 256) * 4 * 2 + 24 * 128 * 256 * 4
    assert kv_cache_bytes(shape, wl) == 44 * (4096 * 2 * 2 * 128 * 2 + state)


def test_lfm2_convolution_layers_keep_only_their_window():
    shape = shape_from_architecture(_arch("LFM2-1.2B"))
    wl = workload(seq_len=4096, new_tokens=0)
    assert kv_cache_bytes(shape, wl) == 6 * 4096 * 2 * 8 * 64 * 2 + 10 * 2048 * 3 * 2


def test_lfm2_feed_forward_width_follows_the_configuration_rule():
    """block_ff_dim overrides intermediate_size; two thirds of it, rounded up to 256."""
    assert _arch("LFM2-350M").intermediate_size == 4608
    assert _arch("LFM2-1.2B").intermediate_size == 8192
    assert _arch("LFM2-2.6B").intermediate_size == 10752


def test_malformed_layer_lists_are_refused_by_name():
    with pytest.raises(ConfigError) as err:
        architecture_from_config({**CONFIGS["granite-4.0-h-micro"], "layer_types": ["mamba"] * 39})
    assert err.value.field == "layer_types"
    with pytest.raises(ConfigError) as err:
        architecture_from_config(
            {**CONFIGS["Nemotron-H-8B-Base-8K"], "hybrid_override_pattern": "MX"}
        )
    assert err.value.field == "hybrid_override_pattern"
