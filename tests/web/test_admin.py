"""Records the system wrote are shown in the admin but never added, changed or deleted there."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", ["advisor_advisorsession", "allocations_usagerecord"])
def test_view_only_records_have_no_add_page_and_their_list_opens(admin_client, model):
    assert admin_client.get(reverse(f"admin:{model}_add")).status_code == 403
    assert admin_client.get(reverse(f"admin:{model}_changelist")).status_code == 200
