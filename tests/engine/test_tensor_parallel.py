"""Tensor parallelism as a training recipe knob, and CPU offload priced in time (issue 13 §1,
issue 14 §1), on the real default catalog."""

from __future__ import annotations

import pytest

from advisor.engine import estimate, offload
from advisor.engine.activations import training_activations_per_layer
from advisor.engine.constants import NCCL_BUFFERS
from advisor.engine.errors import EstimateError
from advisor.engine.memory import MemoryModel
from advisor.engine.models import EstimateRequest
from advisor.engine.tensor_parallel import comm_seconds_per_token
from advisor.engine.workload import build_workload, resolve_shape
from tests.engine.inputs import config, default_catalog

LLAMA2_70B = "meta-llama__Llama-2-70b-hf"
LLAMA3_8B = "meta-llama__Meta-Llama-3-8B"
LLAMA2_13B = "meta-llama__Llama-2-13b-hf"
LLAMA2_7B = "meta-llama__Llama-2-7b-hf"
TOKENS = 100_000_000


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


def test_70b_full_finetune_on_8x80gb_gets_tensor_parallel_or_fsdp_without_offload():
    """torchtune's 70B full fine-tune on one 8 x 80 GB node: tensor parallel 8 or FSDP (its
    distributed recipes' sharding, ZeRO-3's memory) fit on the GPUs; the recommendation is
    whichever costs fewer GPU hours, never CPU offload."""
    result = run(framework="torchtune", num_gpus=8, accelerator="h100-80-sxm5")
    best = result.recommendation
    assert best.strategy in ("tensor_parallel", "fsdp")
    assert best.recipe.offload == "none"
    assert best.fits
    assert best.num_gpus == 8
    tp = on(result, "h100-80-sxm5", "tensor_parallel")
    fsdp = on(result, "h100-80-sxm5", "fsdp")
    assert tp, "tensor parallel fits one 8-GPU H100 node"
    assert fsdp, "FSDP fits one 8-GPU H100 node"
    assert best.gpu_hours <= min(o.gpu_hours for o in tp + fsdp)
    assert tp[0].recipe.tp in (2, 4, 8)
    assert tp[0].recipe.strategy == "tensor_parallel"
    why = " ".join(tp[0].recipe.reasons)
    assert f"tensor parallel {tp[0].recipe.tp} within the node" in why
    assert "all-reduces over NVLink" in why


def test_tensor_parallel_makes_it_fit_without_offload_and_says_so():
    """On 8 x A100 80 GB FSDP alone (torchtune's sharding) needs more than 80 GB per GPU
    without checkpointing; tensor parallel 8 fits and the reason names what it replaces."""
    result = run(framework="torchtune", num_gpus=8, accelerator="a100-80-sxm4")
    tp = on(result, "a100-80-sxm4", "tensor_parallel")
    assert tp
    reason = tp[0].recipe.reasons[0]
    assert "makes it fit 8 x 85.9 GB (80 GiB) without offload" in reason
    assert "FSDP on the same GPUs with the same recipe" in reason


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
    checkpointed = run(strategy="fsdp", **common)
    offloaded = run(strategy="zero3_offload", **common)
    zero3 = on(checkpointed, "h100-80-sxm5", "fsdp")[0]
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


def test_tensor_parallel_ruled_out_by_heads_that_do_not_split_carries_no_gpu_hours():
    """GPT-2 XL has 25 attention heads: tensor parallel 2 (pinned; the model fits one GPU, so
    it is otherwise not tried) does not split them, so training's tensor-parallel options are
    ruled out and say why. They used to
    be priced as tensor parallel over every GPU allowed (the inference layout), an impossible
    layout with GPU hours, wall time and a charge; now they carry none of those and do not
    claim to fit."""
    result = run(
        "openai-community__gpt2-xl", framework="torchtune", seq_len=1024, tensor_parallel=2
    )
    tp = [o for o in result.options if o.strategy == "tensor_parallel"]
    assert tp, "torchtune trains with tensor parallelism, so the layout is tried"
    for option in tp:
        assert not option.eligible
        assert not option.fits
        assert not option.headroom
        assert "25 attention heads evenly" in " ".join(option.reasons)
        assert option.gpu_hours is None
        assert option.requested_gpu_hours is None
        assert option.wall_hours is None
        assert option.cost is None
        assert option.charge.total is None
        assert option.recipe is None
    # What the API returns: the ruled-out options survive the JSON round trip unpriced.
    again = type(result).model_validate_json(result.model_dump_json())
    assert all(o.gpu_hours is None for o in again.options if o.strategy == "tensor_parallel")


def test_a_single_key_value_head_is_kept_whole_so_starcoder_trains_tensor_parallel():
    """StarCoder has one key/value head (multi-query attention). BigCode trained it with
    tensor parallel 4 in their Megatron-LM fork, which keeps that head whole on every rank
    (arXiv:2305.06161 section 5): the engine offers tensor-parallel training for it and
    prices it, instead of ruling every degree out."""
    result = run("bigcode__starcoder", framework="megatron", num_gpus=8)
    tp = [o for o in result.options if o.strategy == "tensor_parallel" and o.fits]
    assert tp, "a tensor-parallel layout fits"
    assert all(o.recipe.tp > 1 and o.gpu_hours for o in tp)


# --- Pipeline parallelism and Megatron's layouts (issue 14) ---


def cluster(gpus: int = 512, accelerator: str = "a100-80-sxm4"):
    """The default catalog's accelerators with one system of 8-GPU NVLink nodes, enough of
    them for `gpus`, as the published pre-training runs had (DGX A100: 8 x 200 Gbit/s)."""
    from advisor.engine.models import CatalogSpec, NodeTypeSpec, PartitionSpec, SystemSpec

    base = default_catalog()
    node = NodeTypeSpec(
        name="dgx",
        count=gpus // 8,
        gpus_per_node=8,
        accelerator=accelerator,
        intra_node_interconnect="nvlink",
        inter_node_interconnect="infiniband",
        inter_node_gbit_s=1600.0,
    )
    system = SystemSpec(
        name="cluster",
        display_name="Cluster",
        node_types=[node],
        partitions=[PartitionSpec(name="gpu", node_types=["dgx"])],
    )
    return CatalogSpec(accelerators=base.accelerators, systems=[system], benchmarks=[])


def pretrain_70b(**fields):
    """Llama 2 70B pre-training as Meta ran it: 4M-token batches of 4,096-token sequences,
    flash attention, no activation recomputation."""
    request = {
        "task": "pretrain",
        "batch_size": 1024,
        "micro_batch": 1,
        "seq_len": 4096,
        "tokens": 2_000_000_000_000,
        "flash_attention": True,
        "gradient_checkpointing": False,
        "num_gpus": 512,
        **fields,
    }
    return estimate(EstimateRequest(config=config(LLAMA2_70B), **request), cluster())


def test_70b_pretraining_on_512_a100s_fits_with_pipeline_parallel():
    """Without recomputation a 70B model's activations alone outgrow an 80 GB GPU under
    ZeRO-3; Megatron-LM splits the layers over pipeline stages as well as tensor-parallel
    ranks, and the engine now offers that layout: it fits, names its stages, prices the
    bubble and puts the stages in the sbatch script."""
    result = pretrain_70b(framework="megatron")
    best = result.recommendation
    assert best is not None
    assert best.fits
    assert best.strategy == "tensor_parallel"
    assert best.num_gpus == 512
    assert best.recipe.tp > 1
    assert best.recipe.pp > 1
    why = " ".join(best.recipe.reasons)
    assert f"{best.recipe.pp} pipeline stages" in why
    assert "pipeline idles (p - 1) / m" in why
    # Megatron has no ZeRO-3: the layout is compared with what it does have, DDP.
    assert "DDP on the same GPUs" in why
    assert f"--pipeline-model-parallel-size {best.recipe.pp}" in result.slurm_script
    named = {a.name: a for a in result.assumptions}
    assert "pipeline bubble" in named["Parallel layout"].value


def test_the_pipeline_bubble_is_in_the_gpu_hours():
    """Four stages with 8 micro-batches per pipeline idle 3/8 of the compute; the same job
    split over tensor-parallel ranks alone does not. A researcher comparing the two sees the
    bubble in the GPU hours."""
    small_batch = {"batch_size": 64, "num_gpus": 64, "framework": "megatron", "tensor_parallel": 8}
    deep = pretrain_70b(pipeline_parallel=4, **small_batch)
    flat = pretrain_70b(pipeline_parallel=2, **small_batch)
    deep_tp = [o for o in deep.options if o.strategy == "tensor_parallel"][0]
    flat_tp = [o for o in flat.options if o.strategy == "tensor_parallel"][0]
    assert (deep_tp.recipe.pp, flat_tp.recipe.pp) == (4, 2)
    # dp 2 with 4 stages: 32 micro-batches per pipeline (3/32); dp 4 with 2: 16 (1/16).
    assert deep_tp.gpu_hours > flat_tp.gpu_hours
    assert "3/32" in " ".join(deep_tp.recipe.reasons)


def test_megatron_is_offered_tensor_and_pipeline_layouts_not_zero3():
    """Megatron-LM has no ZeRO-3 or FSDP: it splits weights with tensor and pipeline
    parallelism and shards only the optimizer. A 70B full fine-tune with framework
    "megatron" used to get ZeRO-3 on 32 x A100 40GB; now it gets a tensor(-and-pipeline)
    layout, and asking for ZeRO-3 says why not."""
    result = run(framework="megatron", task="full_finetune", num_gpus=32)
    strategies = {o.strategy for o in result.options}
    assert not strategies & {"zero2", "zero3", "fsdp", "zero3_offload"}
    best = result.recommendation
    assert best is not None
    assert best.strategy == "tensor_parallel"
    asked = run(framework="megatron", task="full_finetune", num_gpus=32, strategy="zero3")
    zero3 = [o for o in asked.options if o.strategy == "zero3"]
    assert zero3
    assert not any(o.eligible for o in zero3)
    assert "Megatron-LM / NeMo has no ZeRO stage 3" in " ".join(zero3[0].reasons)


def test_deepspeed_gets_megatron_deepspeed_layouts_only_where_no_zero_stage_fits():
    """Tensor parallelism under DeepSpeed means Megatron-DeepSpeed, another code base than
    DeepSpeed with the Transformers Trainer: a 70B full fine-tune that ZeRO-3 fits on 32 x
    80 GB is not offered it; a 70B pre-training without recomputation, which no ZeRO stage
    fits, is, and the option says which code base it means."""
    fits_with_zero = run(
        framework="deepspeed", num_gpus=32, accelerator="a100-80-sxm4", batch_size=32
    )
    a100 = [o for o in fits_with_zero.options if o.accelerator == "a100-80-sxm4"]
    assert any(o.fits and o.strategy.startswith("zero") for o in a100)
    assert not [o for o in a100 if o.strategy == "tensor_parallel"]
    only_layout = pretrain_70b(framework="deepspeed")
    best = only_layout.recommendation
    assert best is not None
    assert best.strategy == "tensor_parallel"
    assert "Megatron-DeepSpeed" in " ".join(best.recipe.reasons)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"framework": "torchtune"}, "does not train with pipeline stages"),
        ({"framework": "megatron", "tensor_parallel": 1}, "come with tensor parallelism"),
        ({"framework": "megatron", "num_gpus": 6}, "do not divide num_gpus 6"),
    ],
)
def test_pinned_pipeline_stages_that_cannot_run_are_a_clear_error(fields, says):
    with pytest.raises(EstimateError) as err:
        run(pipeline_parallel=4, **fields)
    assert "pipeline_parallel" in str(err.value.errors)
    assert says in str(err.value.errors)


def test_pinned_pipeline_stages_are_the_layout_even_where_one_gpu_would_do():
    """A researcher who pins pipeline stages gets that layout, not a quieter single-GPU
    option that would silently ignore the pin."""
    result = run("meta-llama__Llama-2-7b-hf", framework="megatron", pipeline_parallel=2, num_gpus=8)
    assert {o.strategy for o in result.options} == {"tensor_parallel"}
    assert all(o.recipe.pp == 2 for o in result.options if o.recipe is not None)


def test_torchtune_is_offered_its_own_fsdp_not_deepspeed_stages():
    """torchtune's distributed recipes shard with FSDP; it has no DDP or DeepSpeed ZeRO
    recipe. Its multi-GPU options are FSDP (or tensor parallel), and the script runs its
    distributed recipe."""
    result = run(LLAMA2_13B, task="full_finetune", framework="torchtune")
    strategies = {o.strategy for o in result.options}
    assert "fsdp" in strategies
    assert not strategies & {"ddp", "zero1", "zero2", "zero3"}
    asked = run(LLAMA2_13B, task="full_finetune", framework="torchtune", strategy="zero2")
    zero2 = [o for o in asked.options if o.strategy == "zero2"]
    assert zero2
    assert not any(o.eligible for o in zero2)
    assert "torchtune has no ZeRO stage 2" in " ".join(zero2[0].reasons)


def test_a_reference_forward_pass_adds_its_own_all_reduces():
    """A DPO reference's forward pass all-reduces the activations twice a layer, as the policy's
    does: 6 collectives per layer and token against SFT's 4 (KTO's KL pass and its reference's
    two: 10)."""
    shape = resolve_shape(EstimateRequest(config=config(LLAMA3_8B), task="full_finetune"))

    def per_token(objective: str) -> float:
        request = EstimateRequest(
            config=config(LLAMA3_8B), task="full_finetune", training_objective=objective,
            framework="trl", seq_len=1024, tokens=TOKENS,
        )  # fmt: skip
        return comm_seconds_per_token(shape, build_workload(request, shape), 4, "none", 1e11)

    sft = per_token("sft")
    assert per_token("dpo") == pytest.approx(sft * 6 / 4)
    assert per_token("kto") == pytest.approx(sft * 10 / 4)


def test_generation_all_reduces_are_timed_from_the_measured_kernel():
    """A small all-reduce during generation costs vLLM's measured latency (about 9 us at 2, 4
    or 8 GPUs), the same call on more bytes costs more, beyond the measured 1 MB the bytes
    cross at the node's bus bandwidth, and a PCIe node pays more than NVLink for the same
    message. One GPU has nothing to all-reduce."""
    from advisor.engine.tensor_parallel import generation_all_reduce_seconds as all_reduce

    catalog = default_catalog()
    nodes = {n.intra_node_interconnect: n for s in catalog.systems for n in s.node_types}
    acc = next(a for a in catalog.accelerators if a.name == "a100-80-sxm4")
    nvlink, pcie = nodes["nvlink"], nodes["pcie"]
    assert all_reduce(1, 1e6, nvlink, acc) == 0.0
    for tp in (2, 4, 8):
        assert 8e-6 < all_reduce(tp, 512, nvlink, acc) < 11e-6
    sizes = (512, 32_768, 262_144, 1_048_576, 4_194_304)
    times = [all_reduce(8, size, nvlink, acc) for size in sizes]
    assert times == sorted(times)
    assert times[3] == pytest.approx(45e-6)
    assert times[4] == pytest.approx(45e-6 + 2 * 7 / 8 * 3_145_728 / 200e9)
    assert all_reduce(4, 1_048_576, pcie, acc) > 2 * all_reduce(4, 1_048_576, nvlink, acc)


def test_tensor_parallel_serving_pays_its_all_reduces_and_says_so():
    """Serving Llama-2-7B with vLLM over two A100s: every pass of the pair waits for 2 x 32
    all-reduces of the hidden states, so the same pair joined by PCIe instead of NVLink (whose
    prompt chunks' all-reduces cross at a tenth of the speed) costs more GPU hours; the
    recommendation of a 70B model over several GPUs states them as an assumption, with its
    source, and one GPU has none to state."""
    catalog = default_catalog()
    site = next(s for s in catalog.systems if s.name == "stanage")
    node = next(n for n in site.node_types if n.accelerator == "a100-80-sxm4")
    pcie = node.model_copy(update={"intra_node_interconnect": "pcie"})
    bridged = catalog.model_copy(
        update={"systems": [site.model_copy(update={"node_types": [pcie], "partitions": []})]}
    )
    fields = {
        "config": config(LLAMA2_7B), "task": "inference", "framework": "vllm",
        "batch_size": 4, "seq_len": 4096, "new_tokens": 256, "tokens": 10**9,
        "accelerator": "a100-80-sxm4", "system": "stanage", "num_gpus": 2,
    }  # fmt: skip
    nvlink_hours = estimate(EstimateRequest(**fields), catalog).options[0].gpu_hours
    pcie_hours = estimate(EstimateRequest(**fields), bridged).options[0].gpu_hours
    assert pcie_hours > nvlink_hours * 1.02
    result = run(task="inference", framework="vllm", batch_size=1, seq_len=512, new_tokens=512)
    best = result.options[0]
    assert best.strategy == "tensor_parallel"
    assert best.recipe.tp > 1
    said = next(a for a in result.assumptions if a.name == "Tensor-parallel all-reduces")
    assert "twice per layer" in said.value
    assert "sglang pull request 2904" in said.source
    single = {**fields, "num_gpus": 1}
    assert not any(
        a.name == "Tensor-parallel all-reduces"
        for a in estimate(EstimateRequest(**single), catalog).assumptions
    )


def test_key_value_heads_replicated_over_a_tensor_parallel_group_are_read_on_every_gpu():
    """StarCoder has one key/value head (multi-query attention): over four GPUs vLLM keeps a
    copy on each and every GPU reads it, so a decoding step's cache reads take four times the
    bytes of one GPU's; Llama-2-7B's 32 heads split four ways and read once."""
    from advisor.engine.decode_speed import decode_speed
    from advisor.engine.inference_reads import decode_cache_seconds

    vllm = decode_speed("vllm")
    for name, copies in (("bigcode__starcoder", 4), (LLAMA2_7B, 1)):
        request = EstimateRequest(
            config=config(name), task="inference", framework="vllm", batch_size=8,
            seq_len=2048, new_tokens=512, tokens=10**7,
        )  # fmt: skip
        shape = resolve_shape(request)
        wl = build_workload(request, shape)
        one = decode_cache_seconds(vllm, shape, wl, 2e12)
        four = decode_cache_seconds(vllm, shape, wl, 2e12, tp=4)
        assert four == pytest.approx(one * copies)
