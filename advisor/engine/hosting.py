"""Hosting: an always-on cloud VM that serves a model for months, priced per month.

A web service (a model demo, an API) is not a batch job: it is not measured in GPU hours of
compute but in the months a VM stays up. The VM is sized by memory: the model's weights and
its inference working set (the engine's own inference memory estimate, batch 1) must fit in
the VM's GPUs with the engine's memory margin to spare. Its price is the VM's hourly price
times the hours in a month, times the months.

Assumptions (each is in the plan's `assumptions`):
- a month is 730 hours (365 days x 24 hours / 12), the figure Azure's pricing calculator uses;
- the VM runs all the time (no scaling to zero at night), pay-as-you-go, one VM;
- the model is split across the VM's GPUs (tensor parallel), so their memory adds up; the
  per-GPU overhead (CUDA context, allocator) is counted once per GPU;
- only VM sizes with a known price can be the cheapest; a size whose price is unknown is
  listed with "price unknown" and is chosen only when no priced size fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from advisor.engine.constants import MEMORY_MARGIN
from advisor.engine.device_memory import device_bytes
from advisor.engine.models import AcceleratorSpec, Assumption, NodeTypeSpec, SystemSpec
from advisor.engine.words import gigabytes

HOURS_PER_MONTH = 730
HOURS_PER_MONTH_SOURCE = (
    "Azure's standard billing month is 730 hours (365 days x 24 hours / 12), monthly VM cost = "
    "hourly price x 730: awesome-copilot azure-pricing skill, references/COST-ESTIMATOR.md, "
    "'Hours per Month' (https://git.cynarski.pl/Awesome/awesome-copilot/src/branch/main/"
    "plugins/azure-cloud-development/skills/azure-pricing/references/COST-ESTIMATOR.md)"
)


@dataclass(frozen=True)
class HostingVm:
    """One VM size that could host the service."""

    name: str  # the VM size, e.g. "Standard_NC24ads_A100_v4"
    accelerator: str
    gpus: int
    memory_bytes: float  # all of its GPUs' memory
    fits: bool
    price_per_hour: float | None  # the whole VM; None: unknown
    price_per_month: float | None
    total_price: float | None
    currency: str
    reason: str  # one sentence: why it fits or not, and its price


@dataclass(frozen=True)
class HostingPlan:
    system: str
    months: float
    need_bytes: int  # memory the service needs in all, before the margin
    vm: HostingVm | None  # the recommendation: cheapest priced VM that fits
    options: list[HostingVm] = field(default_factory=list)
    assumptions: list[Assumption] = field(default_factory=list)

    @property
    def price_per_month(self) -> float | None:
        return self.vm.price_per_month if self.vm else None

    @property
    def total_price(self) -> float | None:
        return self.vm.total_price if self.vm else None


def _money(amount: float, currency: str) -> str:
    return f"{amount:,.0f} {currency}".strip() if amount >= 100 else f"{amount:,.2f} {currency}"


def hosting_plan(
    *,
    system: SystemSpec,
    accelerators: list[AcceleratorSpec],
    weights_and_working_bytes: int,
    per_gpu_overhead_bytes: int,
    months: float,
    unsupported: Mapping[str, list[str]] | None = None,
) -> HostingPlan:
    """The cheapest VM size of `system` that holds the service, and its price per month.

    `weights_and_working_bytes` is what the model needs apart from per-GPU overheads (weights,
    KV cache, activations); `per_gpu_overhead_bytes` is added once for each GPU of a VM.
    `unsupported`: accelerator -> why the software the service needs does not run on it (the
    estimate's options say: fp8 or 4-bit kernels); such a VM is listed, never chosen.
    """
    if months <= 0:
        raise ValueError("The service must stay up for some time: give at least one month.")
    by_name = {a.name: a for a in accelerators}
    options: list[HostingVm] = []
    for node in system.node_types:
        acc = by_name.get(node.accelerator)
        if node.status == "retired" or acc is None or node.gpus_per_node < 1:
            continue
        vm = _hosting_vm(
            system, node, acc, weights_and_working_bytes, per_gpu_overhead_bytes, months
        )
        why_not = (unsupported or {}).get(acc.name)
        if why_not:
            vm = replace(vm, fits=False, reason=" ".join(why_not))
        options.append(vm)
    options.sort(key=_vm_order)
    chosen = options[0] if options and options[0].fits else None
    return HostingPlan(
        system=system.name,
        months=months,
        need_bytes=int(weights_and_working_bytes),
        vm=chosen,
        options=options,
        assumptions=_hosting_assumptions(weights_and_working_bytes, per_gpu_overhead_bytes, months),
    )


def _hosting_vm(
    system: SystemSpec,
    node: NodeTypeSpec,
    acc: AcceleratorSpec,
    weights_and_working_bytes: int,
    per_gpu_overhead_bytes: int,
    months: float,
) -> HostingVm:
    """One VM size: whether the service fits on its GPUs (margin included) and its price."""
    margin = 1 + MEMORY_MARGIN.value
    gpus = node.gpus_per_node
    capacity = device_bytes(acc) * gpus
    need = (weights_and_working_bytes + per_gpu_overhead_bytes * gpus) * margin
    fits = need <= capacity
    price = (node.price_per_gpu_hour * gpus if node.price_per_gpu_hour is not None else None) or (
        system.price_per_gpu_hour * gpus if system.price_per_gpu_hour is not None else None
    )
    per_month = price * HOURS_PER_MONTH if price is not None else None
    total = per_month * months if per_month is not None else None
    if gpus == 1:
        gpu_words, hold, have = f"One {acc.display_name} GPU", "holds", "has"
    else:
        gpu_words, hold, have = f"{gpus} {acc.display_name} GPUs", "hold", "have"
    if fits:
        reason = (
            f"{gpu_words} ({gigabytes(capacity)}) {hold} the {gigabytes(need)} needed, "
            "margin included."
        )
    else:
        reason = (
            f"{gpu_words} {have} {gigabytes(capacity)}, less than the {gigabytes(need)} needed."
        )
    if per_month is not None:
        reason += f" {_money(per_month, system.currency)} a month."
    else:
        reason += " Price unknown: ask the cloud team for a quote."
    return HostingVm(
        name=node.name,
        accelerator=acc.name,
        gpus=gpus,
        memory_bytes=capacity,
        fits=fits,
        price_per_hour=price,
        price_per_month=per_month,
        total_price=total,
        currency=system.currency,
        reason=reason,
    )


def _vm_order(vm: HostingVm):
    # Fitting first; among them a known price before an unknown one (an unknown price is
    # never taken for cheap), then the cheapest, then the smallest VM.
    return (
        not vm.fits,
        vm.price_per_month is None,
        vm.price_per_month if vm.price_per_month is not None else 0.0,
        vm.memory_bytes,
        vm.name,
    )


def _hosting_assumptions(
    weights_and_working_bytes: int, per_gpu_overhead_bytes: int, months: float
) -> list[Assumption]:
    return [
        Assumption(
            name="Hours in a month",
            value=f"{HOURS_PER_MONTH} hours: the VM runs all the time, pay-as-you-go",
            source=HOURS_PER_MONTH_SOURCE,
        ),
        Assumption(
            name="Months kept",
            value=f"{months:g} month{'s' if months != 1 else ''}, as you said",
        ),
        Assumption(
            name="Memory needed",
            value=(
                f"{gigabytes(weights_and_working_bytes)} for the model and its working memory at "
                f"batch 1, plus {gigabytes(per_gpu_overhead_bytes)} per GPU, plus "
                f"{MEMORY_MARGIN.value:.0%} margin; the model is split across the VM's GPUs"
            ),
            source=MEMORY_MARGIN.source,
        ),
    ]


def months_text(months: float) -> str:
    whole = math.isclose(months, round(months))
    number = f"{round(months)}" if whole else f"{months:g}"
    return f"{number} month{'s' if months != 1 else ''}"
