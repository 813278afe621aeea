"""The flowchart's "Does it fit on one A100 80 GB?" agrees with the options it leads to: a
decision that names the catalog's GPU measures against what that GPU holds (85.9 GB for an A100
80GB, as the engine sizes every option), not the label in 1e9 bytes."""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.flow_decisions import check_fits_gpu_memory
from advisor.flowchart import load_chart
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog


def _llama3_8b_lora_at_28k_tokens():
    """About 83 GB on one GPU: more than 80e9 bytes, less than an A100 80GB's 80 GiB."""
    request = EstimateRequest(
        config=find_bundled("meta-llama/Meta-Llama-3-8B").config,
        task="lora",
        seq_len=28_672,
        micro_batch=1,
        batch_size=1,
        gradient_checkpointing=True,
        tokens=10**7,
        accelerator="a100-80-sxm4",
        num_gpus=1,
    )
    result = estimate(request, default_catalog())
    # Its plain one-GPU options only: offloading the frozen base to CPU memory would fit it in
    # less, which is not what this decision is about.
    return result.model_copy(
        update={"options": [o for o in result.options if o.strategy == "single"]}
    )


def _decide(params: dict | None = None):
    """UVA's shipped "Does it fit on one A100 80 GB?", with other params where given."""
    node = load_chart("uva").node("fits_one_gpu")
    if params is not None:
        node = node.model_copy(update={"params": params})
    cache = {repr([]): _llama3_8b_lora_at_28k_tokens()}  # the estimate a path's decisions share
    return check_fits_gpu_memory(node=node, fields={}, catalog=default_catalog(), cache=cache)


def test_a_decision_naming_the_gpu_measures_against_what_it_holds():
    decision = _decide()
    assert decision.value == "yes"
    assert "within the 85.9 GB (80 GiB) of the NVIDIA A100 80GB SXM4" in decision.explanation


def test_a_decision_without_a_gpu_keeps_the_label_in_decimal_gb():
    decision = _decide({"memory_gb": 80, "max_gpus": 1})
    assert decision.value == "no"
    assert "does not fit 80 GB on one GPU" in decision.explanation


def test_an_unknown_gpu_name_falls_back_to_the_label():
    decision = _decide({"memory_gb": 80, "max_gpus": 1, "accelerator": "no-such-gpu"})
    assert decision.value == "no"
