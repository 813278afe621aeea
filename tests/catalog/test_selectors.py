"""comparison_rows(): the systems side by side on /catalog/."""

from __future__ import annotations

import pytest

from catalog.models import Profile
from catalog.selectors import comparison_rows

pytestmark = pytest.mark.django_db


def test_comparison_rows_group_node_types_by_gpu(default_catalog):
    rows = comparison_rows(profile=Profile.objects.get(name="default"), sort="-memory")
    assert rows[0].accelerator.memory_gb == 141
    azure_t4 = next(r for r in rows if r.system.name == "azure" and r.accelerator.name == "t4-16")
    assert azure_t4.gpus_per_node == [1, 4]
    assert azure_t4.gpus_total is None
    assert azure_t4.price_per_gpu_hour == [0.526, 1.088]
    azure_v100 = next(r for r in rows if r.accelerator.name == "v100-16-pcie")
    assert azure_v100.status == "retired"
