"""StarCoder2, GPT-Neo, Command R / Aya (cohere), Command R7B / Command A (cohere2), OLMoE,
StableLM, GLM-4 (glm, glm4) and Granite 3.0 MoE are counted exactly: each bundled release's
config.json (advisor/model_configs/index.json says where each came from and which published
figure it meets) and made-up variants of every flag the readers read count to the number of
parameters transformers 5.24 builds (num_parameters() of AutoModelForCausalLM on the meta
device, tied weights once)."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.errors import ConfigError
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog


def _config(repo: str) -> dict:
    return find_bundled(repo).config


@pytest.mark.parametrize(
    ("repo", "family", "total", "active"),
    [
        ("bigcode/starcoder2-3b", "starcoder2", 3_030_371_328, None),
        ("bigcode/starcoder2-7b", "starcoder2", 7_173_923_840, None),
        ("bigcode/starcoder2-15b", "starcoder2", 15_957_889_024, None),
        ("EleutherAI/gpt-neo-125m", "gpt_neo", 125_198_592, None),
        ("EleutherAI/gpt-neo-1.3B", "gpt_neo", 1_315_575_808, None),
        ("EleutherAI/gpt-neo-2.7B", "gpt_neo", 2_651_307_520, None),
        ("CohereForAI/c4ai-command-r-v01", "cohere", 34_980_831_232, None),
        ("CohereForAI/aya-23-8B", "cohere", 8_028_033_024, None),
        ("CohereForAI/aya-expanse-8b", "cohere", 8_028_033_024, None),
        ("CohereForAI/aya-expanse-32b", "cohere", 32_296_476_672, None),
        ("CohereForAI/c4ai-command-r7b-12-2024", "cohere2", 8_028_033_024, None),
        ("CohereForAI/c4ai-command-a-03-2025", "cohere2", 111_057_580_032, None),
        ("allenai/OLMoE-1B-7B-0924", "olmoe", 6_919_161_856, 1_282_017_280),
        ("allenai/OLMoE-1B-7B-0125", "olmoe", 6_919_161_856, 1_282_017_280),
        ("stabilityai/stablelm-2-1_6b", "stablelm", 1_644_515_328, None),
        ("stabilityai/stablelm-3b-4e1t", "stablelm", 2_795_443_200, None),
        ("stabilityai/stablelm-zephyr-3b", "stablelm", 2_795_443_200, None),
        ("THUDM/GLM-4-9B-0414", "glm4", 9_400_279_040, None),
        ("THUDM/GLM-4-32B-0414", "glm4", 32_566_487_552, None),
        ("THUDM/glm-4-9b-chat-hf", "glm", 9_399_951_360, None),
        ("ibm-granite/granite-3.0-1b-a400m-base", "granitemoe", 1_334_628_352, 428_658_688),
        ("ibm-granite/granite-3.0-3b-a800m-base", "granitemoe", 3_298_793_472, 882_874_368),
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
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
_NEO = {
    "model_type": "gpt_neo",
    "vocab_size": 1000,
    "hidden_size": 96,
    "num_layers": 3,
    "num_heads": 4,
    "max_position_embeddings": 77,
}


# Made-up configs and the count transformers 5.24 builds for each (meta device).
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({**_SMALL, "model_type": "starcoder2", "sliding_window": 64}, 287_928),
        ({**_SMALL, "model_type": "starcoder2", "use_bias": False}, 286_272),
        ({**_SMALL, "model_type": "starcoder2", "tie_word_embeddings": False}, 383_928),
        ({**_SMALL, "model_type": "starcoder2", "head_dim": 24}, 325_032),
        (
            {**_NEO, "num_layers": 4, "num_heads": 6, "max_position_embeddings": 100,
             "attention_types": [[["global", "local"], 2]]},
            552_000,
        ),
        (
            {**_NEO, "intermediate_size": 150, "tie_word_embeddings": False, "window_size": 16,
             "attention_types": [[["local"], 1], [["global", "local"], 1]]},
            398_754,
        ),
        ({**_SMALL, "model_type": "cohere"}, 342_912),
        ({**_SMALL, "model_type": "cohere", "use_qk_norm": True}, 343_296),
        ({**_SMALL, "model_type": "cohere", "attention_bias": True}, 343_680),
        ({**_SMALL, "model_type": "cohere", "tie_word_embeddings": False}, 438_912),
        ({**_SMALL, "model_type": "cohere", "head_dim": 20}, 361_344),
        ({**_SMALL, "model_type": "cohere2", "num_hidden_layers": 5}, 507_456),
        ({**_SMALL, "model_type": "cohere2", "num_hidden_layers": 5, "attention_bias": True},
         508_736),
        ({**_SMALL, "model_type": "cohere2", "head_dim": 20}, 361_344),
        ({**_SMALL, "model_type": "olmoe", "num_experts": 6, "num_experts_per_tok": 2}, 1_305_312),
        (
            {**_SMALL, "model_type": "olmoe", "num_experts": 6, "num_experts_per_tok": 2,
             "attention_bias": True, "tie_word_embeddings": True},
            1_210_080,
        ),
        ({**_SMALL, "model_type": "stablelm"}, 439_872),
        ({**_SMALL, "model_type": "stablelm", "use_qkv_bias": True}, 440_352),
        ({**_SMALL, "model_type": "stablelm", "use_parallel_residual": True}, 439_296),
        ({**_SMALL, "model_type": "stablelm", "qk_layernorm": True}, 440_256),
        (
            {**_SMALL, "model_type": "stablelm", "use_qkv_bias": True,
             "use_parallel_residual": True, "qk_layernorm": True, "tie_word_embeddings": False},
            440_160,
        ),
        ({**_SMALL, "model_type": "glm4"}, 959_712),
        ({**_SMALL, "model_type": "glm4", "head_dim": 40, "tie_word_embeddings": True}, 455_568),
        ({**_SMALL, "model_type": "glm4", "head_dim": 40, "attention_bias": False}, 550_368),
        ({**_SMALL, "model_type": "glm"}, 959_136),
        ({**_SMALL, "model_type": "glm", "head_dim": 40, "attention_bias": False}, 549_792),
        (
            {**_SMALL, "model_type": "granitemoe", "num_local_experts": 5,
             "num_experts_per_tok": 2},
            1_131_840,
        ),
        (
            {**_SMALL, "model_type": "granitemoe", "num_local_experts": 5,
             "num_experts_per_tok": 2, "attention_bias": True, "tie_word_embeddings": True},
            1_036_608,
        ),
    ],
)  # fmt: skip
def test_flag_variants_count_as_transformers_builds_them(config, expected):
    assert architecture_from_config(config).params_total == expected


def test_starcoder2_keeps_at_most_its_window_in_every_layer():
    arch = architecture_from_config(_config("bigcode/starcoder2-15b"))

    [group] = arch.attention_groups
    assert (group.layers, group.window, group.kv_heads, group.head_dim) == (40, 4096, 4, 128)
    unwindowed = {**_config("bigcode/starcoder2-15b"), "sliding_window": None}
    assert architecture_from_config(unwindowed).attention_groups == []
    # c_fc / c_proj are nn.Linear modules LoRA adapts, with the attention projections.
    names = {lin.name for lin in arch.layer_linears}
    assert names == {"q_proj", "k_proj", "v_proj", "o_proj", "c_fc", "c_proj"}


def test_gpt_neo_local_layers_cost_what_transformers_spends_on_them():
    """GPT-Neo 1.3B: 12 global layers and 12 local ones within 256 tokens, but transformers
    masks the older tokens instead of skipping them: every layer caches and scores the whole
    context, and the note says so."""
    arch = architecture_from_config(_config("EleutherAI/gpt-neo-1.3B"))
    shape = shape_from_architecture(arch)

    assert not arch.attention_groups
    assert shape.attention_reads(2048) == 2048 * 24 * 2048
    assert any("12 of 24 layers attend within a 256-token local window" in n for n in arch.notes)
    assert arch.max_position_embeddings == 2048
    assert arch.tied_embeddings
    assert arch.params_lm_head == 0


def test_gpt_neo_attention_types_must_cover_every_layer():
    config = {**_config("EleutherAI/gpt-neo-125m"), "attention_types": [[["global", "local"], 5]]}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)
    assert raised.value.field == "attention_types"


def test_cohere2_three_local_layers_to_one_global():
    """Command A: 48 of 64 layers attend within 4,096 tokens (sliding_window_pattern 4; the same
    from layer_types); KV cache per token of a global layer: 2 x 8 heads x 128."""
    config = _config("CohereForAI/c4ai-command-a-03-2025")
    arch = architecture_from_config(config)

    groups = {g.window: g.layers for g in arch.attention_groups}
    assert groups == {4096: 48, None: 16}
    types = ["sliding_attention"] * 3 + ["full_attention"]
    listed = architecture_from_config(
        {k: v for k, v in config.items() if k != "sliding_window_pattern"}
        | {"layer_types": types * 16}
    )
    assert listed.attention_groups == arch.attention_groups
    assert (arch.num_kv_heads, arch.head_dim) == (8, 128)


def test_command_r_plus_style_qk_norms_add_a_weight_per_head_dimension():
    config = _config("CohereForAI/c4ai-command-r-v01")

    normed = architecture_from_config({**config, "use_qk_norm": True})

    assert normed.params_total == 34_980_831_232 + 40 * (64 + 64) * 128


def test_olmoe_experts_are_parameter_tensors_that_all_linear_lora_leaves_alone():
    arch = architecture_from_config(_config("allenai/OLMoE-1B-7B-0924"))

    assert (arch.num_experts, arch.experts_per_token, arch.shared_experts) == (64, 8, 0)
    adapted = {lin.name for lin in arch.layer_linears if lin.module}
    assert adapted == {"q_proj", "k_proj", "v_proj", "o_proj"}


def test_glm4_0414_has_two_more_norms_a_block_than_glm4_chat():
    glm4 = architecture_from_config(_config("THUDM/GLM-4-9B-0414"))
    glm = architecture_from_config(_config("THUDM/glm-4-9b-chat-hf"))

    assert glm4.params_total - glm.params_total == 40 * 2 * 4096
    assert (glm4.num_kv_heads, glm4.head_dim) == (2, 128)


@pytest.mark.parametrize(
    "repo",
    [
        "bigcode/starcoder2-7b",
        "EleutherAI/gpt-neo-2.7B",
        "CohereForAI/aya-23-8B",
        "CohereForAI/c4ai-command-r7b-12-2024",
        "allenai/OLMoE-1B-7B-0924",
        "stabilityai/stablelm-3b-4e1t",
        "THUDM/GLM-4-9B-0414",
        "THUDM/glm-4-9b-chat-hf",
        "ibm-granite/granite-3.0-3b-a800m-base",
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
