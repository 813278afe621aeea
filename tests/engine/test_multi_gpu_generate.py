"""Generation over several GPUs with Transformers: current releases shard each layer
(tp_plan="auto" under torchrun), so the GPUs work together; 4.35 and older split the layers
between them (device_map="auto"), and a forward pass visits the GPUs one after another, so
k GPUs take as long as one holding every layer. The estimate and the script agree."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")
LLAMA2_70B = config("meta-llama__Llama-2-70b-hf")


def _gpu_hours(framework: str, num_gpus: int) -> float:
    request = EstimateRequest(
        config=LLAMA2_7B, task="inference", framework=framework, batch_size=8, seq_len=1024,
        new_tokens=256, tokens=10_000_000, system="stanage", accelerator="a100-80-sxm4",
        num_gpus=num_gpus,
    )  # fmt: skip
    return estimate(request, default_catalog()).recommendation.gpu_hours


def test_layers_split_with_device_map_cost_one_gpus_time_on_every_gpu():
    one, two = _gpu_hours("transformers_legacy", 1), _gpu_hours("transformers_legacy", 2)
    assert abs(two / one - 2) < 0.05


def test_tensor_parallel_generation_shares_the_work():
    """Each GPU reads half the weights per step; the host time per layer (eager generate()
    at batch 8) is not shared, so two GPUs cost more than one, less than twice."""
    one, two = _gpu_hours("transformers", 1), _gpu_hours("transformers", 2)
    assert one < two < 1.8 * one


def test_the_script_runs_what_was_estimated():
    def result(framework):
        request = EstimateRequest(
            config=LLAMA2_70B, task="inference", framework=framework, batch_size=8,
            seq_len=1024, new_tokens=256, tokens=5_000_000, system="stanage",
            accelerator="a100-80-sxm4",
        )  # fmt: skip
        return estimate(request, default_catalog())

    current = result("transformers")
    n = current.recommendation.num_gpus
    assert n > 1
    assert f"torchrun --nproc-per-node {n} infer.py" in current.slurm_script
    assert 'tp_plan="auto"' in current.slurm_script

    legacy = result("transformers_legacy")
    assert 'device_map="auto"' in legacy.slurm_script
    assert "torchrun" not in legacy.slurm_script
    assert any("one after another" in r for r in legacy.options[0].reasons)
