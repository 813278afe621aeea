"""Issue 14: what the parallel layout costs at scale (advisor/engine/scale_cost.py).

Each term on its own (ring all-reduce, ZeRO-3 traffic, overlap with backward, tensor-parallel
all-reduces, pipeline bubble), then through `estimate`: the same job needs more GPU hours when
its global batch is too small to hide the gradient exchange, or its nodes are joined by a
slower link, and the result says what it assumed."""

from __future__ import annotations

import pytest

from advisor.engine import estimate, scale_cost
from advisor.engine.models import EstimateRequest, NodeTypeSpec
from bench.engine_rankings import catalog_from_file


def node(gbit: float | None = 1600.0, intra: str = "nvlink", gpn: int = 8) -> NodeTypeSpec:
    return NodeTypeSpec(
        name="n",
        count=128,
        gpus_per_node=gpn,
        accelerator="a100-80-sxm4",
        intra_node_interconnect=intra,
        inter_node_interconnect="infiniband",
        inter_node_gbit_s=gbit,
    )


def test_a_ring_all_reduce_moves_twice_the_bytes_less_one_share_through_nvlink():
    link = scale_cost.links(node(), "a100-80-sxm4")
    # A100 NVLink 3: 300 GB/s each way, 65 % of it reached by NCCL.
    assert link.intra_gb_s == pytest.approx(300 * 0.65)
    seconds = scale_cost.collective_seconds(2, 10e9, 8, 8, link)
    assert seconds == pytest.approx(2 * 7 / 8 * 10e9 / (195e9))


def test_across_nodes_the_node_link_sets_the_time_and_a_faster_one_shortens_it():
    slow = scale_cost.links(node(200), "a100-80-sxm4")
    fast = scale_cost.links(node(1600), "a100-80-sxm4")
    t_slow = scale_cost.collective_seconds(2, 10e9, 64, 8, slow)
    t_fast = scale_cost.collective_seconds(2, 10e9, 64, 8, fast)
    assert t_slow == pytest.approx(2 * 7 / 8 * 10e9 / (200 / 8 * 0.65 * 1e9))
    assert t_slow == pytest.approx(8 * t_fast)
    # No rate in the catalog: one HDR InfiniBand port per node.
    assert scale_cost.links(node(None), "a100-80-sxm4").inter_node_gb_s == pytest.approx(
        slow.inter_node_gb_s
    )


def layout(**overrides):
    fields = {
        "params": 7e9,
        "grad_bytes_per_param": 2.0,
        "strategy": "ddp",
        "n": 512,
        "node": node(),
        "accelerator": "a100-80-sxm4",
        "global_batch": 1024,
        "micro": 1,
        "seq_len": 4096,
        "flops_per_token": 6 * 7e9,
        "achieved_flops": 0.5 * 312e12,
        "layers": 32,
        "hidden": 4096,
        "recompute": False,
    }
    fields.update(overrides)
    return scale_cost.training_layout_cost(**fields)


def test_a_large_global_batch_hides_the_gradient_exchange_behind_backward():
    cost = layout()
    assert cost.exchange_s > 0
    assert cost.exposed_s == 0
    assert cost.efficiency == 1.0


def test_a_small_global_batch_over_many_nodes_waits_for_the_exchange():
    small = layout(global_batch=512)  # one sequence per GPU
    slow = layout(global_batch=512, node=node(200))
    assert 0 < slow.efficiency < small.efficiency <= 1.0
    assert slow.exposed_s == pytest.approx(slow.exchange_s - small.compute_s * 2 / 3)


def test_zero3_moves_one_and_a_half_times_the_bytes_of_data_parallelism():
    ddp = layout(strategy="ddp", global_batch=512)
    zero3 = layout(strategy="zero3", global_batch=512)
    assert zero3.exchange_s == pytest.approx(1.5 * ddp.exchange_s)
    # ... but it overlaps the whole micro-batch, not only the backward pass.
    assert zero3.exposed_s == pytest.approx(max(zero3.exchange_s - zero3.compute_s, 0))


def test_tensor_parallel_all_reduces_four_times_per_layer_on_the_critical_path():
    link = scale_cost.links(node(), "a100-80-sxm4")
    one = scale_cost.collective_seconds(2, 1 * 4096 * 4096 * 2, 4, 4, link)
    seconds = scale_cost.tensor_parallel_seconds(4, 32, 1, 4096, 4096, link, recompute=False)
    assert seconds == pytest.approx(4 * 32 * one)
    recomputed = scale_cost.tensor_parallel_seconds(4, 32, 1, 4096, 4096, link, recompute=True)
    assert recomputed == pytest.approx(6 * 32 * one)
    tp = layout(strategy="tensor_parallel", n=4, tp=4, global_batch=8)
    assert tp.exchange_s == 0
    assert tp.tensor_parallel_s > 0
    assert tp.efficiency < 1


def test_the_pipeline_bubble_is_stages_less_one_over_micro_batches():
    assert scale_cost.pipeline_bubble(1, 8) == 0
    assert scale_cost.pipeline_bubble(4, 16) == pytest.approx(3 / 16)
    cost = layout(n=512, pp=4, global_batch=512, micro=1)
    # 512 GPUs / 4 stages = 128 data-parallel replicas; 512 sequences = 4 micro-batches each.
    assert cost.bubble_s == pytest.approx(cost.compute_s * 3 / 4)


def pretrain(batch: int, gbit_catalog=None, strategy: str = "ddp"):
    request = EstimateRequest(
        params=1_300_000_000,
        task="pretrain",
        precision="bf16",
        seq_len=2048,
        batch_size=batch,
        micro_batch=1,
        tokens=10**11,
        strategy=strategy,
        accelerator="a100-80-sxm4",
        num_gpus=64,
        gradient_checkpointing=False,
    )
    catalog = gbit_catalog or catalog_from_file()
    result = estimate(request, catalog)
    # Stanage: four A100s per node, 100 Gbit/s HDR-100 per node in the default catalog.
    options = [
        o
        for o in result.options
        if o.system == "stanage" and o.accelerator == "a100-80-sxm4" and o.num_gpus == 64
    ]
    assert options, [o.reasons for o in result.options]
    return result, options[0]


def test_deepspeed_zero2_reduces_every_micro_batch_and_gathers_the_parameters_each_step():
    """DeepSpeed ZeRO-2 keeps only its gradient partition, so every micro-batch's gradients
    are all-reduced, and the updated 16-bit parameters are all-gathered after the optimizer
    step; with overlap_comm off (DeepSpeed's default below stage 3) nothing is hidden."""
    link = scale_cost.links(node(), "a100-80-sxm4")
    per_micro, per_step = scale_cost.exchange_seconds("zero2", 7e9, 2.0, None, 512, 8, link)
    assert per_micro == pytest.approx(scale_cost.collective_seconds(2, 14e9, 512, 8, link))
    assert per_step == pytest.approx(scale_cost.collective_seconds(1, 14e9, 512, 8, link))
    ddp = layout(strategy="ddp", global_batch=4096)  # 8 micro-batches a GPU
    zero2 = layout(strategy="zero2", global_batch=4096)
    assert ddp.exposed_s == 0  # one all-reduce a step, behind the last backward pass
    assert zero2.exchange_s == pytest.approx(8 * per_micro + per_step)
    assert zero2.exposed_s == pytest.approx(zero2.exchange_s)
    assert zero2.efficiency < ddp.efficiency


def test_zero2_with_gradient_accumulation_costs_more_gpu_hours_than_ddp_on_a_slow_link():
    _, ddp = pretrain(4096)
    _, zero2 = pretrain(4096, strategy="zero2")
    # 64 micro-batches a step, each exchanged over Stanage's 100 Gbit/s per node.
    assert zero2.gpu_hours > 1.5 * ddp.gpu_hours


def test_the_estimate_charges_a_small_global_batch_for_its_exchange():
    _, small = pretrain(64)
    _, large = pretrain(4096)
    assert large.gpu_hours
    assert small.gpu_hours > 2 * large.gpu_hours


def test_the_result_states_the_layout_model_it_assumed():
    result, _ = pretrain(4096)
    names = {a.name: a for a in result.assumptions}
    assert "Parallel layout" in names
    assert "2(N-1)/N" in names["Parallel layout"].source


def test_the_result_says_what_the_recommended_layout_costs_per_step():
    result, _ = pretrain(4096)
    layout_line = next(a for a in result.assumptions if a.name == "Parallel layout")
    assert "recommended option: compute" in layout_line.value
    assert "of the time computing" in layout_line.value


@pytest.mark.parametrize(
    ("strategy", "tp"), [("ddp", 1), ("zero2", 1), ("zero3", 1), ("fsdp", 1), ("zero1", 2)]
)
@pytest.mark.parametrize("n", [1, 2, 8, 64])
@pytest.mark.parametrize("global_batch", [1, 64, 4096])
@pytest.mark.parametrize("recompute", [False, True])
def test_the_ranking_fast_path_gives_the_breakdowns_figure(
    strategy, tp, n, global_batch, recompute
):
    """StepModel.efficiency (per option in the ranking) equals training_layout_cost's; with
    tensor parallelism its collectives are tensor_parallel.py's, so only the exchange counts."""
    model = scale_cost.StepModel(
        params=7e9, grad_bytes=2.0, ddp_grad_bytes=4.0, weight_bytes=None, seq_len=2048,
        layers=32, hidden=4096,
    )  # fmt: skip
    for link_node in (node(1600), node(200, intra="pcie", gpn=4)):
        batch = max(global_batch, n // tp)
        full = layout(
            strategy=strategy, n=n, node=link_node, global_batch=batch, micro=1, seq_len=2048,
            recompute=recompute, tp=tp, tp_collectives=False,
            grad_bytes_per_param=model.grad_bytes_for(strategy),
        )  # fmt: skip
        fast = model.efficiency(
            link_node, "a100-80-sxm4", n, strategy, global_batch=batch, micro=1,
            flops_per_token=6 * 7e9, achieved_flops=0.5 * 312e12, recompute=recompute, tp=tp,
        )  # fmt: skip
        assert fast == pytest.approx(full.efficiency)


def _step_model(task: str):
    from advisor.engine.compute import training_step_model
    from advisor.engine.workload import build_workload, resolve_shape
    from tests.engine.inputs import config

    request = EstimateRequest(
        config=config("meta-llama__Llama-2-7b-hf"), task=task, precision="bf16", tokens=10**9
    )
    shape = resolve_shape(request)
    return training_step_model(shape, build_workload(request, shape))


def test_a_tensor_parallel_layout_reduces_megatrons_fp32_gradients():
    """Megatron's bf16 training accumulates and all-reduces gradients in fp32
    (accumulate_allreduce_grads_in_fp32), so its data-parallel exchange moves 4 bytes a
    parameter where ZeRO-1 alone reduces the 16-bit gradients; adapters stay 16-bit."""
    full = _step_model("pretrain")
    assert full.grad_bytes_for("zero1") == 2
    assert full.grad_bytes_for("zero1", tp=4) == 4
    link = scale_cost.links(node(200), "a100-80-sxm4")
    fp32 = scale_cost.exchange_seconds("zero1", full.params / 4, 4, None, 64, 2, link)
    bf16 = scale_cost.exchange_seconds("zero1", full.params / 4, 2, None, 64, 2, link)
    assert fp32 == (0.0, pytest.approx(2 * bf16[1]))  # once a step, none per micro-batch
    assert _step_model("lora").grad_bytes_for("zero1", tp=4) == 2


def test_a_zero2_script_says_how_to_hide_the_reduction_the_estimate_charges():
    result = estimate(
        EstimateRequest(
            params=1_300_000_000,
            task="pretrain",
            tokens=10**10,
            system="baskerville",
            accelerator="a100-80-sxm4",
            strategy="zero2",
            num_gpus=4,
        ),
        catalog_from_file(),
    )
    script = result.slurm_script
    assert "zero_optimization.stage = 2" in script
    assert "zero_optimization.overlap_comm = true hides it for about 4.5 x" in script
    layout_line = next(a for a in result.assumptions if a.name == "Parallel layout")
    assert "overlap_comm off, DeepSpeed's default below stage 3" in layout_line.value
    assert "parameter and gradient exchange" in layout_line.value
