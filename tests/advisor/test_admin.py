"""Staff see every Hub lookup in the admin, failures with the researcher's message."""

import pytest

from advisor.models import HfModelLookup

pytestmark = pytest.mark.django_db


def test_lookup_admin_lists_failures_with_their_kind(admin_client):
    HfModelLookup.objects.create(
        repo_id="acme/missing",
        requested_id="acme/missing",
        status=HfModelLookup.Status.FAILED,
        error_kind="not_found",
        message="No model <acme/missing> on the Hub: check the spelling.",
    )
    response = admin_client.get("/admin/advisor/hfmodellookup/?status=failed")
    assert response.status_code == 200
    assert b"acme/missing" in response.content
    assert b"not_found" in response.content

    lookup = HfModelLookup.objects.get()
    detail = admin_client.get(f"/admin/advisor/hfmodellookup/{lookup.pk}/change/")
    assert detail.status_code == 200
    assert b"No model &lt;acme/missing&gt; on the Hub" in detail.content


def test_lookup_admin_is_for_staff_only(client, django_user_model):
    django_user_model.objects.create_user("researcher", password="pw-123456789")
    client.login(username="researcher", password="pw-123456789")
    response = client.get("/admin/advisor/hfmodellookup/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
