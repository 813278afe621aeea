"""A batch the researcher leaves out (workload.global_batch): the engine assumes what
practitioners run, says so, and keeps a batch that is given, 1 included."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")


def run(**fields):
    return estimate(EstimateRequest(**fields), default_catalog())


def batch_assumption(result):
    found = [a for a in result.assumptions if a.name.startswith(("Global batch", "Concurrent"))]
    return found[0] if found else None


def pick(result, system: str, accelerator: str, strategy: str, num_gpus: int):
    (option,) = [
        o
        for o in result.options
        if (o.system, o.accelerator, o.strategy, o.num_gpus)
        == (system, accelerator, strategy, num_gpus)
    ]
    return option


def test_lora_without_a_batch_assumes_8_sequences_and_says_so():
    result = run(config=LLAMA2_7B, task="lora", tokens=10**8)
    assert result.recommendation.recipe.global_batch == 8
    assumed = batch_assumption(result)
    assert assumed.name == "Global batch (fine-tuning, not given)"
    assert assumed.value.startswith(
        "8 sequences (you did not give a batch; Hugging Face Trainer's default per-device batch"
    )
    assert "per_device_train_batch_size defaults to 8" in assumed.source
    assert "a global batch of 8 sequences" in result.justification


def test_a_given_batch_of_1_is_kept_and_nothing_is_assumed():
    result = run(config=LLAMA2_7B, task="lora", tokens=10**8, batch_size=1)
    assert result.recommendation.recipe.global_batch == 1
    assert batch_assumption(result) is None


def test_pretraining_without_a_batch_steps_on_about_a_million_tokens():
    result = run(params=1_300_000_000, task="pretrain", tokens=10**10, seq_len=4096)
    assert result.recommendation.recipe.global_batch == 256  # 2^20 tokens / 4,096
    assumed = batch_assumption(result)
    assert assumed.name == "Global batch (pre-training, not given)"
    assert assumed.value.startswith(
        "256 sequences of 4,096 tokens, 1,048,576 tokens per step (you did not give a batch"
    )
    assert "GPT-3 paper" in assumed.source


def test_pretraining_on_8_gpus_costs_about_the_gpu_hours_of_one():
    """1.3B pre-training at the default batch: the gradient exchange once per 2^20 tokens no
    longer dominates, on 8 NVLink A100s in one Azure ND96amsr VM or over Baskerville's
    InfiniBand (4 GPUs per node). At batch 1 the same 8 GPUs cost 2-4 x one GPU's."""
    one = run(params=1_300_000_000, task="pretrain", tokens=10**10, num_gpus=1)
    eight = run(params=1_300_000_000, task="pretrain", tokens=10**10, num_gpus=8)
    for system in ("azure", "baskerville"):
        single = pick(one, system, "a100-80-sxm4", "single", 1)
        for strategy in ("ddp", "zero2"):
            wide = pick(eight, system, "a100-80-sxm4", strategy, 8)
            assert wide.gpu_hours < 1.3 * single.gpu_hours, (system, strategy)


def test_two_single_gpu_vms_no_longer_cost_thirty_times_one():
    """1.3B pre-training with DDP on two Azure NC24ads_A100_v4 VMs (one A100 each, no cluster
    network): at the default batch the one gradient all-reduce a step over Ethernet adds about
    a quarter to one NC48ads VM's two GPUs (at batch 1 it cost thirty times as much). DeepSpeed
    ZeRO-2 reduces every micro-batch's gradients (scale_cost.py), so across the same two VMs it
    costs several times DDP's."""
    result = run(params=1_300_000_000, task="pretrain", tokens=10**10)

    def on_two_gpus(strategy: str, nodes: int):
        # Azure's NC48ads and NC96ads VM sizes both hold two of them on one VM.
        return min(
            (
                o
                for o in result.options
                if (o.accelerator, o.strategy, o.num_gpus, o.nodes)
                == ("a100-80-pcie", strategy, 2, nodes)
            ),
            key=lambda o: o.gpu_hours,
        )

    one_vm, two_vms = on_two_gpus("ddp", 1), on_two_gpus("ddp", 2)
    assert one_vm.gpu_hours < two_vms.gpu_hours < 1.3 * one_vm.gpu_hours
    assert on_two_gpus("zero2", 2).gpu_hours > 3 * two_vms.gpu_hours


def test_inference_without_a_batch_serves_one_request_and_says_so():
    result = run(config=LLAMA2_7B, task="inference", tokens=10**6)
    assumed = batch_assumption(result)
    assert assumed.name == "Concurrent requests (inference, not given)"
    assert assumed.value.startswith("1 request (")
    assert "batches of 1 request" in result.justification


def test_a_pinned_micro_batch_larger_than_the_default_makes_up_the_batch():
    """micro_batch 16 without a batch is no contradiction: the assumed batch holds it."""
    result = run(
        config=LLAMA2_7B, task="lora", tokens=10**8, micro_batch=16, accelerator="a100-80-sxm4"
    )
    one_gpu = [o for o in result.options if o.num_gpus == 1 and o.fits]
    assert one_gpu
    for option in one_gpu:
        assert (option.recipe.micro_batch, option.recipe.global_batch) == (16, 16)
    wider = [o for o in result.options if o.num_gpus > 1 and o.fits]
    for option in wider:
        assert "(we assumed 16: every GPU runs the micro-batch of 16 pinned)." in " ".join(
            option.recipe.reasons
        )


def test_a_batch_the_gpus_cannot_share_evenly_is_rounded_up_and_says_why():
    """Lancaster's HEC L40S nodes hold 3 GPUs, so a week-long 1.3B pre-training run widens to
    6 GPUs on two nodes: 512 sequences do not split six ways, so each GPU takes 86 and the
    step holds 516; the recipe says that, not that a GPU would go without a sample."""
    from pathlib import Path

    from bench.engine_rankings import catalog_from_file

    lancaster = catalog_from_file(
        Path(__file__).resolve().parents[2] / "catalog/data/lancaster.json"
    )
    request = EstimateRequest(
        config=config("facebook__opt-1.3b"), task="pretrain", tokens=26 * 10**9,
        batch_size=512, system="hec", accelerator="l40s-48", num_gpus=6,
    )  # fmt: skip
    option = estimate(request, lancaster).recommendation
    assert option.recipe.global_batch == 516
    said = " ".join(option.recipe.reasons)
    assert "(you asked for 512, which 6 GPUs cannot share evenly" in said
    assert "at least one sample" not in said
