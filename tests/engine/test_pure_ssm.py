"""Pure state-space models and Jamba: Mamba, Falcon Mamba, Mamba-2 (Mamba-Codestral) and AI21
Jamba (advisor/engine/architecture/ssm.py).

Each count is transformers 5.24's num_parameters() for the config, built on the meta device,
and the published figure where one exists: mamba-130m/370m/790m/1.4b/2.8b-hf 129,135,360,
371,516,416, 793,204,224, 1,372,178,432 and 2,768,345,600 (exact counts printed in public
code); falcon-mamba-7b 7.27B (Hub size); Mamba-Codestral-7B-v0.1 7,285,403,648 (Mistral AI's
announcement); Jamba-v0.1 and Jamba-1.5-Mini 52B total, 12B active (arXiv:2403.19887,
arXiv:2408.12570); Jamba-1.5-Large 398B total, 94B active.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor import model_configs
from advisor.engine import estimate
from advisor.engine.activations import inference_activations, training_activations
from advisor.engine.architecture import architecture_from_config
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
    ("state-spaces/mamba-130m-hf", "mamba", 129_135_360, 129_135_360),
    ("state-spaces/mamba-370m-hf", "mamba", 371_516_416, 371_516_416),
    ("state-spaces/mamba-790m-hf", "mamba", 793_204_224, 793_204_224),
    ("state-spaces/mamba-1.4b-hf", "mamba", 1_372_178_432, 1_372_178_432),
    ("state-spaces/mamba-2.8b-hf", "mamba", 2_768_345_600, 2_768_345_600),
    ("tiiuae/falcon-mamba-7b", "falcon_mamba", 7_272_665_088, 7_272_665_088),
    ("mistralai/Mamba-Codestral-7B-v0.1", "mamba2", 7_285_403_648, 7_285_403_648),
    ("ai21labs/Jamba-v0.1", "jamba", 51_570_323_328, 12_110_311_296),
    ("ai21labs/AI21-Jamba-1.5-Mini", "jamba", 51_570_323_328, 12_110_311_296),
    ("ai21labs/AI21-Jamba-1.5-Large", "jamba", 398_555_145_696, 94_149_338_592),
]


@pytest.mark.parametrize(("repo", "family", "total", "active"), RELEASES)
def test_each_release_counts_as_transformers_builds_it(repo, family, total, active):
    arch = _arch(repo)
    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active)
    assert arch.exact


_M1 = {
    "architectures": ["MambaForCausalLM"],
    "model_type": "mamba",
    "hidden_size": 96,  # intermediate_size 2 x 96 and time_step_rank ceil(96 / 16) by default
    "num_hidden_layers": 3,
    "vocab_size": 1000,
    "state_size": 16,
    "conv_kernel": 4,
}
_FM = {
    **_M1,
    "architectures": ["FalconMambaForCausalLM"],
    "model_type": "falcon_mamba",
    "intermediate_size": 160,
    "time_step_rank": 9,
    "expand": 16,
    "tie_word_embeddings": False,
}
_M2 = {
    "architectures": ["Mamba2ForCausalLM"],
    "model_type": "mamba2",
    "hidden_size": 64,
    "num_heads": 8,
    "head_dim": 16,
    "n_groups": 2,
    "state_size": 16,
    "num_hidden_layers": 3,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
}
_J = {
    "architectures": ["JambaForCausalLM"],
    "model_type": "jamba",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 8,
    "vocab_size": 500,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "mamba_dt_rank": 5,
    "attn_layer_period": 4,
    "attn_layer_offset": 1,
}
_DROP = object()


@pytest.mark.parametrize(
    ("base", "extra", "total", "active"),
    [
        (_M1, {}, 300_864, 300_864),
        (_M1, {"intermediate_size": 192}, 300_864, 300_864),
        (_M1, {"intermediate_size": _DROP, "expand": 3}, 403_104, 403_104),
        (_M1, {"intermediate_size": 200}, 309_384, 309_384),  # a saved width wins
        (_M1, {"use_bias": True}, 302_304, 302_304),
        (_M1, {"use_conv_bias": False}, 300_288, 300_288),
        (_M1, {"time_step_rank": "auto"}, 300_864, 300_864),
        (_M1, {"time_step_rank": 7}, 302_016, 302_016),
        (_M1, {"state_size": 5}, 281_856, 281_856),
        (_M1, {"conv_kernel": 3}, 300_288, 300_288),
        (_M1, {"tie_word_embeddings": False}, 396_864, 396_864),
        (
            _M1,
            {"hidden_size": 100, "intermediate_size": _DROP, "time_step_rank": "auto"},
            321_800,
            321_800,
        ),
        (_FM, {}, 365_664, 365_664),  # its B, C and dt norms are weightless
        (_FM, {"tie_word_embeddings": _DROP}, 269_664, 269_664),  # tied by default
        (_FM, {"use_bias": True, "use_conv_bias": False}, 366_432, 366_432),
        (_FM, {"intermediate_size": _DROP, "expand": 2}, 400_320, 400_320),
        (_M2, {}, 219_144, 219_144),
        (_M2, {"tie_word_embeddings": True}, 155_144, 155_144),
        (_M2, {"use_bias": True}, 220_320, 220_320),
        (_M2, {"use_conv_bias": False}, 218_568, 218_568),
        (_M2, {"n_groups": 1}, 212_520, 212_520),
        (_M2, {"conv_kernel": 2}, 217_992, 217_992),
        (_M2, {"expand": 3, "num_heads": 12}, 257_964, 257_964),
        (_M2, {"intermediate_size": 77}, 219_144, 219_144),  # the mixer ignores it
        (_M2, {"head_dim": _DROP, "num_heads": 2}, 217_938, 217_938),  # head_dim 64
        (_J, {}, 656_926, 509_470),
        (_J, {"tie_word_embeddings": True}, 624_926, 477_470),
        (_J, {"mamba_dt_rank": "auto"}, 655_384, 507_928),
        (_J, {"mamba_proj_bias": True, "mamba_conv_bias": False}, 658_078, 510_622),
        (_J, {"num_experts": 1}, 434_718, 434_718),
        (_J, {"expert_layer_period": 1, "expert_layer_offset": 0}, 879_134, 584_222),
        (_J, {"num_key_value_heads": 4}, 665_118, 517_662),
        (_J, {"mamba_d_state": 7, "mamba_d_conv": 3, "mamba_expand": 3}, 723_250, 575_794),
        (_J, {"attn_layer_period": 1, "attn_layer_offset": 0}, 533_056, 385_600),
        (_J, {"num_experts_per_tok": 1}, 656_926, 435_742),
        (_J, {"num_hidden_layers": 7}, 549_881, 439_289),
        (_J, {"head_dim": 24}, 669_214, 521_758),
    ],
)
def test_flag_variants_count_as_transformers_builds_them(base, extra, total, active):
    config = {k: v for k, v in {**base, **extra}.items() if v is not _DROP}
    arch = architecture_from_config(config)
    assert (arch.params_total, arch.params_active) == (total, active)


def test_mamba2_heads_must_tile_the_inner_width():
    with pytest.raises(ConfigError) as err:
        architecture_from_config({**_M2, "num_heads": 7})
    assert err.value.field == "num_heads"
    with pytest.raises(ConfigError) as err:  # head_dim defaults to 64: 8 x 64 != 128
        architecture_from_config({k: v for k, v in _M2.items() if k != "head_dim"})
    assert err.value.field == "num_heads"


def test_pure_ssm_keeps_no_kv_cache_only_its_state_whatever_the_length():
    """falcon-mamba-7b: per sequence and layer a 4-wide window over 8,192 channels in bf16 and
    8,192 x 16 SSM values in float32; 64 layers, 37.7 MB a sequence at any length."""
    shape = shape_from_architecture(_arch("tiiuae/falcon-mamba-7b"))
    assert shape.softmax_layers == 0
    state = 64 * (8192 * 4 * 2 + 8192 * 16 * 4)
    for seq in (512, 131072):
        assert kv_cache_bytes(shape, workload(seq_len=seq, batch_size=3)) == 3 * state
    # Mamba-Codestral: conv over 8,192 + 2 x 8 x 128 channels, 128 heads x 64 x 128 state.
    codestral = shape_from_architecture(_arch("mistralai/Mamba-Codestral-7B-v0.1"))
    per_layer = (8192 + 2 * 8 * 128) * 4 * 2 + 128 * 64 * 128 * 4
    assert kv_cache_bytes(codestral, workload(seq_len=65536)) == 64 * per_layer


def test_pure_ssm_is_charged_no_attention_flops_or_scores():
    shape = shape_from_architecture(_arch("state-spaces/mamba-2.8b-hf"))
    assert shape.attention_reads(8192) == 0
    short = training_flops_per_token(shape, workload(task="full_finetune", seq_len=512))
    long = training_flops_per_token(shape, workload(task="full_finetune", seq_len=32768))
    assert short == long == 6 * shape.flop_params
    # Eager prefill keeps no score matrix; only the per-token working set grows.
    eager = workload(seq_len=8192, flash_attention=False)
    assert inference_activations(shape, eager) == inference_activations(
        shape, replace(eager, flash_attention=True)
    )


def test_mamba_blocks_keep_what_mamba_inner_fn_saves_and_no_mlp():
    """mamba-130m: xz (2 x 1,536), x_dbl (48 + 32), B and C (32), the scan output (1,536) and
    the float32 chunk states (1,536 x 32 x 4 bytes per 2,048 tokens = 48 16-bit units)."""
    arch = _arch("state-spaces/mamba-130m-hf")
    hybrid = arch.linear_attention
    assert hybrid.saved_per_token == 3 * 1536 + 48 + 4 * 16 + 48
    assert (hybrid.layers, hybrid.separate_mlp, hybrid.mlp_only_layers) == (24, True, 0)
    assert hybrid.fp32_residual
    shape = shape_from_architecture(arch)
    wl = workload(task="full_finetune", seq_len=1024, flash_attention=True)
    # Two RMSNorm inputs would be a block with an MLP: this one has one, fp32 (upcast).
    per_token = (4 * 768 + 2 * 768 + 2 * hybrid.saved_per_token) * 24
    stream = 2 * 1024 * 768 * 4
    assert training_activations(shape, wl) == pytest.approx(per_token * 1024 + stream)


def test_checkpointed_block_inputs_are_float32_even_under_a_16_bit_base():
    """residual_in_fp32: LoRA on a bf16 Mamba checkpoints float32 block inputs."""
    shape = shape_from_architecture(_arch("tiiuae/falcon-mamba-7b"))
    wl = workload(task="lora", seq_len=4096, gradient_checkpointing=True)
    plain = replace(shape, linear_attention=replace_fp32(shape.linear_attention, False))
    assert training_activations(shape, wl) - training_activations(plain, wl) == pytest.approx(
        (64 + 2) * 4096 * 4096 * 2
    )


def replace_fp32(hybrid, value: bool):
    return hybrid.model_copy(update={"fp32_residual": value})


def test_lora_all_linear_adapts_the_mixer_projections():
    mamba = shape_from_architecture(_arch("state-spaces/mamba-130m-hf"))
    names = [lin.name for lin in lora_targeted_linears(mamba, workload(task="lora"))]
    assert names == ["in_proj", "x_proj", "dt_proj", "out_proj"]
    codestral = shape_from_architecture(_arch("mistralai/Mamba-Codestral-7B-v0.1"))
    names = [lin.name for lin in lora_targeted_linears(codestral, workload(task="lora"))]
    assert names == ["in_proj", "out_proj"]
    # Mamba-2 reports its SSM heads and groups where the tensor-parallel split reads heads.
    assert (codestral.num_attention_heads, codestral.num_kv_heads) == (128, 8)


def test_jamba_caches_keys_and_values_in_one_layer_of_eight():
    """Jamba-v0.1: layers 4, 12, 20, 28 attend (8 KV heads x 128); the other 28 keep a Mamba
    state (8,192-wide window of 4 in bf16, 8,192 x 16 in float32); 16 experts in 16 layers."""
    arch = _arch("ai21labs/Jamba-v0.1")
    shape = shape_from_architecture(arch)
    assert (shape.softmax_layers, arch.linear_attention.layers) == (4, 28)
    assert (arch.num_experts, arch.experts_per_token) == (16, 2)
    wl = workload(seq_len=8192, new_tokens=0)
    state = 8192 * 4 * 2 + 8192 * 16 * 4
    assert kv_cache_bytes(shape, wl) == 4 * 8192 * 2 * 8 * 128 * 2 + 28 * state


@pytest.mark.parametrize(
    "repo",
    [
        "state-spaces/mamba-2.8b-hf",
        "tiiuae/falcon-mamba-7b",
        "mistralai/Mamba-Codestral-7B-v0.1",
        "ai21labs/Jamba-v0.1",
    ],
)
def test_bf16_inference_holds_two_bytes_a_parameter_and_a_small_state(repo):
    config = _config(repo)
    result = estimate(
        EstimateRequest(config=config, task="inference", tokens=10**6), default_catalog()
    )
    params = architecture_from_config(config).params_total
    gpus = result.recommendation.num_gpus
    assert result.memory.weights * gpus == pytest.approx(2 * params, rel=0.01)
    if repo != "ai21labs/Jamba-v0.1":
        assert result.memory.kv_cache < 0.5e9
        generation = next(a for a in result.assumptions if a.name == "Generation")
        assert "no KV cache" in generation.value
