"""How many bytes a GPU's memory label holds: what the driver reports, not the label in 1e9s.

Vendors label device memory in binary units: an "A100 80GB" has 81,920 MiB (80 GiB, 85.9e9
bytes), which is what nvidia-smi and torch.cuda report and what a job can fill (the CUDA
context included). Reading the label as 80e9 bytes left 6.9 % of every card unused in the fit
checks. Two things take some of the binary figure back, per generation, as nvidia-smi shows
on real cards:
- ECC on GDDR memory (data-centre T4, A10, A40, L4, L40, L40S; professional RTX A-series where
  a site enables it) keeps 1/16 of the memory for check bits: a T4 reports 15,360 MiB of its
  16 GiB and an L40S or A40 46,068 MiB of 48 GiB. HBM keeps ECC beside the data (A100 40GB:
  40,960 MiB; V100 32GB: 32,768 MiB).
- Some memory the driver reserves: 81,559 of 81,920 MiB on an H100 80GB, 16,160 of 16,384 on
  a V100 16GB, 11,019 of 11,264 on a GeForce RTX 2080 Ti.
A generation without a recorded reading keeps the label in decimal GB, the smaller figure.
"""

from __future__ import annotations

import functools

from advisor.engine.constants import GIB
from advisor.engine.generations import generation_of
from advisor.engine.models import AcceleratorSpec

# Reported MiB per labelled GiB, from nvidia-smi / rocm-smi totals of real cards. The readings
# are public nvidia-smi outputs (Memory-Usage column "used / total") found in many READMEs and
# logs; rocm's topology gives 68,702,699,520 bytes for a 64 GB CDNA2 device (MI210, MI250X GCD).
_REPORTED_PER_LABEL: dict[str, tuple[float, str]] = {
    "nvidia-hopper": (81_559 / 81_920, "H100 80GB HBM3: 81,559 MiB of 81,920"),
    "nvidia-ampere-dc": (1.0, "A100-SXM4-40GB: 40,960 MiB; A100 80GB: 81,920 MiB"),
    "nvidia-volta": (16_160 / 16_384, "V100 16GB: 16,160 MiB (V100 32GB: 32,768 MiB)"),
    "nvidia-turing": (15_360 / 16_384, "T4 with ECC on: 15,360 MiB of 16 GiB"),
    "amd-cdna1": (68_702_699_520 / (64 * GIB), "as CDNA2 (no reading of an MI100 recorded)"),
    "amd-cdna2": (68_702_699_520 / (64 * GIB), "gfx90a: 68,702,699,520 bytes of 64 GiB"),
    "amd-cdna3": (68_702_699_520 / (64 * GIB), "as CDNA2 (no reading of an MI300 recorded)"),
}
_ECC_GDDR = (46_068 / 49_152, "L40S / A40 / RTX A6000 with ECC on: 46,068 MiB of 48 GiB")
_NO_ECC_GDDR = (24_564 / 24_576, "GeForce RTX 4090: 24,564 MiB of 24 GiB (no ECC)")
_TURING_GEFORCE = (11_019 / 11_264, "GeForce RTX 2080 Ti: 11,019 MiB of 11 GiB (no ECC)")
# GeForce cards have no ECC; every other GDDR card of these generations is counted with it on
# (the data-centre cards ship that way, and sites running RTX A-series often enable it).
_GEFORCE = (
    "rtx-40", "rtx_40", "4090", "4080", "4070", "4060",
    "3090", "3080", "3070", "3060", "2080", "titan",
)  # fmt: skip
_GDDR_GENERATIONS = ("nvidia-ada", "nvidia-ampere-ws")


@functools.lru_cache(maxsize=512)
def _fraction(name: str, vendor: str) -> tuple[float, str] | None:
    """Reported bytes per labelled binary GB, and the reading behind it; None: no reading."""
    lowered = name.lower()
    if vendor.lower() == "nvidia" and any(f in lowered for f in _GEFORCE):
        turing = "2080" in lowered or "titan" in lowered  # TITAN RTX: 24,220 of 24,576 MiB
        return _TURING_GEFORCE if turing else _NO_ECC_GDDR
    gen = generation_of(name, vendor)
    if gen.key in _GDDR_GENERATIONS:
        return _ECC_GDDR
    return _REPORTED_PER_LABEL.get(gen.key)


def device_bytes(acc: AcceleratorSpec) -> int:
    """The memory a job can fill on one GPU, CUDA context included."""
    found = _fraction(acc.name, acc.vendor)
    if found is None:
        return int(acc.memory_gb * 1e9)
    return int(acc.memory_gb * GIB * found[0])


def capacity_text(acc: AcceleratorSpec) -> str:
    """'85.9 GB (80 GiB)': the bytes in the units every memory figure uses, and the binary
    figure nvidia-smi shows."""
    value = device_bytes(acc)
    return f"{value / 1e9:.1f} GB ({round(value / GIB, 1):g} GiB)"


def reading(acc: AcceleratorSpec) -> str:
    """Where the capacity of this GPU comes from, for the result's assumptions."""
    found = _fraction(acc.name, acc.vendor)
    if found is None:
        return (
            f"{acc.memory_gb:g} GB read as decimal GB: no driver reading of this generation "
            "is recorded, so the smaller figure"
        )
    return f"{acc.memory_gb:g} GB label read as GiB as the driver reports them ({found[1]})"
