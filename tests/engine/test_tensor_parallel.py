"""Tensor parallelism as a training recipe knob, and CPU offload priced in time (issue 13 §1,
issue 14 §1), on the real default catalog."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from advisor.engine import estimate, offload
from advisor.engine.constants import NCCL_BUFFERS
from advisor.engine.errors import EstimateError
from advisor.engine.memory import MemoryModel, training_activations_per_layer
from advisor.engine.models import EstimateRequest
from advisor.engine.workload import build_workload, resolve_shape
from bench.engine_rankings import catalog_from_file

CONFIGS = Path(__file__).resolve().parent / "configs"
LLAMA2_70B = "meta-llama__Llama-2-70b-hf"
LLAMA3_8B = "meta-llama__Meta-Llama-3-8B"
TOKENS = 100_000_000


def config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


@cache
def default_catalog():
    return catalog_from_file()


def run(model: str = LLAMA2_70B, **fields):
    fields.setdefault("task", "full_finetune")
    fields.setdefault("batch_size", 64)
    fields.setdefault("seq_len", 4096)
    fields.setdefault("tokens", TOKENS)
    return estimate(EstimateRequest(config=config(model), **fields), default_catalog())


def on(result, accelerator: str, strategy: str | None = None) -> list:
    return [
        o
        for o in result.options
        if o.accelerator == accelerator
        and o.fits
        and o.headroom
        and (strategy is None or o.strategy == strategy)
    ]


def test_70b_full_finetune_on_8x80gb_gets_tensor_parallel_or_zero3_without_offload():
    """torchtune's 70B full fine-tune on one 8 x 80 GB node: tensor parallel 8 or ZeRO-3
    (FSDP) fit on the GPUs; the recommendation is whichever costs fewer GPU hours, never
    CPU offload."""
    result = run(framework="torchtune", num_gpus=8, accelerator="h100-80-sxm5")
    best = result.recommendation
    assert best.strategy in ("tensor_parallel", "zero3")
    assert best.recipe.offload == "none"
    assert best.fits
    assert best.num_gpus == 8
    tp = on(result, "h100-80-sxm5", "tensor_parallel")
    zero3 = on(result, "h100-80-sxm5", "zero3")
    assert tp, "tensor parallel fits one 8-GPU H100 node"
    assert zero3, "ZeRO-3 fits one 8-GPU H100 node"
    assert best.gpu_hours <= min(o.gpu_hours for o in tp + zero3)
    assert tp[0].recipe.tp in (2, 4, 8)
    assert tp[0].recipe.strategy == "tensor_parallel"
    why = " ".join(tp[0].recipe.reasons)
    assert f"tensor parallel {tp[0].recipe.tp} within the node" in why
    assert "all-reduces over NVLink" in why


def test_tensor_parallel_makes_it_fit_without_offload_and_says_so():
    """On 8 x A100 80 GB ZeRO-3 alone needs more than 80 GB per GPU without checkpointing;
    tensor parallel 8 fits and the reason names what it replaces."""
    result = run(framework="torchtune", num_gpus=8, accelerator="a100-80-sxm4")
    tp = on(result, "a100-80-sxm4", "tensor_parallel")
    assert tp
    reason = tp[0].recipe.reasons[0]
    assert "makes it fit 8 x 80.0 GB without offload" in reason
    assert "ZeRO-3 on the same GPUs with the same recipe" in reason


def test_a_pinned_tensor_parallel_degree_is_kept():
    result = run(LLAMA3_8B, framework="megatron", tensor_parallel=2, tokens=10_000_000)
    eligible = [o for o in result.options if o.eligible]
    assert eligible
    assert all(o.strategy == "tensor_parallel" and o.recipe.tp == 2 for o in eligible)
    one_gpu_nodes = [o for o in result.options if o.nodes >= 1 and not o.eligible]
    assert any(
        "tensor parallel 2 needs 2 GPUs in one node" in " ".join(o.reasons) for o in one_gpu_nodes
    )


def test_tensor_parallel_one_rules_it_out():
    result = run(framework="torchtune", num_gpus=8, tensor_parallel=1)
    assert all(o.recipe.tp == 1 for o in result.options)


@pytest.mark.parametrize("framework", [None, "not_sure", "hf_trainer", "unsloth", "axolotl"])
def test_libraries_without_tensor_parallel_training_never_get_tp(framework):
    result = run(framework=framework, num_gpus=8)
    assert all(o.recipe.tp == 1 for o in result.options)
    assert all(o.strategy != "tensor_parallel" for o in result.options)


def test_pinning_tp_for_a_library_without_it_is_a_clear_error():
    with pytest.raises(EstimateError) as err:
        run(framework="hf_trainer", tensor_parallel=4)
    assert "tensor_parallel" in str(err.value.errors)
    assert "does not train with tensor parallelism" in str(err.value.errors)


def test_pinned_tp_must_divide_the_pinned_gpu_count():
    with pytest.raises(EstimateError) as err:
        run(framework="megatron", tensor_parallel=4, num_gpus=6)
    assert "does not divide num_gpus 6" in str(err.value.errors)


def test_offload_loses_to_full_checkpointing_when_both_fit():
    """A pinned GPU count where ZeRO-3 fits only with full checkpointing and ZeRO-3 offload
    fits without it: offload's host traffic and CPU optimizer step cost more GPU hours than
    recomputing a third of the FLOPs, so the recommendation checkpoints."""
    common = {"framework": "torchtune", "num_gpus": 8, "accelerator": "h100-80-sxm5"}
    checkpointed = run(strategy="zero3", **common)
    offloaded = run(strategy="zero3_offload", **common)
    zero3 = on(checkpointed, "h100-80-sxm5", "zero3")[0]
    cpu = on(offloaded, "h100-80-sxm5", "zero3_offload")[0]
    assert zero3.recipe.checkpointing == "full"
    assert zero3.recipe.offload == "none"
    assert cpu.recipe.offload == "optimizer_and_weights"
    assert zero3.gpu_hours < cpu.gpu_hours
    assumed = {a.name for a in offloaded.assumptions}
    assert {"Host link bandwidth (CPU offload)", "DeepSpeedCPUAdam update rate"} <= assumed
    assert run(**common).recommendation.strategy != "zero3_offload"


def test_offload_time_shrinks_with_more_ranks_and_bigger_steps():
    one = offload.seconds_per_step(7e9, 7e9, 1, 1, 12)
    assert offload.seconds_per_step(7e9, 7e9, 8, 1, 12) == pytest.approx(one / 8)
    # Every accumulated micro-batch fetches the offloaded parameters again.
    assert offload.seconds_per_step(7e9, 7e9, 1, 4, 12) > one


def test_sequence_parallel_splits_every_activation_of_a_layer():
    """Korthikanti et al. 2022 eq. 4: with sequence parallelism a layer keeps 1/t of what
    it keeps on one GPU; without it the norm and dropout inputs stay whole (eq. 2)."""
    request = EstimateRequest(config=config(LLAMA3_8B), task="full_finetune", batch_size=1)
    shape = resolve_shape(request)
    wl = build_workload(request, shape)
    whole = training_activations_per_layer(shape, wl)
    split = training_activations_per_layer(shape, wl, tp=4, sequence_parallel=True)
    assert split == pytest.approx(whole / 4)
    assert training_activations_per_layer(shape, wl, tp=4) > split


def test_the_sbatch_script_launches_the_tensor_parallel_recipe():
    """Two 4-GPU Baskerville nodes: tensor parallel 4 within each, data parallel across."""
    result = run(
        LLAMA3_8B, framework="megatron", num_gpus=8, system="baskerville", tensor_parallel=4
    )
    best = result.recommendation
    assert best.recipe.tp == 4
    assert best.nodes == 2
    script = result.slurm_script
    assert "--tensor-model-parallel-size 4 --sequence-parallel" in script
    assert "--nnodes=2 --nproc_per_node=4" in script
    assert "tensor parallel 4 within each node" in script
    assert "--use-distributed-optimizer" in script
    assert "torchrun" in script


def test_tensor_and_data_parallel_groups_each_hold_nccl_buffers():
    """Two communicators (tensor-parallel group, data-parallel group) keep two sets of NCCL
    buffers; one tensor-parallel group alone keeps one."""
    request = EstimateRequest(config=config(LLAMA3_8B), task="full_finetune", batch_size=8)
    shape = resolve_shape(request)
    model = MemoryModel(shape, build_workload(request, shape))
    one_group = model.per_gpu("tensor_parallel/4", 4)["cuda_context"]
    two_groups = model.per_gpu("tensor_parallel/4", 8)["cuda_context"]
    assert two_groups - one_group == int(NCCL_BUFFERS.value)


def test_a_tensor_parallel_recommendation_states_its_link_assumption():
    result = run(framework="torchtune", num_gpus=8, accelerator="h100-80-sxm5", tensor_parallel=8)
    assert result.recommendation.recipe.tp == 8
    named = {a.name: a for a in result.assumptions}
    assumed = named["Tensor-parallel all-reduces"]
    assert "300 GB/s per GPU (NVLink, H100 scaled from A100 by link count)" in assumed.value
    assert "nccl-tests" in assumed.source
