"""Hunyuan dense (0.5B-7B), BioGPT, CodeGen, XGLM, DBRX, Persimmon and Fuyu are counted exactly:
each bundled release's config.json (advisor/model_configs/index.json says where each came from
and which published figure it meets) and made-up variants of every flag the readers read count
to the number of parameters transformers 5.24 builds (num_parameters() of AutoModelForCausalLM
on the meta device, tied weights once)."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config, compare_with_hub
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
        ("tencent/Hunyuan-7B-Instruct", "hunyuan_v1_dense", 7_504_568_320, None),
        ("tencent/Hunyuan-4B-Instruct", "hunyuan_v1_dense", 4_221_757_440, None),
        ("tencent/Hunyuan-1.8B-Instruct", "hunyuan_v1_dense", 1_791_080_448, None),
        ("tencent/Hunyuan-0.5B-Instruct", "hunyuan_v1_dense", 539_010_048, None),
        ("microsoft/biogpt", "biogpt", 346_763_264, None),
        ("microsoft/BioGPT-Large", "biogpt", 1_571_188_800, None),
        ("Salesforce/codegen-350M-mono", "codegen", 356_712_448, None),
        ("Salesforce/codegen-2B-mono", "codegen", 2_779_356_160, None),
        ("Salesforce/codegen-6B-mono", "codegen", 7_064_213_504, None),
        ("Salesforce/codegen-16B-mono", "codegen", 16_032_155_648, None),
        ("facebook/xglm-564M", "xglm", 564_463_616, None),
        ("facebook/xglm-1.7B", "xglm", 1_732_907_008, None),
        ("facebook/xglm-2.9B", "xglm", 2_941_505_536, None),
        ("facebook/xglm-7.5B", "xglm", 7_492_771_840, None),
        ("databricks/dbrx-base", "dbrx", 131_596_523_520, 36_469_708_800),
        ("databricks/dbrx-instruct", "dbrx", 131_596_523_520, 36_469_708_800),
        ("adept/fuyu-8b", "fuyu", 9_408_238_592, None),
    ],
)
def test_each_release_counts_as_transformers_builds_it(repo, family, total, active):
    arch = architecture_from_config(_config(repo))

    assert (arch.family, arch.params_total, arch.params_active) == (family, total, active or total)
    assert arch.exact


_SMALL = {
    "vocab_size": 1000,
    "hidden_size": 96,
    "intermediate_size": 200,
    "num_hidden_layers": 3,
    "num_attention_heads": 6,
    "max_position_embeddings": 128,
}
_HY = {**_SMALL, "model_type": "hunyuan_v1_dense", "num_key_value_heads": 2, "head_dim": 16}
_BIO = {**_SMALL, "model_type": "biogpt"}
_CG = {
    "model_type": "codegen",
    "vocab_size": 1000,
    "n_embd": 96,
    "n_layer": 3,
    "n_head": 6,
    "rotary_dim": 8,
    "n_positions": 128,
}
_XG = {
    "model_type": "xglm",
    "vocab_size": 1000,
    "d_model": 96,
    "num_layers": 3,
    "attention_heads": 6,
    "ffn_dim": 200,
    "max_position_embeddings": 128,
}
_DB = {
    "model_type": "dbrx",
    "vocab_size": 1000,
    "d_model": 96,
    "n_layers": 3,
    "n_heads": 6,
    "max_seq_len": 128,
    "attn_config": {"kv_n_heads": 2, "rope_theta": 10000},
    "ffn_config": {"ffn_hidden_size": 40, "moe_num_experts": 5, "moe_top_k": 2},
}
_PS = {**_SMALL, "model_type": "persimmon"}
_FU = {**_SMALL, "model_type": "fuyu", "patch_size": 4, "num_channels": 3}


# Made-up configs and the count transformers 5.24 builds for each (meta device).
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (_HY, 439_296),
        ({**_HY, "tie_word_embeddings": True}, 343_296),
        ({**_HY, "attention_bias": True}, 440_064),
        ({**_HY, "head_dim": 24, "num_key_value_heads": 3}, 490_032),
        # use_qk_norm and mlp_bias change nothing: transformers always builds the q/k norms
        # and never an MLP bias.
        ({**_HY, "use_qk_norm": False, "mlp_bias": True}, 439_296),
        (_BIO, 337_656),
        ({**_BIO, "tie_word_embeddings": False}, 433_656),
        ({**_BIO, "max_position_embeddings": 77, "intermediate_size": 150}, 303_810),
        (_CG, 526_984),
        ({**_CG, "n_inner": 150}, 391_498),
        ({**_CG, "tie_word_embeddings": True}, 430_984),  # the head's bias stays its own
        (_XG, 325_176),
        ({**_XG, "tie_word_embeddings": False}, 421_176),
        ({**_XG, "max_position_embeddings": 50, "ffn_dim": 150}, 296_226),
        (_DB, 440_640),
        ({**_DB, "attn_config": {"kv_n_heads": 1, "rope_theta": 10000}}, 431_424),
        (
            {**_DB, "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 8, "moe_top_k": 1}},
            711_072,
        ),
        # DbrxAttentionConfig / DbrxFFNConfig defaults: 1 KV head, 4 experts of 3584, top 1.
        ({**_DB, "attn_config": {"rope_theta": 10000}, "ffn_config": {}}, 12_644_640),
        (_PS, 421_368),
        ({**_PS, "qk_layernorm": False}, 421_176),
        ({**_PS, "tie_word_embeddings": True}, 325_368),
        (_FU, 426_072),
        ({**_FU, "tie_word_embeddings": True}, 330_072),
        ({**_FU, "patch_size": 5, "num_channels": 1}, 423_864),
        (
            {"model_type": "fuyu", "patch_size": 4, "num_channels": 3,
             "text_config": {**_PS, "qk_layernorm": False}},
            425_880,
        ),
        # Fuyu ties its own head by the top-level flag, not text_config's.
        (
            {"model_type": "fuyu", "patch_size": 4, "num_channels": 3,
             "text_config": {**_PS, "qk_layernorm": False, "tie_word_embeddings": True}},
            425_880,
        ),
    ],
)  # fmt: skip
def test_flag_variants_count_as_transformers_builds_them(config, expected):
    assert architecture_from_config(config).params_total == expected


def test_hunyuan_7b_caches_eight_kv_heads_and_norms_q_and_k_per_head():
    config = _config("tencent/Hunyuan-7B-Instruct")
    arch = architecture_from_config(config)
    shape = shape_from_architecture(arch)

    assert (arch.num_kv_heads, arch.head_dim, arch.tied_embeddings) == (8, 128, True)
    # 2 x 8 heads x 128 values per token and layer, 32 layers, bf16.
    assert kv_cache_bytes(shape, workload(seq_len=4096, new_tokens=0)) == 32 * 2048 * 4096 * 2
    # A Llama of the same shape, less the q/k RMSNorm(head_dim) pair in each block.
    llama = architecture_from_config({**config, "model_type": "llama", "architectures": None})
    assert arch.params_total - llama.params_total == 32 * 2 * 128
    names = {lin.name for lin in arch.layer_linears if lin.module}
    assert names == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def test_hunyuan_dense_needs_head_dim_and_notes_cross_layer_sharing_it_ignores():
    config = {k: v for k, v in _config("tencent/Hunyuan-1.8B-Instruct").items() if k != "head_dim"}
    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)
    assert raised.value.field == "head_dim"

    cla = architecture_from_config({**_config("tencent/Hunyuan-1.8B-Instruct"), "use_cla": True})
    assert cla.params_total == 1_791_080_448
    assert any("use_cla" in note for note in cla.notes)


def test_biogpt_learns_two_extra_position_rows_and_ties_its_output_projection():
    arch = architecture_from_config(_config("microsoft/biogpt"))

    assert arch.params_embedding == (42384 + 1024 + 2) * 1024
    assert (arch.params_lm_head, arch.tied_embeddings, arch.max_position_embeddings) == (
        0,
        True,
        1024,
    )
    names = {lin.name for lin in arch.layer_linears}
    assert names == {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}


def test_codegen_head_has_a_bias_and_the_hub_masks_are_explained():
    arch = architecture_from_config(_config("Salesforce/codegen-350M-mono"))

    assert arch.params_lm_head == 51200 * 1024 + 51200
    assert {lin.name for lin in arch.layer_linears} == {"qkv_proj", "out_proj", "fc_in", "fc_out"}
    # The checkpoint's 20 attn.causal_mask buffers (2048 x 2048 booleans) are not parameters.
    note, trusted = compare_with_hub(arch, arch.params_total + 20 * 2048 * 2048, None)
    assert trusted
    assert "causal-mask" in note


def test_xglm_positions_are_sinusoidal_and_cross_attention_is_refused():
    arch = architecture_from_config(_config("facebook/xglm-564M"))

    assert arch.params_embedding == 256008 * 1024  # no learned position table
    assert arch.params_lm_head == 0
    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**_config("facebook/xglm-564M"), "add_cross_attention": True})
    assert raised.value.field == "add_cross_attention"


def test_dbrx_routes_four_of_sixteen_fused_experts_lora_leaves_alone():
    arch = architecture_from_config(_config("databricks/dbrx-instruct"))
    shape = shape_from_architecture(arch)

    assert (arch.num_experts, arch.experts_per_token, arch.shared_experts) == (16, 4, 0)
    assert arch.moe_intermediate_size == 10752
    assert (arch.num_kv_heads, arch.head_dim) == (8, 128)
    assert kv_cache_bytes(shape, workload(seq_len=1000, new_tokens=0)) == 40 * 2048 * 1000 * 2
    adapted = {lin.name for lin in arch.layer_linears if lin.module}
    assert adapted == {"Wqkv", "out_proj", "router.layer"}
    experts = {lin.name: lin.count_per_layer for lin in arch.layer_linears if not lin.module}
    assert experts == {"experts.mlp.w1": 16, "experts.mlp.v1": 16, "experts.mlp.w2": 16}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tie_word_embeddings": True}, "tie_word_embeddings"),
        ({"attn_config": {"kv_n_heads": 5}}, "attn_config"),
        ({"ffn_config": {"moe_num_experts": 4, "moe_top_k": 5}}, "ffn_config"),
        ({"ffn_config": [16]}, "ffn_config"),
    ],
)
def test_dbrx_refuses_what_transformers_cannot_build(change, field):
    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**_config("databricks/dbrx-base"), **change})
    assert raised.value.field == field


def test_fuyu_embeds_image_patches_with_one_linear_layer():
    arch = architecture_from_config(_config("adept/fuyu-8b"))
    persimmon = architecture_from_config({**_config("adept/fuyu-8b"), "model_type": "persimmon"})

    assert arch.params_total - persimmon.params_total == 30 * 30 * 3 * 4096 + 4096
    assert any("no vision encoder" in note for note in arch.notes)
    assert persimmon.params_total == 9_397_175_296  # Persimmon-8B's language model


@pytest.mark.parametrize(
    "repo",
    [
        "tencent/Hunyuan-7B-Instruct",
        "microsoft/BioGPT-Large",
        "Salesforce/codegen-6B-mono",
        "facebook/xglm-7.5B",
        "databricks/dbrx-instruct",
        "adept/fuyu-8b",
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
