"""Database constraints guard the catalog even when a row is written outside the loader."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from catalog.models import Accelerator, NodeType, Profile, System

pytestmark = pytest.mark.django_db


def make_accelerator(**overrides) -> Accelerator:
    values = {
        "name": "test-gpu",
        "display_name": "Test GPU",
        "vendor": "NVIDIA",
        "memory_gb": 80,
        "memory_bandwidth_gb_s": 2039,
        "bf16_tflops": 312,
        "source": "A100-GK",
    }
    values.update(overrides)
    return Accelerator.objects.create(**values)


def make_system(**overrides) -> System:
    profile, _ = Profile.objects.get_or_create(name="test", defaults={"title": "Test"})
    values = {"profile": profile, "name": "testsys", "display_name": "Test", "source": "X"}
    values.update(overrides)
    return System.objects.create(**values)


@pytest.mark.parametrize(
    "overrides",
    [
        {"memory_gb": 0},
        {"memory_gb": -1},
        {"memory_bandwidth_gb_s": 0},
        {"bf16_tflops": 0},
    ],
)
def test_accelerator_refuses_non_positive_figures(overrides):
    with pytest.raises(IntegrityError), transaction.atomic():
        make_accelerator(**overrides)


def test_accelerator_name_is_unique():
    make_accelerator()
    with pytest.raises(IntegrityError), transaction.atomic():
        make_accelerator(display_name="Another")


def test_system_name_is_unique():
    make_system()
    with pytest.raises(IntegrityError), transaction.atomic():
        make_system(display_name="Again")


def test_system_refuses_unknown_status_and_negative_trial():
    with pytest.raises(IntegrityError), transaction.atomic():
        make_system(status="decommissioned")
    with pytest.raises(IntegrityError), transaction.atomic():
        make_system(trial_gpu_hours=-400)


def test_node_type_name_is_unique_within_a_system_only():
    accelerator = make_accelerator()
    first = make_system()
    second = make_system(name="other")
    values = {"count": 2, "gpus_per_node": 4, "accelerator": accelerator, "source": "X"}
    NodeType.objects.create(system=first, name="gpu", **values)
    NodeType.objects.create(system=second, name="gpu", **values)  # another system: fine
    with pytest.raises(IntegrityError), transaction.atomic():
        NodeType.objects.create(system=first, name="gpu", **values)


def test_node_type_refuses_negative_counts():
    accelerator = make_accelerator()
    system = make_system()
    for field in ("count", "gpus_per_node"):
        values = {"count": 1, "gpus_per_node": 1, field: -1}
        with pytest.raises(IntegrityError), transaction.atomic():
            NodeType.objects.create(
                system=system, name=f"bad-{field}", accelerator=accelerator, source="X", **values
            )


def test_only_one_profile_is_active():
    Profile.objects.create(name="one", title="One", is_active=True)
    Profile.objects.create(name="two", title="Two", is_active=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        Profile.objects.create(name="three", title="Three", is_active=True)
