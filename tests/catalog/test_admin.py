"""Staff find every catalog table in the admin, with the retired warning."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from catalog.models import NodeType, System

pytestmark = pytest.mark.django_db

MODELS = [
    "profile",
    "accelerator",
    "system",
    "nodetype",
    "partition",
    "tool",
    "toolingsupport",
    "benchmark",
]


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_superuser("staff", "staff@example.org", "pw-for-tests")
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", MODELS)
def test_changelist_opens_for_staff(staff_client, default_catalog, model):
    response = staff_client.get(reverse(f"admin:catalog_{model}_changelist"))
    assert response.status_code == 200


def test_system_changelist_warns_about_retired_systems(staff_client, default_catalog):
    url = reverse("admin:catalog_system_changelist")
    response = staff_client.get(url + "?retired=yes")
    html = response.content.decode()
    assert "RETIRED: never recommended" in html
    assert "JADE 2" in html
    assert "Stanage" not in html


def test_system_change_page_shows_node_types_and_partitions_inline(staff_client, default_catalog):
    system = System.objects.get(name="stanage")
    response = staff_client.get(reverse("admin:catalog_system_change", args=[system.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "H100 (Dell R7525)" in html
    assert "gpu-h100" in html


def test_node_type_change_page_opens(staff_client, default_catalog):
    node_type = NodeType.objects.get(system__name="dawn")
    response = staff_client.get(reverse("admin:catalog_nodetype_change", args=[node_type.pk]))
    assert response.status_code == 200
