"""Query budgets of the researcher's request pages: counts, not timings (bench/ measures speed).

Outside a test transaction (transactional_db), so the counts include BEGIN and COMMIT as
production runs them and no SAVEPOINT that only a test's wrapping transaction would add.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from allocations.models import AllocationRequest, Status
from tests.allocations.factories import as_post, complete_fields, make_session, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def researcher_client(client):
    call_command("load_catalog", "default", verbosity=0)
    researcher = make_user()
    client.force_login(researcher)
    client.researcher = researcher
    return client


def test_create_and_submit_takes_at_most_fifteen_queries(
    researcher_client, django_assert_max_num_queries
):
    session = make_session(user=researcher_client.researcher)
    url = reverse("allocations:request-create", args=[session.pk])
    fields = complete_fields(data_sensitivity="public")  # Baskerville takes public data only
    with django_assert_max_num_queries(15):
        response = researcher_client.post(url, as_post(fields, action="submit"))
    assert response.status_code == 302
    allocation_request = AllocationRequest.objects.get()
    assert allocation_request.status == Status.SUBMITTED
    assert allocation_request.system.name == "baskerville"
    trail = list(allocation_request.events.values_list("from_status", "to_status"))
    assert trail == [("", "draft"), ("draft", "submitted")]


def test_the_request_is_checked_once_per_submission(researcher_client, monkeypatch):
    """The form checks the fields; the services take its result instead of checking again."""
    from allocations import forms, request_validation, services, transitions

    calls = []
    real = services.allocation_request_validate

    def counting(**kwargs):
        calls.append(kwargs["for_submission"])
        return real(**kwargs)

    monkeypatch.setattr(forms, "allocation_request_validate", counting)
    for module in (services, request_validation, transitions):
        monkeypatch.setattr(module, "allocation_request_validate", counting)
    session = make_session(user=researcher_client.researcher)
    url = reverse("allocations:request-create", args=[session.pk])
    fields = complete_fields(data_sensitivity="public")
    assert researcher_client.post(url, as_post(fields, action="submit")).status_code == 302
    assert calls == [True]
    allocation_request = AllocationRequest.objects.get()
    edit = reverse("allocations:request-edit", args=[allocation_request.pk])
    calls.clear()
    researcher_client.post(edit, as_post(fields, action="save"))  # submitted: not editable
    assert calls == []
