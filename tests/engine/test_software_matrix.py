"""Issue 14, section 2: the library a request names must run on the system's GPUs. vLLM needs
NVIDIA compute capability 7.5+ (current releases), MI200/MI300 on ROCm or an Intel Data Center
GPU; the options say why one is ruled out, with the source and its date."""

from __future__ import annotations

import re
from functools import cache

import pytest

from advisor.engine import estimate, software
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA_2_7B = config("meta-llama__Llama-2-7b-hf")


@cache
def catalog_with_v100s():
    """The default catalog plus a site whose nodes are V100s (the default catalog's own V100
    system, JADE 2, is retired)."""
    catalog = default_catalog()
    site = next(s for s in catalog.systems if s.name == "baskerville")
    node = site.node_types[0].model_copy(update={"accelerator": "v100-32-sxm2"})
    v100_site = site.model_copy(
        update={
            "name": "v100-site",
            "node_types": [node],
            "partitions": [
                p.model_copy(update={"node_types": [node.name]}) for p in site.partitions[:1]
            ],
        }
    )
    return catalog.model_copy(update={"systems": [*catalog.systems, v100_site]})


def serve(accelerator: str, framework: str):
    request = EstimateRequest(
        config=LLAMA_2_7B,
        task="inference",
        precision="bf16" if accelerator != "v100-32-sxm2" else "fp16",
        tokens=10**7,
        framework=framework,
        accelerator=accelerator,
    )
    return estimate(request, catalog_with_v100s())


def test_grpo_is_not_placed_where_vllm_cannot_generate():
    """GRPO's completions come from vLLM colocated on the training GPUs (rollouts.py): V100s,
    which current vLLM releases do not support, are ruled out for it as for serving."""
    request = EstimateRequest(
        config=LLAMA_2_7B, task="lora", training_objective="grpo", precision="fp16",
        tokens=10**7, accelerator="v100-32-sxm2",
    )  # fmt: skip
    result = estimate(request, catalog_with_v100s())
    options = [o for o in result.options if o.accelerator == "v100-32-sxm2"]
    assert options
    assert not any(o.supported or o.eligible for o in options)
    assert any("GRPO's generation" in r for r in options[0].software_reasons)


def test_vllm_is_not_placed_on_v100s_and_says_why_with_its_source():
    result = serve("v100-32-sxm2", "vllm")
    options = [o for o in result.options if o.accelerator == "v100-32-sxm2"]
    assert options
    assert not any(o.supported for o in options)
    reason = next(r for r in options[0].software_reasons if "vLLM" in r)
    assert reason.startswith(
        "vLLM (serving, or GRPO's generation) needs a vLLM build for the GPU; not supported on"
    )
    assert "compute capability 7.5 or higher" in reason
    assert "as of 2026-11" in reason


def test_the_same_v100_serves_with_transformers_generate():
    result = serve("v100-32-sxm2", "transformers")
    options = [o for o in result.options if o.accelerator == "v100-32-sxm2"]
    assert options
    assert not any("vLLM" in r for o in options for r in o.software_reasons)


def test_vllm_runs_on_mi210_but_not_on_mi100():
    mi210 = [o for o in serve("mi210-64", "vllm").options if o.accelerator == "mi210-64"]
    mi100 = [o for o in serve("mi100-32", "vllm").options if o.accelerator == "mi100-32"]
    assert mi210
    assert mi100
    assert not any("vLLM" in r for o in mi210 for r in o.software_reasons)
    assert all(any("vLLM" in r for r in o.software_reasons) for o in mi100)
    assert not any(o.supported for o in mi100)


@pytest.mark.parametrize("platform", ["cuda", "rocm", "xpu"])
@pytest.mark.parametrize("tool", [software.VLLM, software.COMPILE])
def test_vllm_and_torch_compile_have_a_cited_dated_row_per_vendor(platform, tool):
    cell = software.PLATFORM_MATRIX[(platform, tool)]
    assert cell.supported is not None
    assert re.search(r"as of \d{4}-\d{2}|\(pytorch\.org, \d{4}-\d{2}\)", cell.source)


def test_an_unsloth_recipe_is_rejected_where_staff_mark_torch_compile_unsupported():
    """Unsloth's kernels need Triton (torch.compile's backend); a system whose tooling matrix
    says torch.compile does not run there is ruled out with the reason and its source."""
    catalog = default_catalog()
    systems = [
        s.model_copy(
            update={
                "tooling": {**s.tooling, software.COMPILE: False},
                "tooling_sources": {
                    **s.tooling_sources,
                    software.COMPILE: "Stanage support ticket, 2026-11",
                },
            }
        )
        if s.name == "stanage"
        else s
        for s in catalog.systems
    ]
    result = estimate(
        EstimateRequest(
            config=LLAMA_2_7B, task="lora", tokens=10**7, framework="unsloth", system="stanage"
        ),
        catalog.model_copy(update={"systems": systems}),
    )
    stanage = [o for o in result.options if o.system == "stanage"]
    assert stanage
    assert not any(o.supported or o.eligible for o in stanage)
    for option in stanage:
        (reason,) = option.software_reasons
        assert reason.startswith(
            "Unsloth's kernels and torch.compile need Triton for the GPU; not supported on this "
            "system's NVIDIA"
        )
        assert reason.endswith("GPUs (Stanage support ticket, 2026-11).")


def fine_tune_on(accelerator: str, **fields):
    fields.setdefault("task", "lora")
    request = EstimateRequest(
        config=LLAMA_2_7B,
        seq_len=2048,
        micro_batch=1,
        gradient_checkpointing=False,
        tokens=10**7,
        accelerator=accelerator,
        **fields,
    )
    single = [
        o for o in estimate(request, default_catalog()).options
        if o.accelerator == accelerator and o.num_gpus == 1
    ]  # fmt: skip
    assert single
    return single[0]


def test_a_gpu_without_a_fused_attention_kernel_trains_with_eager_attention_not_nothing():
    """COSMA8's MI100 has no flash-attention build (ROCm's covers MI200/MI300): a LoRA there
    is planned with eager attention, which keeps every layer's scores, instead of being
    ruled out for a kernel PyTorch falls back from on any GPU."""
    mi100 = fine_tune_on("mi100-32")
    asked_eager = fine_tune_on("mi100-32", flash_attention=False)
    mi210 = fine_tune_on("mi210-64")

    assert mi100.supported
    assert not mi100.software_reasons
    assert any(
        r.startswith("No fused attention kernel on AMD Instinct MI100") for r in mi100.reasons
    )
    assert mi100.memory.activations == asked_eager.memory.activations
    # 32 heads x 2,048^2 scores per layer: gigabytes the fused kernel never keeps.
    assert mi100.memory.activations > mi210.memory.activations + 5e9
    assert not any("fused attention" in r for r in mi210.reasons)


def test_a_job_that_lacks_more_than_the_attention_kernel_is_still_ruled_out():
    """QLoRA on the MI100 also needs bitsandbytes' 4-bit kernels, not confirmed on ROCm:
    eager attention would not make it run, so the option says what is missing."""
    mi100 = fine_tune_on("mi100-32", task="qlora")
    assert not mi100.supported
    assert any("fused attention kernel" in r for r in mi100.software_reasons)
    assert not any(r.startswith("No fused attention kernel") for r in mi100.reasons)


def test_the_result_says_its_recommended_gpus_attend_eagerly():
    request = EstimateRequest(
        config=LLAMA_2_7B, task="lora", seq_len=2048, tokens=10**7, accelerator="mi100-32"
    )
    result = estimate(request, default_catalog())
    assert result.recommendation.accelerator == "mi100-32"
    activations = next(a for a in result.assumptions if a.name.startswith("Activations"))
    assert "eager attention (scores kept): the recommended GPUs have no fused kernel" in (
        activations.value
    )


def _moe_qlora_warning(model: dict, **fields) -> str | None:
    result = estimate(
        EstimateRequest(config=model, task="qlora", tokens=10**8, **fields), default_catalog()
    )
    return next((w for w in result.warnings if "Transformers 5 stores them" in w), None)


def test_moe_qlora_through_transformers_says_what_transformers_5_does_to_its_experts():
    """Transformers 5 fuses Mixtral's experts into 3-D parameters, which bitsandbytes does not
    quantise (bitsandbytes issue #1849): a QLoRA counted 4-bit as on transformers 4.x would
    hold about 67 GB more there. The warning says so, and what to do."""
    mixtral = config("mistralai__Mixtral-8x7B-v0.1")
    warning = _moe_qlora_warning(mixtral)
    assert warning is not None
    assert "about 67 GB more in all" in warning
    assert "Pin transformers<5, or use Unsloth" in warning
    # Unsloth quantises them itself; LoRA has no 4-bit base; a dense model has no experts.
    assert _moe_qlora_warning(mixtral, framework="unsloth") is None
    assert _moe_qlora_warning(LLAMA_2_7B) is None


def test_the_moe_qlora_script_pins_the_transformers_the_estimate_assumes():
    """The recommendation's memory counts Mixtral's experts 4-bit, which only transformers 4.x
    gives: the starter script says so and how to pin it; a dense model's script does not."""

    def script(model: dict) -> str:
        request = EstimateRequest(
            config=model, task="qlora", tokens=10**8, system="stanage", accelerator="a100-80-sxm4"
        )
        return estimate(request, default_catalog()).slurm_script

    mixtral = script(config("mistralai__Mixtral-8x7B-v0.1"))
    assert '# pip install "transformers<5"' in mixtral
    assert "fused experts 16-bit (about 67 GB more)" in mixtral
    assert "transformers<5" not in script(LLAMA_2_7B)


def test_moe_4_bit_inference_through_transformers_warns_too_but_not_through_vllm():
    mixtral = config("mistralai__Mixtral-8x7B-v0.1")

    def warning(**fields):
        request = EstimateRequest(config=mixtral, task="inference", tokens=10**7, **fields)
        result = estimate(request, default_catalog())
        return next((w for w in result.warnings if "Transformers 5 stores them" in w), None)

    text = warning(precision="int4")
    assert text is not None
    assert text.startswith("4-bit inference of a mixture-of-experts model")
    assert "about 65 GB more in all." in text
    assert "about 45 GB more in all." in warning(precision="int8")
    assert warning(precision="int4", framework="vllm") is None
    assert warning(precision="bf16") is None
