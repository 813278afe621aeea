"""Requests that stay consistent: history of re-runs and decisions, honest trial suggestions,
local researcher accounts and a login page that says how to get one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from allocations.models import AllocationEvent, Status
from allocations.services import (
    allocation_request_record_rerun,
    allocation_request_request_changes,
    allocation_request_submit,
)
from tests.allocations.factories import estimate_result, make_request, make_session, make_user

pytestmark = pytest.mark.django_db


def test_decided_at_is_cleared_while_a_resubmitted_request_waits(client):
    staff = make_user(staff=True)
    allocation_request = make_request(status=Status.SUBMITTED)
    allocation_request = allocation_request_request_changes(
        allocation_request=allocation_request, reviewer=staff, message="Trim the hours."
    )
    assert allocation_request.decided_at is not None
    asked_at = allocation_request.decided_at
    allocation_request = allocation_request_submit(
        allocation_request=allocation_request, researcher=allocation_request.researcher
    )
    assert allocation_request.status == Status.RESUBMITTED
    assert allocation_request.decided_at is None
    # The changes-requested decision keeps its own time in the history.
    event = allocation_request.events.get(to_status=Status.CHANGES_REQUESTED)
    assert abs((event.created_at - asked_at).total_seconds()) < 5


def test_a_staff_rerun_is_recorded_in_the_history(client):
    staff = make_user(staff=True)
    allocation_request = make_request(status=Status.SUBMITTED)
    event = allocation_request_record_rerun(
        allocation_request=allocation_request,
        actor=staff,
        changes={"epochs": 6},
        new_result=estimate_result(requested_gpu_hours=576.0, system="stanage"),
    )
    assert event.from_status == event.to_status == Status.SUBMITTED
    assert event.note == (
        "Estimate re-run with 6 epochs: 288 GPU hours before, 576 GPU hours now on stanage."
    )
    assert event.message == ""  # staff-only: nothing is said to the researcher
    client.force_login(allocation_request.researcher)
    page = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    assertContains(page, "<strong>Estimate re-checked</strong>", html=True)
    assertNotContains(page, "576 GPU hours now")
    assert AllocationEvent.objects.filter(allocation_request=allocation_request).count() == 1


def test_trial_is_not_suggested_on_a_system_without_trial_access(client, settings):
    call_command("load_catalog", "default", verbosity=0)
    researcher = make_user()
    client.force_login(researcher)
    session = make_session(user=researcher, requested_gpu_hours=226.0, system="stanage")
    response = client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.context["form"].initial["gpu_hours"] == 226
    assert response.context["form"].initial["trial"] is False
    assertNotContains(response, 'id="trial-suggestion"')
    assertNotContains(response, "small or uncertain")


def test_trial_is_suggested_with_the_reason_when_the_request_fits(client):
    call_command("load_catalog", "default", verbosity=0)
    researcher = make_user()
    client.force_login(researcher)
    session = make_session(user=researcher, requested_gpu_hours=226.0, system="baskerville")
    response = client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.context["form"].initial["trial"] is True
    assertContains(response, "This request (226 GPU hours) fits within")
    assertNotContains(response, "small or uncertain")


def test_create_researcher_makes_a_non_staff_account_with_a_generated_password(capsys):
    call_command(
        "create_researcher",
        "jsmith",
        "--email",
        "j.smith@example.ac.uk",
        "--first-name",
        "Jane",
        "--last-name",
        "Smith",
    )
    out = capsys.readouterr().out
    user = get_user_model().objects.get(username="jsmith")
    assert not user.is_staff
    assert user.get_full_name() == "Jane Smith"
    password = out.split("Password: ")[1].split()[0]
    assert user.check_password(password)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bad name!", "--email", "a@example.ac.uk"], "username:"),
        (["jsmith", "--email", "not-an-address"], "is not an e-mail address"),
        (["jsmith", "--email", "a@example.ac.uk", "--password", "123"], "password:"),
    ],
)
def test_create_researcher_refuses_bad_input_and_changes_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_researcher", *args)
    assert not get_user_model().objects.filter(username__in=["jsmith", "bad name!"]).exists()


def test_create_researcher_refuses_a_taken_name():
    make_user(username="jsmith")
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_researcher", "JSmith", "--email", "j@example.ac.uk")


def test_login_page_says_how_to_get_an_account(client, settings):
    response = client.get("/accounts/login/")
    assertContains(response, "How to get an account.")
    assertContains(response, "Accounts are created by the research computing team")
    assertContains(response, 'href="/accounts/password_reset/"')


def test_a_request_moved_to_another_facility_says_so_and_takes_that_systems_gpu(client):
    from allocations.services import allocation_request_update

    call_command("load_catalog", "default", verbosity=0)
    allocation_request = make_request(status=Status.DRAFT, data_sensitivity="public")
    allocation_request = allocation_request_update(
        allocation_request=allocation_request,
        researcher=allocation_request.researcher,
        fields={"facility": "stanage"},
    )
    # Not the estimated system's A100 40GB any more: the estimate's own Stanage option.
    assert (allocation_request.accelerator, allocation_request.num_gpus) == ("h100-80-pcie", 1)
    client.force_login(allocation_request.researcher)
    page = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    assertContains(page, 'id="other-facility"')
    assertContains(page, "This estimate was made for Baskerville (NVIDIA A100 40GB SXM4): 288")
    assertContains(page, "The request asks for Stanage (University of Sheffield), where the same")
    assertContains(page, "NVIDIA H100 80GB PCIe: 173 GPU hours")
    # Moved back: the estimate's own GPU again, and nothing to explain.
    allocation_request = allocation_request_update(
        allocation_request=allocation_request,
        researcher=allocation_request.researcher,
        fields={"facility": "baskerville"},
    )
    assert allocation_request.accelerator == "a100-40-sxm4"
    page = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    assertNotContains(page, 'id="other-facility"')


def test_required_fields_say_so(client):
    researcher = make_user()
    client.force_login(researcher)
    session = make_session(user=researcher)
    response = client.get(reverse("allocations:request-create", args=[session.pk]))
    body = response.content.decode()
    # Every field the submission needs, and no other, carries the mark.
    assert body.count('class="field required-to-submit"') == 11
    assert '<div class="field required-to-submit"><label for="id_project_title">' in body
    assert '<div class="field required-to-submit"><label for="id_caller_branch">' not in body
    assertContains(response, "(required to submit)")
