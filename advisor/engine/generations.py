"""Accelerator generations: measurements transfer within a generation only (speed.py), the
software matrix has a column per generation (software.py), and a generation's CUDA-context
size is the same on every chip of it (device_memory.py). A catalog key names the chip, so a
name fragment identifies the generation."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from advisor.engine import constants as c
from advisor.engine.models import AcceleratorSpec


@dataclass(frozen=True, slots=True)
class Generation:
    key: str
    label: str
    vendor: str  # "nvidia" | "amd" | "intel" | other, lower case
    platform: str  # "cuda" | "rocm" | "xpu" | "other"


# Name fragments -> generation, most specific first. A catalog key names the chip ("a100-80-
# sxm4", "mi210-64", "max1550-128"), so the fragment identifies the generation.
_GENERATIONS: tuple[tuple[tuple[str, ...], Generation], ...] = (
    (("gh200", "h200", "h100"), Generation("nvidia-hopper", "NVIDIA Hopper", "nvidia", "cuda")),
    (("a100", "a800"), Generation("nvidia-ampere-dc", "NVIDIA Ampere (A100)", "nvidia", "cuda")),
    (
        ("l40", "l20", "l4-", "rtx-40", "4090", "4080", "4070", "4060", "ada"),
        Generation("nvidia-ada", "NVIDIA Ada", "nvidia", "cuda"),
    ),  # noqa: E501
    (
        ("a2000", "a4000", "a5000", "a6000", "a40-", "a10-", "3090", "3080", "3070", "3060"),
        Generation("nvidia-ampere-ws", "NVIDIA Ampere workstation", "nvidia", "cuda"),
    ),
    (("v100",), Generation("nvidia-volta", "NVIDIA Volta", "nvidia", "cuda")),
    (("t4", "2080", "turing"), Generation("nvidia-turing", "NVIDIA Turing", "nvidia", "cuda")),
    (("mi300",), Generation("amd-cdna3", "AMD CDNA3", "amd", "rocm")),
    (("mi250", "mi210"), Generation("amd-cdna2", "AMD CDNA2", "amd", "rocm")),
    (("mi100",), Generation("amd-cdna1", "AMD CDNA1", "amd", "rocm")),
    (
        ("max1550", "max1100", "max-1550", "pvc"),
        Generation("intel-xe-hpc", "Intel Xe-HPC", "intel", "xpu"),
    ),  # noqa: E501
)


def generation(acc: AcceleratorSpec) -> Generation:
    return generation_of(acc.name, acc.vendor)


@functools.lru_cache(maxsize=512)
def generation_of(name: str, vendor: str = "") -> Generation:
    """The generation a catalog key names (the vendor only for names no fragment matches)."""
    name = name.lower() + "-"
    for fragments, gen in _GENERATIONS:
        if any(f in name for f in fragments):
            return gen
    vendor = vendor.lower() or "unknown"
    platform = {"nvidia": "cuda", "amd": "rocm", "intel": "xpu"}.get(vendor, "other")
    return Generation(f"{vendor}-other", f"{vendor} (other)", vendor, platform)


def default_for(gen: Generation, acc: AcceleratorSpec, flash_attention: bool):
    """(the documented default constant, the model width it was measured at)."""
    if gen.key == "nvidia-ampere-dc" and flash_attention:
        return c.MFU_TRAINING_FLASH, c.MFU_TRAINING_FLASH_WIDTH
    found = c.MFU_BY_GENERATION.get(gen.key)
    if found is not None:
        return found
    # Unknown generation: by the dense 16-bit peak, as engine 1.x did.
    peak = acc.bf16_tflops or acc.fp16_tflops or 0
    if peak >= c.HOPPER_CLASS_TFLOPS:
        return c.MFU_BY_GENERATION["nvidia-hopper"]
    if peak and peak < c.OLDER_CLASS_TFLOPS:
        return c.MFU_BY_GENERATION["nvidia-volta"]
    return c.MFU_BY_GENERATION["nvidia-ampere-dc"]
