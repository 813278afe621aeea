"""Sizing limits beyond the GPUs' memory: CPU offload's count must leave each node's memory
room for its share of the offloaded states, and a layout over nodes with no cluster network
between them is marked and ranked after the rest."""

from __future__ import annotations

from functools import cache

from advisor.engine import estimate, offload
from advisor.engine.models import EstimateRequest
from bench.engine_rankings import requests
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config, default_catalog

SPANS = "so a job may not be able to span them"


@cache
def lora_70b():
    """ "70B LoRA ckpt" of the ranking bench on the fixture catalog."""
    return estimate(requests()["70B LoRA ckpt"], catalog())


@cache
def pretrain_7b():
    """7B pretraining on 10^10 tokens: more than one A100 80GB, on the real default catalog."""
    request = EstimateRequest(params=7_000_000_000, task="pretrain", tokens=10**10)
    return estimate(request, default_catalog())


def on_node(options, node: str, strategy: str):
    """The option for `strategy` on the node type named `node` (its reasons name it)."""
    (option,) = [
        o for o in options if o.strategy == strategy and any(node in why for why in o.reasons)
    ]
    return option


def pick(options, system: str, accelerator: str, strategy: str):
    (option,) = [
        o
        for o in options
        if (o.system, o.accelerator, o.strategy) == (system, accelerator, strategy)
    ]
    return option


def test_offload_takes_the_fewest_gpus_whose_nodes_hold_the_offloaded_states():
    """Hex's Extended 3 nodes: 3 A5000s and 128 GB each. 70B LoRA offloads 141.7 GB; on one
    node (up to 3 GPUs) that node keeps all of it; on 6 GPUs (2 nodes) each keeps half."""
    option = pick(lora_70b().options, "hex", "rtx-a5000-24", "zero3_offload")
    assert (option.num_gpus, option.nodes) == (6, 2)
    assert option.fits
    assert option.eligible
    (said,) = [why for why in option.reasons if why.startswith("CPU offload uses")]
    assert said == (
        "CPU offload uses 6 GPUs on 2 nodes so that each node's memory holds its share of the "
        "offloaded states (70.8 GB of 128 GB); on 1 GPU a node would keep 141.7 GB."
    )
    # The host check's own formula agrees: a whole node's share on 3 GPUs is too much.
    assert offload.host_bytes_per_node(141.7e9, 3, 3) > 128e9
    assert offload.host_bytes_per_node(141.7e9, 6, 3) <= 128e9
    assert not any("in each node's memory" in why for why in option.reasons)


def test_offload_that_the_node_already_holds_keeps_its_count():
    """COSMA8's composable A100 node has 4,096 GB: one GPU, as before, and nothing said."""
    found = estimate(requests()["70B LoRA ckpt"], default_catalog()).options
    option = pick(found, "cosma8", "a100-40-sxm4", "zero3_offload")
    assert option.num_gpus == 1
    assert option.eligible
    assert not any(why.startswith("CPU offload uses") for why in option.reasons)


def test_a_layout_over_vms_without_a_cluster_network_is_marked_and_ranked_after():
    """7B ZeRO-2 on two single-GPU NC24ads_A100_v4 VMs (Ethernet only, no InfiniBand): still
    offered, but it says so, and every option on a fully available system that needs no such
    network ranks first, CPU offload on one of the same VMs included."""
    options = pretrain_7b().options
    spread = on_node(options, "Standard_NC24ads_A100_v4", "zero2")
    assert (spread.num_gpus, spread.nodes) == (2, 2)
    assert spread.eligible
    (said,) = [why for why in spread.reasons if why.startswith("needs 2 nodes")]
    assert said == (
        "needs 2 nodes; Standard_NC24ads_A100_v4 nodes have no cluster network between them "
        "(inter-node interconnect: none), so a job may not be able to span them, and where it "
        "can, only over their front-end Ethernet (priced as such)."
    )
    # Limited systems (Baskerville) still come last, as test_where_a_job_runs_best pins.
    eligible = [
        o for o in options if o.eligible and not any("limited availability" in w for w in o.reasons)
    ]
    marked = [o.rank for o in eligible if any(SPANS in why for why in o.reasons)]
    unmarked = [o.rank for o in eligible if o.rank not in marked]
    assert marked
    assert max(unmarked) < min(marked)
    alone = on_node(options, "Standard_NC24ads_A100_v4", "zero3_offload")
    assert (alone.num_gpus, alone.nodes) == (1, 1)
    assert alone.eligible
    assert alone.rank < spread.rank


def test_one_vm_of_the_same_kind_is_not_marked():
    """Four A100s in one NC96ads_A100_v4 VM need no network between VMs."""
    # Azure's only A100 80GB PCIe VM with four GPUs (NC24ads has one, NC48ads two); its
    # reasons name the VM only when they say why more of them would not pay.
    (option,) = [
        o
        for o in pretrain_7b().options
        if (o.system, o.accelerator, o.strategy, o.num_gpus)
        == ("azure", "a100-80-pcie", "zero2", 4)
    ]
    assert (option.num_gpus, option.nodes) == (4, 1)
    assert option.eligible
    assert not any(SPANS in why for why in option.reasons)


def test_nodes_with_an_ethernet_network_are_not_marked():
    """Hex's nodes talk over 1 GbE: slow, priced as such, but a network."""
    option = pick(lora_70b().options, "hex", "rtx-a5000-24", "zero3_offload")
    assert option.nodes == 2
    assert not any(SPANS in why for why in option.reasons)


def test_a_pinned_gpu_count_offers_no_one_gpu_job():
    """A researcher who pins 8 GPUs is not shown one-GPU jobs labelled with 8 GPUs and "one GPU
    needs more than the 8 GPUs allowed here"; the multi-GPU layouts are sized on 8."""
    request = EstimateRequest(params=1_300_000_000, task="pretrain", tokens=10**10, num_gpus=8)
    options = estimate(request, default_catalog()).options
    assert options
    assert not [o for o in options if o.strategy == "single"]
    assert {o.num_gpus for o in options if o.eligible} == {8}


def test_a_gpu_count_asked_for_is_planned_even_when_one_gpu_would_do():
    """Llama 2 13B inference (26 GB of weights) fits one 80 GB GPU; a researcher who asks for
    two gets two with tensor parallelism, not "nothing fits" because the one-GPU layout (not
    allowed) had made the two-GPU layouts look pointless."""
    request = EstimateRequest(
        config=config("meta-llama__Llama-2-13b-hf"),
        task="inference",
        tokens=10**7,
        accelerator="h100-80-sxm5",
        num_gpus=2,
    )
    result = estimate(request, default_catalog())
    rec = result.recommendation
    assert rec is not None
    assert (rec.num_gpus, rec.strategy) == (2, "tensor_parallel")
    single = [o for o in result.options if o.strategy == "single"]
    assert all(not o.eligible for o in single)
    assert all("the job is to use 2 GPUs" in " ".join(o.reasons) for o in single)


def test_a_pinned_strategy_answered_with_one_gpu_says_why():
    """A pinned strategy with no pinned count may be answered with one GPU (it holds the
    job); the option says so, or the pin reads as ignored."""
    result = estimate(
        EstimateRequest(
            config=config("Qwen__Qwen2.5-0.5B"),
            task="full_finetune",
            tokens=10**8,
            strategy="fsdp",
        ),
        default_catalog(),
    )
    best = result.recommendation
    assert (best.strategy, best.num_gpus) == ("single", 1)
    assert any(
        r.startswith("One GPU holds this job: fully sharded (FSDP), which you asked for")
        for r in best.reasons
    )
    two = [o for o in result.options if o.strategy == "fsdp" and o.num_gpus == 2]
    assert two
    assert not any(r.startswith("One GPU holds") for r in two[0].reasons)
