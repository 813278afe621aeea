"""fp8 weights for inference: half the memory of bf16, placed only where the kernels run.

DeepSeek-V3 and R1 are published in fp8 (their config's quantization_config); without an fp8
precision the engine could only size them in bf16 (1.3 TB, nothing in the catalog holds it)
or in int4, while the deployment everyone runs is the fp8 checkpoint on one 8 x H200 node.
vLLM runs fp8 weights on NVIDIA Turing or newer (W8A8 on Ada/Hopper, the W8A16 Marlin kernel
below) and AMD MI300; transformers' fine-grained FP8 needs compute capability 9.0.
"""

from __future__ import annotations

import pytest

from advisor.engine import RequestError, estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog


def bundled(repo_id: str) -> dict:
    return find_bundled(repo_id).config


def generate(repo_id: str, **fields):
    fields = {"tokens": 10**8, **fields}
    request = EstimateRequest(task="inference", config=bundled(repo_id), **fields)
    return estimate(request, default_catalog())


def by_accelerator(result) -> dict:
    """The first option on each accelerator, as the alternatives table lists them."""
    found = {}
    for option in result.options:
        found.setdefault(option.accelerator, option)
    return found


def test_fp8_halves_the_linear_weights_and_keeps_the_rest_in_16_bit():
    qwen = "Qwen/Qwen2.5-7B"
    bf16 = generate(qwen, accelerator="h100-80-sxm5").memory.weights
    fp8 = generate(qwen, precision="fp8", accelerator="h100-80-sxm5").memory.weights
    # 7.6B parameters, of which the 1.09B of the embeddings and the untied head stay 16-bit.
    assert 0.55 * bf16 < fp8 < 0.6 * bf16


def test_deepseek_v3_in_fp8_runs_on_one_h200_node_as_published():
    transformers = generate("deepseek-ai/DeepSeek-V3", precision="bf16")
    assert transformers.recommendation is None  # 1.34 TB of bf16 weights: no node holds them
    assert any("stored in fp8" in w and "as you asked" in w for w in transformers.warnings)
    assert any(w.startswith("fp8 weights (vLLM") for w in transformers.warnings)
    # vLLM spans nodes, at several times the GPUs.
    bf16 = generate("deepseek-ai/DeepSeek-V3", precision="bf16", framework="vllm")
    assert bf16.recommendation.nodes > 1

    fp8 = generate("deepseek-ai/DeepSeek-V3", precision="fp8", framework="vllm")
    h200 = by_accelerator(fp8)["h200-141-sxm"]
    assert (h200.num_gpus, h200.nodes, h200.fits, h200.eligible) == (8, 1, True, True)
    # 671B weights at one byte each (the embeddings and head at two), over eight GPUs.
    assert 80e9 < h200.memory.weights < 90e9
    assert not any("stored in fp8" in w for w in fp8.warnings)
    # The FP8 Marlin kernel that serves dense fp8 layers on Ampere does not serve MoE layers.
    a100 = by_accelerator(fp8)["a100-80-sxm4"]
    assert not a100.supported
    assert any("fp8 mixture-of-experts layers" in r for r in a100.software_reasons)
    assert fp8.recommendation.accelerator in ("h100-80-sxm5", "h200-141-sxm")


@pytest.mark.parametrize(
    ("repo", "accelerator", "gpus"),
    [
        # DeepSeek-V3.2: an 8 x H200 node in fp8, as V3 (its experts are parameter tensors in
        # transformers 5, which bitsandbytes would leave 16-bit but fp8 quantises).
        ("deepseek-ai/DeepSeek-V3.2-Exp", "h200-141-sxm", 8),
        # GLM-4.5-FP8: Z.ai's model card serves the 355B model on 8 H100s.
        ("zai-org/GLM-4.5", "h100-80-sxm5", 8),
    ],
)
def test_fp8_quantises_experts_kept_as_parameter_tensors(repo, accelerator, gpus):
    fp8 = generate(repo, precision="fp8", framework="vllm")
    option = by_accelerator(fp8)[accelerator]
    assert (option.num_gpus, option.nodes, option.fits) == (gpus, 1, True)
    bf16 = by_accelerator(generate(repo, precision="bf16", framework="vllm"))[accelerator]
    # Every expert at one byte: the whole model's weights about half the bf16 ones.
    fp8_total = option.memory.weights * option.num_gpus
    assert fp8_total < 0.55 * bf16.memory.weights * bf16.num_gpus


def test_vllm_fp8_runs_from_turing_up_and_on_mi300_not_on_volta_mi200_or_intel():
    options = by_accelerator(generate("Qwen/Qwen2.5-7B", precision="fp8", framework="vllm"))
    for name in ("t4-16", "a100-80-sxm4", "h100-80-sxm5", "h200-141-sxm"):
        if name in options:
            assert options[name].supported, name
    for name in ("v100-32-sxm2", "v100-16-pcie", "mi210-64", "max1550-128"):
        if name in options:
            option = options[name]
            assert not option.supported, name
            assert not option.eligible, name
            assert any("fp8 weights with vLLM" in r for r in option.software_reasons)
    assert {"a100-80-sxm4", "mi210-64", "max1550-128"} <= set(options)
    on_stanage = generate("Qwen/Qwen2.5-7B", precision="fp8", framework="vllm", system="stanage")
    assert 'quantization="fp8"' in on_stanage.slurm_script


def test_transformers_fp8_is_placed_only_on_hopper():
    result = generate("Qwen/Qwen2.5-7B", precision="fp8", tokens=10**7)
    options = by_accelerator(result)
    assert result.recommendation.accelerator in (
        "h100-80-sxm5",
        "h100-80-pcie",
        "h200-141-sxm",
        "gh200-96",
    )
    a100 = options["a100-80-sxm4"]
    assert not a100.supported
    assert any("Compute Capability>=9" in r for r in a100.software_reasons)
    assert "FineGrainedFP8Config" in result.slurm_script


def test_fp8_decoding_reads_half_the_bytes_of_bf16():
    kw = {"framework": "vllm", "accelerator": "h100-80-sxm5", "batch_size": 1}
    bf16 = generate("Qwen/Qwen2.5-7B", **kw).recommendation.gpu_hours
    fp8 = generate("Qwen/Qwen2.5-7B", precision="fp8", **kw).recommendation.gpu_hours
    assert fp8 < 0.8 * bf16
    assumption = next(
        a
        for a in generate("Qwen/Qwen2.5-7B", precision="fp8", **kw).assumptions
        if a.name == "fp8 weights and speed"
    )
    assert "W8A16" in assumption.value
    assert "1.6x" in assumption.source


@pytest.mark.parametrize("task", ["full_finetune", "lora", "qlora", "pretrain"])
def test_fp8_training_is_refused_naming_the_field(task):
    with pytest.raises(RequestError) as caught:
        estimate(
            EstimateRequest(task=task, params=7_000_000_000, precision="fp8"), default_catalog()
        )
    fields = dict(caught.value.errors)
    assert "fp8 is offered for inference" in fields["precision"]


def test_fp8_quantises_the_linear_layers_as_measured_on_qwen3():
    """nano-vllm PR #241 (2026-06, RTX 4080 Super) measured Qwen3-0.6B's linear weights at
    880.8 MB in bf16 and 441.1 MB in fp8, embeddings kept 16-bit, and 1,192 MB allocated in
    bf16 in all. (Its fp8 run allocated 821 MB in all, 69 MB above the weights; what the rest
    is, the PR does not say.)"""
    config = bundled("Qwen/Qwen3-0.6B")
    bf16 = estimate(EstimateRequest(task="inference", config=config), default_catalog())
    fp8 = estimate(
        EstimateRequest(task="inference", config=config, precision="fp8"), default_catalog()
    )
    assert abs(bf16.memory.weights / 1e6 - 1192) < 0.01 * 1192
    saved = (bf16.memory.weights - fp8.memory.weights) / 1e6
    assert abs(saved - (880.8 - 441.1)) < 0.02 * (880.8 - 441.1)


def test_tgi_in_fp8_quantises_at_launch_and_the_script_sends_the_prompts():
    """TGI runs fp8 matmuls through fbgemm on Hopper and the FP8 Marlin kernel on compute
    capability 8.0 to 8.9 (its PRs #2204, #2277 and issue #2388), not on Turing or Volta."""
    result = generate("Qwen/Qwen2.5-7B", precision="fp8", framework="tgi", tokens=10**7)
    options = by_accelerator(result)
    assert options["a100-80-sxm4"].supported
    assert not options["t4-16"].supported
    assert any("fp8 weights with TGI" in r for r in options["t4-16"].software_reasons)
    on_stanage = generate(
        "Qwen/Qwen2.5-7B", precision="fp8", framework="tgi", system="stanage", tokens=10**7
    )
    script = on_stanage.slurm_script
    assert "text-generation-launcher --model-id MODEL --num-shard 1 --quantize fp8" in script
    assert "/health" in script
    assert "send your prompts concurrently" in script


@pytest.mark.parametrize("framework", ["transformers_legacy", "litgpt"])
def test_fp8_with_a_library_that_has_no_fp8_is_refused(framework):
    with pytest.raises(RequestError) as caught:
        estimate(
            EstimateRequest(
                task="inference", params=7_000_000_000, precision="fp8", framework=framework
            ),
            default_catalog(),
        )
    assert "has no fp8 weights" in dict(caught.value.errors)["precision"]


@pytest.mark.parametrize("framework", [None, "vllm"])
def test_an_fp8_checkpoint_is_served_as_published_when_precision_is_left_open(framework):
    """`vllm serve deepseek-ai/DeepSeek-R1` reads the checkpoint's quantization_config and
    serves fp8 (DeepSeek: one 8 x H200 node); transformers' fine-grained FP8 loads it so on
    Hopper. Left open, the precision is the checkpoint's, and the result says how to size a
    converted bf16 copy instead."""
    result = generate("deepseek-ai/DeepSeek-V3", framework=framework)
    assert any("served so, as published" in w for w in result.warnings)
    h200 = by_accelerator(result)["h200-141-sxm"]
    assert (h200.num_gpus, h200.nodes, h200.fits, h200.eligible) == (8, 1, True, True)
    assert 80e9 < h200.memory.weights < 90e9
    # Ranked by known charges: 16 H100s (priced) may come before the unpriced H200s.
    assert result.recommendation.accelerator in ("h200-141-sxm", "h100-80-sxm5")


def test_a_library_without_fp8_weights_loads_an_fp8_checkpoint_in_16_bit():
    result = generate("deepseek-ai/DeepSeek-V3", framework="transformers_legacy")
    assert any("as this library loads it" in w for w in result.warnings)
