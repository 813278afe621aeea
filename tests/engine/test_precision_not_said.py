"""A precision the researcher did not give is 16-bit in whichever type each GPU has: bf16 on
A100 and newer, fp16 with loss scaling on V100s and T4s, which have no bf16. A precision that
was given, bf16 included, is never changed. Before, a request without a precision was a bf16
request, and every V100 and T4 was ruled out of BERT-base fine-tuning."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from catalog.data_file import validate_catalog_file
from tests.engine.inputs import config, default_catalog

UVA_FILE = Path(__file__).resolve().parents[2] / "catalog" / "data" / "uva.json"
BERT_BASE = config("google-bert__bert-base-uncased")
LLAMA_2_7B = config("meta-llama__Llama-2-7b-hf")


@cache
def uva():
    return validate_catalog_file(UVA_FILE).to_spec()


@cache
def catalog_with_slurm_t4s():
    """The default catalog plus a Slurm site of T4 nodes (the default catalog's T4s are Azure
    VMs, which get no sbatch script)."""
    catalog = default_catalog()
    site = next(s for s in catalog.systems if s.name == "baskerville")
    node = site.node_types[0].model_copy(update={"accelerator": "t4-16", "name": "T4"})
    t4_site = site.model_copy(
        update={
            "name": "t4-site",
            "status": "active",
            "node_types": [node],
            "partitions": [
                p.model_copy(update={"node_types": [node.name]}) for p in site.partitions[:1]
            ],
        }
    )
    return catalog.model_copy(update={"systems": [*catalog.systems, t4_site]})


def bert(**fields) -> EstimateRequest:
    return EstimateRequest(
        config=BERT_BASE, task="full_finetune", seq_len=512, tokens=100_000_000, **fields
    )


def on(result, accelerator: str):
    return [o for o in result.options if o.accelerator == accelerator]


def test_bert_fine_tuning_without_a_precision_runs_on_a_t4_in_fp16_and_says_so():
    result = estimate(bert(), default_catalog())
    t4 = on(result, "t4-16")
    assert t4
    assert all(o.eligible and o.compute_dtype == "fp16" for o in t4)
    assert all(o.gpu_hours is not None for o in t4)
    note = next(r for r in t4[0].reasons if r.startswith("No bf16 on NVIDIA T4"))
    assert "fp16 mixed precision with loss scaling" in note
    assert "can overflow" in note
    # The GPUs with bf16 compute in it, as before.
    assert {o.compute_dtype for o in on(result, "a100-80-sxm4")} == {"bf16"}
    precision = next(a for a in result.assumptions if a.name == "Precision (not given)")
    assert "fp16 with loss scaling on GPUs without it" in precision.value


def test_bf16_given_is_never_changed_to_fp16():
    result = estimate(bert(precision="bf16"), default_catalog())
    t4 = on(result, "t4-16")
    assert t4
    assert all(not o.eligible and o.rank is None for o in t4)
    assert "no bf16 on NVIDIA T4 16GB (use fp16)." in t4[0].reasons
    assert not any(a.name == "Precision (not given)" for a in result.assumptions)


def test_left_open_the_options_on_bf16_gpus_are_the_same_as_with_bf16_given():
    """Same memory, same compute: only the GPUs without bf16 change."""
    open_, given = (
        estimate(bert(), default_catalog()),
        estimate(bert(precision="bf16"), default_catalog()),
    )

    def figures(result):
        return {
            (o.system, o.accelerator, o.num_gpus, o.strategy): (
                o.memory_per_gpu_bytes,
                o.gpu_hours,
                o.compute_dtype,
            )
            for o in result.options
            if o.accelerator != "t4-16"
        }

    assert figures(open_) == figures(given)
    t4_open, t4_given = on(open_, "t4-16")[0], on(given, "t4-16")[0]
    assert t4_open.memory_per_gpu_bytes == t4_given.memory_per_gpu_bytes


def test_torchtune_cannot_fall_back_to_fp16_and_the_reason_says_so():
    result = estimate(
        EstimateRequest(config=LLAMA_2_7B, task="lora", tokens=10**7, framework="torchtune"),
        default_catalog(),
    )
    t4 = on(result, "t4-16")
    assert t4
    assert all(not o.eligible for o in t4)
    assert (
        "no bf16 on NVIDIA T4 16GB, and torchtune does not train in fp16 (its recipes refuse it)."
        in t4[0].reasons
    )
    precision = next(a for a in result.assumptions if a.name == "Precision (not given)")
    assert precision.value.startswith("bf16: torchtune does not train in fp16")


def test_uva_v100s_take_bert_fine_tuning_in_fp16_with_the_flag_in_the_script():
    """UVA charges 2.10 SU per V100 GPU hour against 46.38 on an A100 40GB: left open, the
    precision lets the cheap V100 run BERT-base, and the script asks the Trainer for fp16."""
    result = estimate(bert(), uva())
    rec = result.recommendation
    assert (rec.system, rec.accelerator, rec.compute_dtype) == ("uva-hpc", "v100-32-sxm2", "fp16")
    assert " in fp16, with " in result.justification
    assert "--fp16" in result.slurm_script
    assert "--bf16" not in result.slurm_script

    given = estimate(bert(precision="bf16"), uva())
    assert given.recommendation.accelerator != "v100-32-sxm2"
    assert given.recommendation.compute_dtype == "bf16"
    assert "--bf16" in given.slurm_script
    assert " in bf16, with " in given.justification


def test_inference_on_a_t4_left_open_asks_vllm_for_half_precision():
    """vLLM refuses bf16 below compute capability 8.0 and asks for --dtype=half."""
    result = estimate(
        EstimateRequest(
            config=LLAMA_2_7B,
            task="inference",
            tokens=10**6,
            framework="vllm",
            accelerator="t4-16",
            system="t4-site",
        ),
        catalog_with_slurm_t4s(),
    )
    rec = result.recommendation
    assert (rec.accelerator, rec.compute_dtype) == ("t4-16", "fp16")
    assert any(r.startswith("No bf16 on NVIDIA T4 16GB: runs in fp16") for r in rec.reasons)
    assert "--dtype half" in result.slurm_script
    assert 'dtype="half"' in result.slurm_script
