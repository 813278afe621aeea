"""How many GPUs one vLLM replica spans (serving_options.py).

Llama-2-70B in bf16 over two 80 GB GPUs leaves each about 3 GB of vLLM's reservation for the KV
cache; over four, each keeps about 40 GB, and a decoding step's read of the weights serves ten
times the sequences. vLLM's tuning guide says as much ("increase tensor_parallel_size" when the
KV cache runs short). GPUStack's performance lab measured the same turn for gpt-oss-120b on
H100s (vLLM 0.10.2, docs.gpustack.ai, "Optimizing GPT-OSS-120B Throughput on NVIDIA H100
GPUs"): tensor parallel 2 against one GPU per GPU +18.5 % at 2,000-token prompts, +21.1 % at
4,000, -7.6 % at 128-token prompts with 4 new tokens and +0.6 % at 32,000 (its optimised runs
also turned on asynchronous scheduling, so only the direction is checked here)."""

from __future__ import annotations

import pytest

from advisor import model_configs
from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA2_70B = "meta-llama__Llama-2-70b-hf"


def served(model: dict, **fields):
    request = EstimateRequest(config=model, task="inference", framework="vllm", **fields)
    return estimate(request, default_catalog())


def on(result, system: str, accelerator: str):
    return [
        o
        for o in result.options
        if o.system == system and o.accelerator == accelerator and o.eligible
    ]


def test_70b_on_80gb_gpus_takes_four_when_two_leave_no_room_for_the_kv_cache():
    free = served(config(LLAMA2_70B), tokens=10**8, new_tokens=256)
    pinned = served(config(LLAMA2_70B), tokens=10**8, new_tokens=256, num_gpus=2)
    (four,) = on(free, "stanage", "a100-80-sxm4")
    (two,) = on(pinned, "stanage", "a100-80-sxm4")
    assert (four.num_gpus, two.num_gpus) == (4, 2)
    assert four.gpu_hours < 0.8 * two.gpu_hours
    said = " ".join(four.reasons)
    assert "vLLM over 4 GPUs, not the 2 that hold the model" in said
    assert "KV cache" in said
    assert "tensor_parallel_size" in said
    # The cheapest option overall is now a four-GPU replica, not the KV-starved pair.
    assert free.recommendation.num_gpus >= 4


def test_a_stated_count_and_a_library_that_does_not_batch_keep_the_fewest_gpus():
    pinned = served(config(LLAMA2_70B), tokens=10**8, new_tokens=256, num_gpus=2)
    assert all("not the 2 that hold" not in " ".join(o.reasons) for o in pinned.options)
    generate = estimate(
        EstimateRequest(
            config=config(LLAMA2_70B), task="inference", tokens=10**8, new_tokens=256,
            framework="transformers",
        ),
        default_catalog(),
    )  # fmt: skip
    assert all(o.num_gpus == 2 for o in on(generate, "stanage", "a100-80-sxm4"))


def test_a_stated_batch_is_served_as_stated():
    """A stated concurrency is the researcher's traffic: no KV cache to fill."""
    result = served(config(LLAMA2_70B), tokens=10**8, new_tokens=256, batch_size=8)
    assert all(o.num_gpus == 2 for o in on(result, "stanage", "a100-80-sxm4"))


@pytest.mark.parametrize(
    ("prompt", "new", "gpus"),
    [(4_000, 200, 2), (128, 4, 1), (32_000, 100, 1)],
    ids=["long prompts: two", "short prompts: one", "very long prompts: one"],
)
def test_gpt_oss_120b_on_h100s_turns_where_gpustack_measured_it(prompt, new, gpus):
    model = model_configs.find_bundled("openai/gpt-oss-120b").config
    result = served(model, tokens=10**8, seq_len=prompt, new_tokens=new, accelerator="h100-80-sxm5")
    # Baskerville charges per GPU (a cloud VM bills all its GPUs, which favours using them).
    here = on(result, "baskerville", "h100-80-sxm5")
    assert here[0].num_gpus == gpus
    alone = [o for o in here if o.num_gpus == 1]
    assert alone
    assert alone[0].fits


# --- Pipeline stages over a node's PCIe-linked GPUs ------------------------------------------


def test_vllm_pipelines_a_70b_model_over_pcie_gpus_instead_of_all_reducing():
    """Azure's NC96ads_A100_v4 links its four A100s by PCIe only: tensor parallelism would
    all-reduce every layer's hidden states over it (twice per layer and pass, prompts included),
    which costs more than the larger KV cache of four GPUs saves. A stage of the layers per GPU
    passes one hidden state per sequence instead: about 32 GPU hours for the job against 53 for
    the two-GPU tensor-parallel replica the same VMs offer."""
    result = served(
        config(LLAMA2_70B), tokens=10**8, new_tokens=256, system="azure",
        accelerator="a100-80-pcie",
    )  # fmt: skip
    piped = [o for o in result.options if o.strategy == "pipeline_parallel" and o.eligible]
    split = [o for o in result.options if o.strategy == "tensor_parallel" and o.eligible]
    best = min(piped, key=lambda o: o.gpu_hours)
    assert (best.num_gpus, best.recipe.tp, best.recipe.pp) == (4, 1, 4)
    assert best.gpu_hours < 0.7 * min(o.gpu_hours for o in split)
    assert result.recommendation.strategy == "pipeline_parallel"
    said = " ".join(best.reasons)
    assert "talk over PCIe" in said
    assert "pipeline_parallel_size 4" in said
    # Each GPU holds about a quarter of the 138 GB of weights (the LM head's stage a little more).
    assert 34e9 < best.memory.weights < 37e9


def test_pipeline_stages_are_offered_only_to_vllm_and_only_over_pcie():
    nvlink = served(config(LLAMA2_70B), tokens=10**8, new_tokens=256, system="stanage")
    assert all(
        o.strategy != "pipeline_parallel" for o in nvlink.options if o.accelerator == "a100-80-sxm4"
    )
    tgi = estimate(
        EstimateRequest(
            config=config(LLAMA2_70B), task="inference", tokens=10**8, new_tokens=256,
            framework="tgi", system="azure",
        ),
        default_catalog(),
    )  # fmt: skip
    assert all(o.strategy != "pipeline_parallel" for o in tgi.options)


def test_one_request_at_a_time_keeps_tensor_parallelism_over_pcie():
    """One sequence in flight leaves all but one stage waiting: the pipeline costs about as
    many times more as it has stages, and the option says so."""
    result = served(
        config(LLAMA2_70B), tokens=10**6, new_tokens=256, batch_size=1, system="azure",
        accelerator="a100-80-pcie",
    )  # fmt: skip
    piped = [o for o in result.options if o.strategy == "pipeline_parallel" and o.eligible]
    assert piped
    assert any("pipeline stages wait" in r for o in piped for r in o.reasons)
    assert result.recommendation.strategy == "tensor_parallel"


def test_the_script_starts_vllm_with_one_stage_per_gpu():
    result = served(
        config("meta-llama__Llama-2-13b-hf"), tokens=10**8, new_tokens=256, system="stanage",
        accelerator="h100-80-pcie", num_gpus=2,
    )  # fmt: skip
    assert result.recommendation.strategy == "pipeline_parallel"
    script = result.slurm_script
    assert "tensor_parallel_size=1, pipeline_parallel_size=2" in script
    assert "--tensor-parallel-size 1 --pipeline-parallel-size 2" in script
