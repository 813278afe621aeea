"""Requests to a secure environment ask its own questions; every request says what it is for.

The Turing's Trusted Research Environment (catalog system turing-tre) lists its own request
fields (the Data Protection Assessment reference, the security tier 1 to 3, the data provider
and agreement, the TRESA contact, the hardware): issue 15 asks that the form asks them for that
system alone, stores them, validates them and shows them to staff.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from allocations.models import AllocationRequest, Status
from allocations.services import allocation_request_validate
from tests.allocations.factories import as_post, complete_fields, make_request, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _catalog():
    call_command("load_catalog", "default", verbosity=0)


TRE = "turing-tre"
ASSESSMENT = "Data Protection Assessment Process reference"
TIER = "Security tier (1, 2 or 3)"
PROVIDER = "Data provider and data sharing agreement"
CONTACT = "Turing staff contact for TRESA"
HARDWARE = "GPU hardware needed"
ANSWERS = {
    ASSESSMENT: "DPAP-2026-117",
    TIER: "2",
    PROVIDER: "NHS Digital, DSA 41-2026",
    CONTACT: "Alan Smith",
    HARDWARE: "One A100 80GB",
}


def _tre_fields(**overrides):
    return complete_fields(
        service="secure", facility=TRE, data_sensitivity="confidential", trial=False, **overrides
    )


def _answers(**changes):
    merged = {**ANSWERS, **changes}
    return [{"label": label, "value": value} for label, value in merged.items()]


@pytest.fixture
def researcher():
    return make_user()


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


def _form_post(form_fields: dict, answers: dict, **extra) -> dict:
    """The form's POST: the TRE's questions are named turing-tre__<position>."""
    data = as_post(form_fields, **extra)
    for position, label in enumerate(ANSWERS):
        data[f"{TRE}__{position}"] = answers.get(label, "")
    return data


def test_submission_to_the_tre_needs_each_of_its_own_fields():
    with pytest.raises(ValidationError) as caught:
        allocation_request_validate(
            values={**_tre_fields(), "facility_fields": _answers(**{TIER: ""})},
            for_submission=True,
        )
    assert caught.value.message_dict["facility_fields"] == [
        f"Turing Trusted Research Environment (Data Safe Haven) also needs “{TIER}” before "
        "submitting."
    ]


def test_tre_tier_outside_the_turings_tiers_is_refused():
    with pytest.raises(ValidationError) as caught:
        allocation_request_validate(
            values={**_tre_fields(), "facility_fields": _answers(**{TIER: "4"})},
            for_submission=False,
        )
    assert caught.value.message_dict["facility_fields"] == [f"{TIER}: choose one of 1, 2, 3."]


def test_answers_to_questions_a_system_does_not_ask_are_refused():
    values = complete_fields(
        data_sensitivity="public", facility_fields=[{"label": TIER, "value": "2"}]
    )
    with pytest.raises(ValidationError) as caught:
        allocation_request_validate(values=values, for_submission=False)
    assert caught.value.message_dict["facility_fields"] == [
        "Baskerville does not ask for “Security tier (1, 2 or 3)”."
    ]


def test_the_form_asks_the_tre_questions_and_stores_them_for_staff(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, **_tre_fields())
    url = reverse("allocations:request-edit", args=[allocation_request.pk])
    page = researcher_client.get(url)
    assertContains(page, "Turing Trusted Research Environment (Data Safe Haven) only")
    assertContains(page, f'<label for="id_{TRE}__1">{TIER}:</label>', html=True)

    response = researcher_client.post(url, _form_post(_tre_fields(), ANSWERS, action="save"))
    assert response.status_code == 302
    allocation_request.refresh_from_db()
    assert allocation_request.facility_fields == _answers()
    detail = researcher_client.get(response["Location"])
    assertContains(detail, "<dt>Security tier (1, 2 or 3)</dt><dd>2</dd>", html=True)


def test_submitting_without_the_tre_questions_says_which_and_changes_nothing(
    researcher_client, researcher
):
    allocation_request = make_request(researcher=researcher, **_tre_fields())
    before = AllocationRequest.objects.values().get(pk=allocation_request.pk)
    url = reverse("allocations:request-edit", args=[allocation_request.pk])
    answers = {**ANSWERS, ASSESSMENT: ""}
    response = researcher_client.post(url, _form_post(_tre_fields(), answers, action="submit"))
    assert response.status_code == 200
    assert response.context["form"].errors[f"{TRE}__0"] == [
        "Turing Trusted Research Environment (Data Safe Haven) needs this before you submit."
    ]
    assert AllocationRequest.objects.values().get(pk=allocation_request.pk) == before


def test_tre_answers_are_dropped_when_another_facility_is_chosen(researcher_client, researcher):
    allocation_request = make_request(
        researcher=researcher, **_tre_fields(), facility_fields=_answers()
    )
    url = reverse("allocations:request-edit", args=[allocation_request.pk])
    response = researcher_client.post(
        url, _form_post(complete_fields(data_sensitivity="public"), ANSWERS, action="save")
    )
    assert response.status_code == 302
    allocation_request.refresh_from_db()
    assert (allocation_request.facility, allocation_request.facility_fields) == ("baskerville", [])


def test_staff_see_the_purpose_first_and_the_tre_answers_in_admin_and_exports(client):
    client.force_login(make_user(staff=True, is_superuser=True))
    allocation_request = make_request(
        status=Status.SUBMITTED,
        research_purpose="<b>Predict</b> sepsis from ward notes to alert nurses earlier.",
        facility_fields=_answers(),
        **_tre_fields(),
    )
    page = client.get(
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
    )
    assertContains(page, "&lt;b&gt;Predict&lt;/b&gt; sepsis from ward notes")
    assertNotContains(page, "<b>Predict</b>")
    assertContains(page, f"<p><strong>{ASSESSMENT}</strong>: DPAP-2026-117</p>", html=True)
    assert allocation_request.justification_for_review.startswith("<b>Predict</b> sepsis")

    queue = reverse("admin:allocations_allocationrequest_changelist")
    selected = {"_selected_action": [str(allocation_request.pk)], "index": 0}
    rows = list(
        csv.DictReader(
            io.StringIO(client.post(queue, {"action": "export_csv", **selected}).content.decode())
        )
    )
    assert rows[0]["facility_fields"].startswith(f"{ASSESSMENT}: DPAP-2026-117; {TIER}: 2;")
    assert rows[0]["research_purpose"].startswith("<b>Predict</b> sepsis")
    (row,) = json.loads(client.post(queue, {"action": "export_json", **selected}).content)
    assert row["facility_fields"] == _answers()


def test_without_a_stated_purpose_the_justification_opens_with_the_project():
    allocation_request = make_request(research_purpose="", justification="Needs one A100.")
    assert allocation_request.justification_for_review == (
        "Project: Fine-tuning Llama for clinical notes (Health).\n\nNeeds one A100."
    )


def test_an_overlong_purpose_is_refused_with_its_length():
    with pytest.raises(ValidationError) as caught:
        allocation_request_validate(
            values=complete_fields(research_purpose="x" * 1001), for_submission=False
        )
    assert caught.value.message_dict["research_purpose"] == [
        "Say what the research is for in at most 1,000 characters (it has 1,001); the details "
        "belong in the justification."
    ]


def test_a_new_request_for_the_same_project_is_prefilled_with_its_purpose(
    researcher_client, researcher
):
    from tests.allocations.factories import make_session

    make_request(
        researcher=researcher,
        status=Status.WITHDRAWN,
        research_purpose="Find early signs of sepsis in ward notes.",
    )
    session = make_session(user=researcher)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.context["form"].initial["research_purpose"] == (
        "Find early signs of sepsis in ward notes."
    )
    assertContains(response, '<label for="id_research_purpose">What is the research for?</label>')


def test_staff_are_emailed_the_purpose_and_the_tre_answers(django_capture_on_commit_callbacks):
    from django.core import mail

    from allocations.services import allocation_request_submit

    make_user(staff=True, email="rc@example.ac.uk")
    allocation_request = make_request(
        research_purpose="Find early signs of <sepsis> in ward notes.",
        facility_fields=_answers(),
        **_tre_fields(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    (message,) = mail.outbox
    assert "For:          Find early signs of <sepsis> in ward notes." in message.body
    assert f"{TIER}: 2\n" in message.body
    html = message.alternatives[0][0]
    assert "Find early signs of &lt;sepsis&gt; in ward notes." in html
    assert f'<th scope="row">{ASSESSMENT}</th><td>DPAP-2026-117</td>' in html
