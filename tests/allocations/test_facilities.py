"""Facilities come from the catalog: choices, trial limits, the dates and data each accepts;
and the admin re-runs an estimate with the real engine against the real default catalog."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from pytest_django.asserts import assertContains

from allocations.facilities import facility_choices, trial_gpu_hours_limit
from allocations.models import Status
from allocations.services import allocation_request_create_from_session, allocation_request_validate
from catalog.models import Profile, System
from catalog.services import catalog_load
from tests.allocations.factories import complete_fields, make_request, make_session, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile():
    return Profile.objects.create(name="test", title="Test institute", is_active=True)


def make_system(profile, name, **overrides):
    fields = {
        "display_name": name.title(),
        "kind": "hpc_batch",
        "status": "active",
        "data_sensitivity": ["public", "internal"],
        "source": "test",
    }
    fields.update(overrides)
    return System.objects.create(profile=profile, name=name, **fields)


def _errors(**overrides):
    try:
        allocation_request_validate(values=complete_fields(**overrides), for_submission=True)
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_choices_are_the_active_profiles_usable_systems(profile):
    make_system(profile, "baskerville", status="limited")
    make_system(profile, "stanage")
    make_system(profile, "jade2", status="retired")
    other = Profile.objects.create(name="other", title="Other")
    make_system(other, "elsewhere")
    assert facility_choices() == [("baskerville", "Baskerville (limited)"), ("stanage", "Stanage")]


def test_trial_limit_is_the_systems_own(profile):
    make_system(profile, "baskerville", trial_gpu_hours=250)
    assert trial_gpu_hours_limit("baskerville") == 250
    assert _errors(trial=True, gpu_hours=251)["trial"] == [
        "Trial access is limited to 250 GPU hours; untick trial to request 251 GPU hours as a "
        "full allocation."
    ]
    assert trial_gpu_hours_limit("unknown") == 400  # the settings default (seed 001)


def test_retired_system_is_refused(profile):
    make_system(profile, "baskerville", status="retired")
    assert _errors()["facility"] == ["Baskerville is retired: choose another facility."]


def test_system_closed_to_new_allocations(profile):
    make_system(profile, "baskerville", closed_to_new_users_on=date(2026, 4, 1))
    assert _errors()["allocation_kind"] == [
        "Baskerville has taken no new allocations since 1 April 2026."
    ]
    assert "allocation_kind" not in _errors(allocation_kind="existing")


def test_end_date_after_access_ends_is_refused(profile):
    ends = timezone.localdate() + timedelta(days=30)
    make_system(profile, "baskerville", access_ends_on=ends)
    assert _errors()["end_date"] == [
        f"Access to Baskerville ends on {ends.day} {ends:%B %Y}: end the allocation by then."
    ]


def test_data_sensitivity_must_suit_the_system(profile):
    make_system(profile, "baskerville", data_sensitivity=["public"])
    assert _errors(data_sensitivity="confidential")["data_sensitivity"] == [
        "Baskerville is listed for public data only, not confidential."
    ]


def test_service_must_match_the_system(profile):
    make_system(profile, "azure", kind="cloud")
    assert _errors(facility="azure", service="hpc")["facility"] == ["Azure is not an HPC facility."]


def test_request_links_the_catalog_system(profile):
    system = make_system(profile, "baskerville")
    researcher = make_user()
    allocation_request = allocation_request_create_from_session(
        session=make_session(user=researcher), researcher=researcher, fields=complete_fields()
    )
    assert allocation_request.system == system
    system.delete()  # a catalog reload dropped it: the request keeps its facility name
    allocation_request.refresh_from_db()
    assert (allocation_request.system, allocation_request.facility) == (None, "baskerville")


def test_admin_rerun_with_more_epochs_side_by_side(client):
    catalog_load(profile_or_path="default")
    client.force_login(make_user(staff=True, is_superuser=True))
    allocation_request = make_request(status=Status.SUBMITTED)
    request_inputs = {
        "params": 6_738_415_616,
        "task": "lora",
        "precision": "bf16",
        "batch_size": 4,
        "seq_len": 2048,
        "tokens": 200_000_000,
        "epochs": 3,
        "lora_rank": 16,
    }
    allocation_request.estimate_snapshot = {
        **allocation_request.estimate_snapshot,
        "request": request_inputs,
    }
    allocation_request.save()
    url = reverse("admin:allocations_allocationrequest_rerun", args=[allocation_request.pk])
    response = client.post(url, {"epochs": "6"})
    assert response.status_code == 200
    rows = {row["label"]: row for row in response.context["comparison"]}
    requested = rows["Requested GPU hours"]
    assert requested["old"] == 288.0  # the frozen estimate, untouched
    assert requested["changed"] is True
    assertContains(response, 'id="estimate-comparison"')
    # The same inputs with 3 epochs, re-run, give half the hours of 6 epochs.
    base = client.post(url, {"precision": "bf16"}).context["comparison"]
    base_hours = {row["label"]: row for row in base}["Requested GPU hours"]["new"]
    assert requested["new"] == pytest.approx(2 * base_hours, rel=0.01)
    allocation_request.refresh_from_db()
    assert allocation_request.estimate_snapshot["request"]["epochs"] == 3
