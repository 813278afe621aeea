"""Hosting a service: the cheapest priced VM that holds the model, priced by the month."""

from __future__ import annotations

import pytest

from advisor.engine.hosting import HOURS_PER_MONTH, hosting_plan, months_text
from advisor.engine.models import AcceleratorSpec, NodeTypeSpec, SystemSpec

GB = 10**9


def accelerator(name: str, memory_gb: float) -> AcceleratorSpec:
    return AcceleratorSpec(
        name=name,
        display_name=name.upper(),
        vendor="nvidia",
        memory_gb=memory_gb,
        memory_bandwidth_gb_s=1000,
    )


def vm(name: str, acc: str, gpus: int, price: float | None, status: str = "active"):
    return NodeTypeSpec(
        name=name,
        count=0,
        gpus_per_node=gpus,
        accelerator=acc,
        price_per_gpu_hour=price,
        status=status,
    )


ACCS = [accelerator("t4", 16), accelerator("a100", 80), accelerator("h200", 141)]


def cloud(*nodes) -> SystemSpec:
    return SystemSpec(
        name="cloud", display_name="Cloud", kind="cloud", currency="USD", node_types=list(nodes)
    )


def plan(system, need_gb: float, months: float = 6, overhead_gb: float = 1):
    return hosting_plan(
        system=system,
        accelerators=ACCS,
        weights_and_working_bytes=int(need_gb * GB),
        per_gpu_overhead_bytes=int(overhead_gb * GB),
        months=months,
    )


def test_the_cheapest_vm_that_holds_the_model_is_chosen_and_priced_per_month():
    system = cloud(vm("small", "t4", 1, 0.5), vm("big", "a100", 1, 3.0), vm("huge", "a100", 8, 3.5))
    result = plan(system, need_gb=20)
    assert result.vm.name == "big"  # 1 x T4 (16 GB) cannot hold 21 GB + 10% margin
    assert result.price_per_month == pytest.approx(3.0 * HOURS_PER_MONTH)
    assert result.total_price == pytest.approx(3.0 * HOURS_PER_MONTH * 6)
    assert [o.name for o in result.options] == ["big", "huge", "small"]
    assert not result.options[-1].fits


def test_an_unknown_price_never_wins():
    system = cloud(vm("unpriced", "h200", 8, None), vm("priced", "a100", 4, 4.0))
    result = plan(system, need_gb=30)
    assert result.vm.name == "priced"
    unpriced = next(o for o in result.options if o.name == "unpriced")
    assert unpriced.price_per_month is None
    assert "Price unknown" in unpriced.reason


def test_only_an_unpriced_vm_fits_so_it_is_chosen_with_no_price():
    system = cloud(vm("unpriced", "h200", 1, None), vm("priced", "t4", 1, 0.5))
    result = plan(system, need_gb=100)
    assert result.vm.name == "unpriced"
    assert result.total_price is None


def test_retired_sizes_are_never_offered_and_nothing_fitting_means_no_vm():
    system = cloud(vm("old", "h200", 8, 1.0, status="retired"), vm("small", "t4", 1, 0.5))
    result = plan(system, need_gb=100)
    assert result.vm is None
    assert [o.name for o in result.options] == ["small"]


def test_overhead_counts_once_per_gpu_and_the_margin_applies():
    # 70 GB + 1 GB overhead = 71 GB, x1.1 = 78.1 GB: one A100 80GB (80 GiB, 85.9 GB) holds it.
    assert plan(cloud(vm("one", "a100", 1, 1.0)), need_gb=70).vm is not None
    # 78 GB + 1 GB = 79 GB x 1.1 = 86.9 GB: it does not.
    assert plan(cloud(vm("one", "a100", 1, 1.0)), need_gb=78).vm is None


def test_assumptions_are_stated():
    names = [a.name for a in plan(cloud(vm("one", "a100", 1, 1.0)), need_gb=10).assumptions]
    assert names == ["Hours in a month", "Months kept", "Memory needed"]


def test_a_service_must_stay_up_for_some_time():
    with pytest.raises(ValueError, match="at least one month"):
        plan(cloud(vm("one", "a100", 1, 1.0)), need_gb=10, months=0)


@pytest.mark.parametrize(("months", "text"), [(1, "1 month"), (6, "6 months"), (1.5, "1.5 months")])
def test_months_in_words(months, text):
    assert months_text(months) == text


def test_a_vm_whose_gpus_cannot_run_the_services_software_is_listed_never_chosen():
    """fp8 weights through transformers need Hopper: a cheaper A100 VM that holds the model
    is passed over, with the estimate's reason."""
    system = cloud(vm("a100", "a100", 1, 3.0), vm("h200", "h200", 1, 10.0))
    why = ["fp8 weights with transformers (or TGI) need its fine-grained FP8 kernels; ..."]
    result = hosting_plan(
        system=system,
        accelerators=ACCS,
        weights_and_working_bytes=int(20 * GB),
        per_gpu_overhead_bytes=int(1 * GB),
        months=6,
        unsupported={"a100": why},
    )
    assert result.vm.name == "h200"
    a100 = next(o for o in result.options if o.name == "a100")
    assert not a100.fits
    assert a100.reason == why[0]
