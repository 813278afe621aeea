"""Serving a model larger than one node: vLLM over several, the way its docs say to.

vLLM's guide ('Parallelism and Scaling') sets tensor_parallel_size to the GPUs of a node and
pipeline_parallel_size to the nodes, on a Ray cluster. Before, inference options stopped at one
node, so Llama 3.1 405B in bf16 (810 GB) fitted nothing on a site whose nodes hold 4 x 80 GB,
and a researcher who would serve it with vLLM was told nothing fits. Transformers' generate
and TGI stay within a node; the nothing-fits hint names vLLM.
"""

from __future__ import annotations

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

LLAMA_405B = "meta-llama/Llama-3.1-405B"


def serve(**fields):
    fields = {"tokens": 10**8, **fields}
    request = EstimateRequest(task="inference", config=find_bundled(LLAMA_405B).config, **fields)
    return estimate(request, default_catalog())


def test_vllm_serves_405b_over_whole_nodes_of_four_gpus():
    result = serve(framework="vllm", system="stanage", accelerator="a100-80-sxm4")
    best = result.recommendation
    assert best.nodes >= 3  # 810 GB of bf16 weights over nodes of 4 x 80 GB
    assert best.num_gpus == 4 * best.nodes
    assert best.memory_per_gpu_bytes < 0.9 * 80e9
    assert any(
        f"split over {best.nodes} nodes" in r and "tensor parallel over the 4 GPUs" in r
        for r in best.reasons
    )
    assert f"{best.num_gpus} GPUs on {best.nodes} nodes (tensor parallel" in result.justification
    script = result.slurm_script
    assert f"#SBATCH --nodes={best.nodes}" in script
    assert "ray start --head" in script
    assert f"--tensor-parallel-size 4 --pipeline-parallel-size {best.nodes}" in script
    assert 'distributed_executor_backend="ray"' in script
    # The recipe in the API says the same layout as the script, not tp = every GPU.
    assert (best.recipe.tp, best.recipe.pp) == (4, best.nodes)


def test_heads_split_within_a_node_not_over_every_gpu():
    # 128 heads do not split over 12 GPUs, but they do over the 4 of each node.
    result = serve(framework="vllm", system="stanage", accelerator="a100-80-sxm4")
    twelve = [o for o in result.options if o.num_gpus == 12]
    assert twelve
    assert not any("do not split" in r for r in twelve[0].reasons)


def test_transformers_stays_within_a_node_and_the_hint_names_vllm():
    result = serve(system="stanage", accelerator="a100-80-sxm4")
    assert result.recommendation is None
    assert all(o.nodes == 1 for o in result.options)
    assert any(w.startswith("vLLM serves a model larger than one node") for w in result.warnings)
    single = next(o for o in result.options if o.strategy == "single")
    assert any(" per GPU even on one GPU; " in r for r in single.reasons)


def test_a_model_that_fits_one_node_is_not_spread_over_two():
    result = serve(framework="vllm", precision="fp8", accelerator="h100-80-sxm5")
    best = result.recommendation
    # 405 GB of fp8 weights fit one node of 8 x 80 GB.
    assert (best.num_gpus, best.nodes) == (8, 1)
    assert "--pipeline-parallel-size" not in (result.slurm_script or "")


def test_one_sequence_leaves_pipeline_stages_waiting():
    """One request at a time through three pipeline stages keeps two of them waiting: decoding
    one sequence over nodes is no faster than over one node's GPUs, so the GPU hours for 12
    GPUs count it. Three in flight keep every stage busy."""
    # A small job (a million tokens): no wall-time target widens either layout.
    where = {"framework": "vllm", "system": "stanage", "accelerator": "a100-80-sxm4"}
    one = serve(tokens=10**6, batch_size=1, **where)
    three = serve(tokens=10**6, batch_size=3, **where)
    first, busy = one.recommendation, three.recommendation
    assert first.nodes == busy.nodes == 3
    assert any("2 of the 3 pipeline stages wait" in r for r in first.reasons)
    assert not any("pipeline stages wait" in r for r in busy.reasons)
    # One sequence leaves two of three stages idle: about 3 times the GPU hours. Three in
    # flight are three batches of one, each on its own stage, so a stage's read of its weights
    # still serves one sequence: no cheaper per token than one at a time with no idle stages.
    assert 2.4 * busy.gpu_hours < first.gpu_hours < 3.4 * busy.gpu_hours


def test_pipeline_stages_over_ethernet_cost_no_more_than_over_infiniband():
    """Stages on different nodes pass one hidden state per token (16,384 values for 405B), far
    below any link's bandwidth: unlike data-parallel training, serving over nodes does not pay
    for a slower network between them (only each node's own tensor-parallel link counts)."""
    catalog = default_catalog()

    def over(link: str):
        systems = [
            s.model_copy(
                update={
                    "node_types": [
                        n.model_copy(update={"inter_node_interconnect": link}) for n in s.node_types
                    ]
                }
            )
            for s in catalog.systems
        ]
        request = EstimateRequest(
            task="inference",
            tokens=10**8,
            config=find_bundled(LLAMA_405B).config,
            framework="vllm",
            system="stanage",
            accelerator="a100-80-sxm4",
        )
        return estimate(request, catalog.model_copy(update={"systems": systems})).recommendation

    infiniband, ethernet = over("infiniband"), over("ethernet")
    assert infiniband.nodes == ethernet.nodes == 3
    assert ethernet.gpu_hours == infiniband.gpu_hours
