"""Issue 14: what attention without a fused kernel costs in time, and fp32 matmuls. The
calibration benchmarks ran fused attention (flash or Megatron's fused softmax); the
Transformers Trainer without it writes and reads the heads x keys scores through one PyTorch
op after another (roofline.eager_score_bytes, counted from the ops, no constant fitted). The
Hugging Face "Model training anatomy" runs of BERT-large on one V100 (docs/accuracy.md keeps
them as test points: 18.64 samples/s at batch 4 x 512 tokens in fp16, which the estimate meets
within 3 %; 43 % fast before). fp32 matmuls run on the CUDA cores, whose share of their peak
comes from fp32 runs (c.FP32_MATMUL_EFFICIENCY, or a catalog benchmark run in fp32), never
from the tensor-core ones."""

from __future__ import annotations

from functools import cache

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest, NodeTypeSpec, PartitionSpec, SystemSpec
from tests.engine.inputs import config, default_catalog

BERT_LARGE = config("google-bert__bert-large-uncased")
SEQUENCES = 100_000


def bert_large(
    precision: str, *, flash_attention: bool, accelerator: str, framework: str = "hf_trainer"
) -> EstimateRequest:
    """BERT-large fine-tuned at 4 x 512 tokens on one GPU, as the published runs were."""
    return EstimateRequest(
        config=BERT_LARGE,
        task="full_finetune",
        precision=precision,
        mixed_precision=precision != "fp32",
        seq_len=512,
        batch_size=4,
        micro_batch=4,
        tokens=512 * SEQUENCES,
        flash_attention=flash_attention,
        framework=framework,
        accelerator=accelerator,
        num_gpus=1,
    )


@cache
def option(flash_attention: bool, framework: str = "hf_trainer", precision: str = "fp16"):
    request = bert_large(
        precision, flash_attention=flash_attention, accelerator="a100-80-sxm4", framework=framework
    )
    return estimate(request, default_catalog()).recommendation


def samples_per_second(found) -> float:
    return SEQUENCES / (found.gpu_hours * 3600)


def test_eager_attention_at_512_tokens_costs_bert_large_most_of_a_fused_kernels_speed():
    eager, fused = option(False), option(True)
    assert samples_per_second(eager) < 0.7 * samples_per_second(fused)
    assert eager.utilisation < 0.7 * fused.utilisation


def test_megatrons_fused_softmax_is_what_its_benchmarks_measured():
    """Megatron-LM fuses scale, mask and softmax without flash attention; its V100 benchmark
    ran that way, so the figure it gives holds that traffic already."""
    assert option(False, "megatron").utilisation == pytest.approx(
        option(True, "megatron").utilisation
    )


def test_fp32_matmuls_leave_less_of_a_layer_to_memory_traffic():
    """An A100's fp32 peak (no TF32: PyTorch leaves it off for matmuls) is a sixteenth of its
    bf16 one: the same elementwise bytes take a smaller share of a layer, so an fp32 job
    reaches a larger share of its (lower) peak."""
    fp32, fp16 = option(True, precision="fp32"), option(True)
    assert fp32.utilisation > 1.3 * fp16.utilisation
    assert fp32.gpu_hours > 5 * fp16.gpu_hours


@cache
def with_v100s():
    """The default catalog with a DGX-1-like system of V100 SXM2 32GB (the catalog has the
    accelerator, no system holds it)."""
    catalog = default_catalog()
    node = NodeTypeSpec(
        name="dgx1",
        count=4,
        gpus_per_node=8,
        accelerator="v100-32-sxm2",
        intra_node_interconnect="nvlink",
        inter_node_interconnect="infiniband",
    )
    system = SystemSpec(
        name="volta",
        display_name="Volta",
        node_types=[node],
        partitions=[PartitionSpec(name="gpu", node_types=["dgx1"])],
    )
    return catalog.model_copy(update={"systems": [*catalog.systems, system]})


def on_v100(precision: str, catalog=None):
    request = bert_large(precision, flash_attention=False, accelerator="v100-32-sxm2")
    return estimate(request, catalog or with_v100s()).recommendation


def test_fp32_bert_large_on_a_v100_trains_at_the_published_speed():
    """fp32 matmuls run on the CUDA cores near their peak (c.FP32_MATMUL_EFFICIENCY, from
    NVIDIA's BERT-large pre-training row); the tensor-core runs' share would halve the speed.
    Published on one V100 at 4 x 512 tokens: the Trainer 8.9 samples/s (fine-tuning), NVIDIA's
    BERT 8.4 (pre-training); fp16 runs 2.1x (Trainer) to 3.6x (NVIDIA, apex) faster."""
    fp32, fp16 = on_v100("fp32"), on_v100("fp16")
    assert fp32.utilisation_source == "fp32 on the CUDA cores"
    assert 7.5 < samples_per_second(fp32) < 11
    assert 1.8 < fp32.gpu_hours / fp16.gpu_hours < 4


def test_an_fp32_run_in_the_catalog_sets_fp32_jobs_and_only_them():
    """A measured fp32 run (an institute's trial run, say) is a CUDA-core figure: its MFU is
    of the fp32 peak, it sets fp32 jobs' utilisation, and it leaves 16-bit jobs, which run on
    the tensor cores, as they were (and the reverse)."""
    from advisor.engine.models import BenchmarkSpec

    # 6 x 335M x 4,100 tokens/s = 8.2 TFLOP/s: 52 % of the V100's 15.7 TFLOP/s fp32 peak.
    run = BenchmarkSpec(
        name="institute-bert-large-fp32",
        accelerator="v100-32-sxm2",
        model="BERT-large",
        params=335_000_000,
        task="full_finetune",
        precision="fp32",
        num_gpus=1,
        batch_size=4,
        seq_len=512,
        tokens_per_second=4_100.0,
        source="institute trial run",
    )
    base = with_v100s()
    catalog = base.model_copy(update={"benchmarks": [*base.benchmarks, run]})

    fp32, fp16 = on_v100("fp32", catalog), on_v100("fp16", catalog)
    assert fp32.utilisation_source == "benchmark institute-bert-large-fp32"
    # The run's 52 %, moved by the roofline to this job's eager attention: a little less.
    assert 0.40 < fp32.utilisation < 0.52
    assert fp16.utilisation_source == on_v100("fp16").utilisation_source
    assert fp16.utilisation == pytest.approx(on_v100("fp16").utilisation)
