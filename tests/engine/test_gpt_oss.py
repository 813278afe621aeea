"""OpenAI gpt-oss: a mixture of experts whose experts and router are parameter tensors, not
Linear layers, stored in MXFP4. Counts checked against OpenAI's model card (arXiv:2508.10925):
gpt-oss-20b 20.91B parameters, 3.61B active per token; gpt-oss-120b 116.83B and 5.13B (the card
counts active parameters without the input embedding)."""

from __future__ import annotations

from functools import cache

import pytest

from advisor import model_configs
from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import resolve_shape
from bench.engine_rankings import ROOT, catalog_from_file
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


def _serve(model: str, catalog=None, **fields):
    request = EstimateRequest(config=config(model), task="inference", tokens=10**6, **fields)
    return estimate(request, catalog or default_catalog())


@cache
def lancaster():
    """The Lancaster profile: V100s and T4s (Bede) beside newer GPUs."""
    return catalog_from_file(ROOT / "catalog" / "data" / "lancaster.json")


def test_gpt_oss_120b_is_served_as_stored_on_one_80gb_gpu():
    """OpenAI: 'gpt-oss-120b runs on a single 80GB GPU'; vLLM's recipe: it fits a single A100
    (80GB) with Marlin MXFP4 MoE. 114.7B expert weights at 4.25 bits (61 GB) and 2.1B bf16."""
    for framework in ("vllm", None):
        result = _serve("gpt-oss-120b", framework=framework)
        assert any("served so, as published" in w for w in result.warnings)
        rec = result.recommendation
        assert rec.num_gpus == 1, framework
        assert 60e9 <= result.memory.weights + result.memory.quantization <= 70e9
        mxfp4 = next(a for a in result.assumptions if a.name == "MXFP4 expert weights")
        assert "114.7B expert weights" in mxfp4.value
        single = [
            o for o in result.options if o.eligible and o.num_gpus == 1 and o.capacity_bytes > 80e9
        ]
        assert {o.accelerator for o in single} >= {"a100-80-sxm4", "h100-80-sxm5"}


def test_gpt_oss_20b_needs_about_16_gb():
    """OpenAI cookbook: gpt-oss-20b 'only requires about 16GB of VRAM'."""
    result = _serve("gpt-oss-20b", framework="vllm")
    assert 12e9 <= result.memory.weights + result.memory.quantization <= 15e9


def test_gpus_without_the_mxfp4_kernels_say_so():
    """transformers dequantises below compute capability 7.5 (V100); vLLM's MXFP4 MoE runs on
    Ampere and newer. Those options are not offered as stored, and say what to do instead."""
    hf = _serve("gpt-oss-20b", lancaster())
    v100 = next(o for o in hf.options if o.accelerator.startswith("v100"))
    assert not v100.supported
    assert any("Triton MXFP4 kernels" in r and "precision bf16" in r for r in v100.reasons)
    vllm = _serve("gpt-oss-20b", lancaster(), framework="vllm")
    t4 = next(o for o in vllm.options if o.accelerator.startswith("t4"))
    assert not t4.supported
    assert any("MXFP4 MoE kernels" in r for r in t4.reasons)


def test_precision_bf16_sizes_the_dequantised_model():
    """Asked for bf16, the experts are counted dequantised: 234 GB over the GPUs, as
    transformers loads them where its kernels do not run."""
    result = _serve("gpt-oss-120b", precision="bf16")
    assert any("dequantised to bf16, as you asked" in w for w in result.warnings)
    gpus = result.recommendation.num_gpus
    assert gpus > 1
    assert result.memory.weights * gpus > 200e9


def test_a_library_without_mxfp4_loads_the_experts_dequantised():
    result = _serve("gpt-oss-120b", framework="tgi")
    assert any("as this library loads them" in w for w in result.warnings)
    assert result.recommendation.num_gpus > 1


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


def test_the_transformers_script_installs_the_mxfp4_kernels():
    script = _serve("gpt-oss-120b").slurm_script
    assert 'pip install "transformers>=4.55" "triton>=3.4" kernels' in script
    assert "about 168 GB more" in script
    vllm = _serve("gpt-oss-120b", framework="vllm", system="stanage")
    assert "kernels" not in vllm.slurm_script
