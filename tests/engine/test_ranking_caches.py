"""The ranking shares work between options (per accelerator, per node layout, per strategy and
GPU count) within one estimate. These tests pin that the sharing never carries anything from
one estimate into the next, nor from one node type into another that has the same GPU."""

import pytest

from advisor.engine import estimate
from advisor.engine.models import (
    CatalogSpec,
    EstimateRequest,
    NodeTypeSpec,
    PartitionSpec,
    SystemSpec,
)
from tests.engine.catalog_fixture import ACCELERATORS, catalog
from tests.engine.inputs import config

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")


def capacities(result, accelerator):
    return {o.capacity_bytes for o in result.options if o.accelerator == accelerator}


def test_the_same_request_twice_gives_the_same_json():
    request = EstimateRequest(config=LLAMA2_7B, task="full_finetune", tokens=10**9)
    first = estimate(request, catalog()).model_dump_json()
    assert estimate(request, catalog()).model_dump_json() == first


def test_a_catalog_change_between_estimates_shows_in_the_next_one():
    request = EstimateRequest(config=LLAMA2_7B, task="lora", tokens=10**8)
    shrunk = CatalogSpec(
        accelerators=[
            a.model_copy(update={"memory_gb": 40}) if a.name == "a100-80-sxm4" else a
            for a in ACCELERATORS
        ],
        systems=catalog().systems,
        benchmarks=catalog().benchmarks,
    )
    before = estimate(request, catalog())
    after = estimate(request, shrunk)
    again = estimate(request, catalog())
    assert capacities(before, "a100-80-sxm4") == {80 * 2**30}
    assert capacities(after, "a100-80-sxm4") == {40 * 2**30}
    assert again.model_dump_json() == before.model_dump_json()


def test_one_request_does_not_leak_into_the_next():
    # On one GPU type, so the larger batch shows in the recommendation's memory (since issue 14
    # the cheapest option may be a smaller GPU that runs batch 8 as accumulated micro-batches).
    small = EstimateRequest(
        config=LLAMA2_7B, task="lora", tokens=10**8, batch_size=1, accelerator="a100-80-sxm4"
    )
    large = EstimateRequest(
        config=LLAMA2_7B, task="lora", tokens=10**8, batch_size=8, accelerator="a100-80-sxm4"
    )
    first = estimate(small, catalog())
    other = estimate(large, catalog())
    assert other.memory.activations > first.memory.activations
    assert estimate(small, catalog()).model_dump_json() == first.model_dump_json()


def test_vm_sizes_with_the_same_gpu_keep_their_own_size_and_price():
    """Two sizes of one A100: the same GPU hours on one GPU, but the 4-GPU size is rented
    whole at its own price, serving four copies of the model (2.00 against 1.00 a GPU hour:
    twice the cost, in a quarter of the time)."""
    cloud = SystemSpec(
        name="cloud",
        display_name="Cloud",
        kind="cloud",
        currency="USD",
        typical_queue_wait_hours=0,
        node_types=[
            NodeTypeSpec(
                name="one",
                count=0,
                gpus_per_node=1,
                accelerator="a100-80-pcie",
                price_per_gpu_hour=1.0,
            ),
            NodeTypeSpec(
                name="four",
                count=0,
                gpus_per_node=4,
                accelerator="a100-80-pcie",
                price_per_gpu_hour=2.0,
            ),
        ],
    )
    result = estimate(
        EstimateRequest(config=LLAMA2_7B, task="inference", tokens=10**8),
        CatalogSpec(accelerators=ACCELERATORS, systems=[cloud]),
    )
    single = sorted((o for o in result.options if o.strategy == "single"), key=lambda o: o.cost)
    assert [(o.num_gpus, o.nodes) for o in single] == [(1, 1), (1, 1)]
    assert single[0].gpu_hours == single[1].gpu_hours > 0
    cheap, whole = single
    assert abs(whole.cost - 2 * cheap.cost) <= 0.05
    assert whole.wall_hours == pytest.approx(cheap.wall_hours / 4, rel=0.01)
    assert any(r.startswith("runs 4 copies of the model on the 4 GPUs of the four") for r in
               whole.reasons)  # fmt: skip
    assert not any(r.startswith("runs") for r in cheap.reasons)


def test_a_node_type_in_several_partitions_gets_the_longest_and_the_first_on_a_tie():
    node = NodeTypeSpec(name="gpu", count=4, gpus_per_node=4, accelerator="a100-80-sxm4")
    system = SystemSpec(
        name="hpc",
        display_name="HPC",
        node_types=[node],
        partitions=[
            PartitionSpec(name="short", node_types=["gpu"], max_wall_hours=12),
            PartitionSpec(name="long", node_types=["gpu"], max_wall_hours=48),
            PartitionSpec(name="long-too", node_types=["gpu"], max_wall_hours=48),
        ],
    )
    result = estimate(
        EstimateRequest(config=LLAMA2_7B, task="inference", tokens=10**6),
        CatalogSpec(accelerators=ACCELERATORS, systems=[system]),
    )
    assert {o.partition for o in result.options} == {"long"}
