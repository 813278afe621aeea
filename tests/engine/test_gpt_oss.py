"""OpenAI gpt-oss: a mixture of experts whose experts and router are parameter tensors, not
Linear layers, stored in MXFP4. Counts checked against OpenAI's model card (arXiv:2508.10925):
gpt-oss-20b 20.91B parameters, 3.61B active per token; gpt-oss-120b 116.83B and 5.13B (the card
counts active parameters without the input embedding)."""

from __future__ import annotations

import pytest

from advisor import model_configs
from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import resolve_shape
from tests.engine.inputs import default_catalog


def config(name: str) -> dict:
    return model_configs.find_bundled(f"openai/{name}").config


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [("gpt-oss-20b", 20.91e9, 3.61e9), ("gpt-oss-120b", 116.83e9, 5.13e9)],
)
def test_parameters_match_the_model_card(name, total, active):
    arch = architecture_from_config(config(name))
    assert arch.family == "gpt_oss"
    assert round(arch.params_total / 1e7) == round(total / 1e7)
    assert round((arch.params_active - arch.params_embedding) / 1e7) == round(active / 1e7)


def test_lora_adapts_the_attention_and_leaves_the_parameter_experts_alone():
    """PEFT's target_modules="all-linear" finds nn.Linear modules only: in gpt-oss those are
    q, k, v and o; a rank-16 LoRA has 16 x (in + out) per projection and layer."""
    result = estimate(
        EstimateRequest(
            model_id="openai/gpt-oss-20b", config=config("gpt-oss-20b"), task="lora", tokens=10**7
        ),
        default_catalog(),
    )
    per_layer = 16 * ((2880 + 4096) + 2 * (2880 + 512) + (4096 + 2880))
    trainable = 24 * per_layer
    # Adapters and their gradients in fp32 (4 bytes each) on the recommended single GPU.
    assert result.recommendation.num_gpus == 1
    assert result.memory.gradients == pytest.approx(4 * trainable, rel=0.01)
    lora = next(a for a in result.assumptions if a.name == "LoRA")
    assert "experts and router are parameter tensors" in lora.value


def test_qlora_quantises_only_the_linear_layers():
    """bitsandbytes replaces nn.Linear modules: gpt-oss's attention goes to 4 bits, its experts
    (19 of its 21 billion parameters) stay in 16 bits."""
    shape = shape_from_architecture(architecture_from_config(config("gpt-oss-20b")))
    attention = 24 * (2880 * 4096 * 2 + 2880 * 512 * 2)
    assert shape.params_quantisable == attention
    assert shape.params_linear > 18e9


def test_half_the_layers_keep_a_128_token_window():
    request = EstimateRequest(config=config("gpt-oss-120b"), task="inference")
    shape = resolve_shape(request)
    assert (shape.sliding_window, shape.sliding_layers) == (128, 18)


def test_serving_says_the_experts_are_stored_in_mxfp4():
    result = estimate(
        EstimateRequest(config=config("gpt-oss-120b"), task="inference", tokens=10**6),
        default_catalog(),
    )
    assert any("stores its experts in MXFP4" in w for w in result.warnings)
    # Sized in bf16, as transformers dequantises them: 234 GB over the recommended GPUs.
    gpus = result.recommendation.num_gpus
    assert gpus > 1
    assert result.memory.weights * gpus > 200e9


def test_the_hubs_mxfp4_bytes_unpack_to_the_expert_weights():
    """The Hub counts MXFP4 experts as U8 elements: per block of 32 weights, 16 bytes of 4-bit
    values and one byte of shared scale. Unpacked so, gpt-oss-20b's safetensors agree with the
    config's count instead of reading 43 % short (and the count being distrusted)."""
    from advisor.engine.architecture import architecture_from_hub
    from advisor.engine.models import HubModelMetadata

    expert_weights = 24 * 32 * (2880 * 5760 + 2880 * 2880)
    rest = 20_914_757_184 - expert_weights  # attention, norms, sinks, biases, embeddings
    arch = architecture_from_hub(
        HubModelMetadata(
            repo_id="openai/gpt-oss-20b",
            config=config("gpt-oss-20b"),
            safetensors_parameters={"BF16": rest, "U8": expert_weights * 17 // 32},
        )
    )
    assert arch.params_total == 20_914_757_184
    assert "agrees exactly" in " ".join(arch.notes)
