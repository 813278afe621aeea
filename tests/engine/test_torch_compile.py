"""Issue 13: torch.compile as a training knob. Compiling fuses the elementwise kernels between
matmuls, so a compiled layer waits less on memory: the per-layer roofline with
COMPILE_ELEMENTWISE_SHARE of the eager elementwise bytes, a constant set from torchtitan's
eager/compiled pair (Llama 3.1 8B, 8 H100: 5,762 and 6,667 tokens/s per GPU)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from advisor.engine import estimate
from advisor.engine.errors import EstimateError
from advisor.engine.models import AcceleratorSpec, EstimateRequest
from advisor.engine.roofline import compile_gain
from advisor.engine.workload import resolve_shape
from tests.engine.inputs import default_catalog

MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "advisor" / "model_configs"


def _config(name: str) -> dict:
    return json.loads((MODEL_CONFIGS / f"{name}.json").read_text())


LLAMA_32_3B = _config("meta-llama__Llama-3.2-3B")


@cache
def _on_a100(compiled: bool | None, task: str = "full_finetune", model: str = "3b"):
    cfg = LLAMA_32_3B if model == "3b" else _config("meta-llama__Llama-2-70b-hf")
    request = EstimateRequest(
        config=cfg,
        task=task,
        precision="bf16",
        framework="torchtune",
        torch_compile=compiled,
        batch_size=8,
        seq_len=4096,
        tokens=10**9,
        accelerator="a100-80-sxm4",
        system="stanage",
    )
    result = estimate(request, default_catalog())
    return result.recommendation, result


def test_the_constant_reproduces_the_pair_it_was_set_from():
    shape = resolve_shape(
        EstimateRequest(config=_config("meta-llama__Llama-3.1-8B"), task="pretrain")
    )
    h100_96gb = AcceleratorSpec(
        name="h100-96",
        display_name="H100 96GB HBM2e",
        vendor="nvidia",
        memory_gb=96,
        memory_bandwidth_gb_s=2400,
        bf16_tflops=989,
        fp16_tflops=989,
        bf16_supported=True,
    )
    assert compile_gain(shape, h100_96gb) == pytest.approx(6667 / 5762, rel=0.01)


def test_compiling_a_small_model_saves_about_a_tenth_and_changes_no_memory():
    eager, _ = _on_a100(None)
    compiled, result = _on_a100(True)
    assert compiled.gpu_hours < eager.gpu_hours
    assert eager.gpu_hours / compiled.gpu_hours == pytest.approx(1.10, abs=0.03)
    assert compiled.memory_per_gpu_bytes == eager.memory_per_gpu_bytes
    said = next(a for a in result.assumptions if a.name.startswith("Elementwise traffic left"))
    assert "compile=True" in said.value
    assert "torchtitan" in said.source
    assert "torch.compile" in next(
        a.source for a in result.assumptions if a.name == "Utilisation (recommended option)"
    )
    assert _on_a100(False)[0].gpu_hours == eager.gpu_hours
    assert any(r.endswith(", with torch.compile).") for r in compiled.reasons)
    assert not any("torch.compile" in r for r in eager.reasons)


def test_a_large_model_gains_less_it_waits_less_on_memory_already():
    small = _on_a100(None)[0].gpu_hours / _on_a100(True)[0].gpu_hours
    large = _on_a100(None, "lora", "70b")[0].gpu_hours / _on_a100(True, "lora", "70b")[0].gpu_hours
    assert 1 < large < small


def test_the_script_turns_it_on_in_the_librarys_own_terms():
    tune = _on_a100(True)[1].slurm_script
    assert "compile=True" in tune
    assert "# torch.compile, as estimated: compile=True" in tune
    assert "compile=True" not in _on_a100(None)[1].slurm_script
    request = EstimateRequest(
        config=LLAMA_32_3B, task="lora", framework="hf_trainer", torch_compile=True, tokens=10**8
    )
    assert "--torch_compile" in estimate(request, default_catalog()).slurm_script


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"task": "inference"}, "training setting"),
        ({"task": "full_finetune", "framework": "megatron"}, "Megatron-LM / NeMo does not"),
        ({"task": "lora", "framework": "unsloth"}, "Unsloth does not"),
    ],
)
def test_where_it_does_not_apply_the_field_says_why(fields, words):
    request = EstimateRequest(config=LLAMA_32_3B, torch_compile=True, **fields)
    with pytest.raises(EstimateError) as caught:
        estimate(request, default_catalog())
    assert caught.value.field == "torch_compile"
    assert words in str(caught.value)
