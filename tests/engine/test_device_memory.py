"""A GPU holds what its driver reports, not its label in 1e9s: an A100 80GB has 81,920 MiB.

Before, every fit check read "80 GB" as 80e9 bytes, 6.9 % less than the card has, so jobs that
run on one A100 80GB were sent to larger or more GPUs. The readings are nvidia-smi totals of
real cards (advisor/engine/device_memory.py names them)."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.device_memory import capacity_text, device_bytes
from advisor.engine.models import AcceleratorSpec, EstimateRequest
from tests.engine.inputs import config, default_catalog

MIB = 2**20


def gpu(name: str, memory_gb: float, vendor: str = "NVIDIA") -> AcceleratorSpec:
    return AcceleratorSpec(
        name=name,
        display_name=name,
        vendor=vendor,
        memory_gb=memory_gb,
        memory_bandwidth_gb_s=1000,
    )


@pytest.mark.parametrize(
    ("name", "label", "vendor", "reported_mib"),
    [
        ("a100-80-sxm4", 80, "NVIDIA", 81_920),
        ("a100-40-sxm4", 40, "NVIDIA", 40_960),
        ("h100-80-sxm5", 80, "NVIDIA", 81_559),
        ("v100-16-pcie", 16, "NVIDIA", 16_160),
        ("t4-16", 16, "NVIDIA", 15_360),  # GDDR6 with ECC on keeps 1/16 for check bits
        ("l40s-48", 48, "NVIDIA", 46_068),
        ("rtx-a6000-48", 48, "NVIDIA", 46_068),
        ("rtx-4090-24", 24, "NVIDIA", 24_564),  # GeForce: no ECC
        ("rtx2080ti-11", 11, "NVIDIA", 11_019),
        ("mi210-64", 64, "AMD", 68_702_699_520 / MIB),
    ],
)
def test_a_gpu_holds_what_its_driver_reports(name, label, vendor, reported_mib):
    assert device_bytes(gpu(name, label, vendor)) == pytest.approx(reported_mib * MIB, rel=1e-4)


def test_a_generation_without_a_reading_keeps_the_smaller_decimal_figure():
    assert device_bytes(gpu("max1550-128", 128, "Intel")) == 128_000_000_000
    assert device_bytes(gpu("mystery-24", 24, "Acme")) == 24_000_000_000


def test_the_capacity_is_written_in_the_units_every_memory_figure_uses():
    assert capacity_text(gpu("a100-80-sxm4", 80)) == "85.9 GB (80 GiB)"
    assert capacity_text(gpu("t4-16", 16)) == "16.1 GB (15 GiB)"


def test_a_job_needing_more_than_80e9_bytes_runs_on_one_a100_80gb():
    """Llama 3 8B LoRA on one 28,672-token sequence with checkpointing: about 83 GB, which an
    A100 80GB (85.9 GB) holds; read as 80e9 bytes it did not fit one GPU."""
    request = EstimateRequest(
        config=config("meta-llama__Meta-Llama-3-8B"),
        task="lora",
        seq_len=28_672,
        micro_batch=1,
        batch_size=1,
        gradient_checkpointing=True,
        tokens=10**7,
        accelerator="a100-80-sxm4",
    )
    result = estimate(request, default_catalog())
    single = next(o for o in result.options if o.strategy == "single" and o.num_gpus == 1)
    assert 80e9 < single.memory_per_gpu_bytes < 80 * 2**30
    assert single.fits
    capacity = next(a for a in result.assumptions if a.name == "GPU capacity")
    assert "81,920 MiB" in capacity.value
