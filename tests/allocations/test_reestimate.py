"""A request whose facility changes is estimated again for the new system (issue 16)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from allocations.models import Status
from allocations.services import allocation_request_update
from tests.allocations.factories import estimate_request, make_request, make_session, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _catalog():
    call_command("load_catalog", "default", verbosity=0)


def _sized_request():
    """A draft whose frozen inputs the engine can run again without the Hub (a typed size)."""
    researcher = make_user()
    session = make_session(user=researcher)
    inputs = {**estimate_request(), "model_id": None, "params": 6_738_415_616}
    inputs["constraints"] = {"data_sensitivity": "public"}
    session.estimate_request = inputs
    session.save(update_fields=["estimate_request"])
    return make_request(
        researcher=researcher, session=session, status=Status.DRAFT, data_sensitivity="public"
    )


def test_moving_to_another_facility_re_estimates_there_and_keeps_the_old(client):
    allocation_request = _sized_request()
    old_result = allocation_request.estimate_snapshot["result"]
    moved = allocation_request_update(
        allocation_request=allocation_request,
        researcher=allocation_request.researcher,
        fields={"facility": "stanage"},
    )
    snapshot = moved.estimate_snapshot
    assert snapshot["result"]["recommendation"]["system"] == "stanage"
    assert snapshot["request"]["system"] == "stanage"
    assert moved.accelerator == snapshot["result"]["recommendation"]["accelerator"]
    assert moved.accelerator in ("a100-80-sxm4", "h100-80-pcie")  # Stanage's GPUs
    (earlier,) = snapshot["history"]
    assert (earlier["system"], earlier["result"]) == ("baskerville", old_result)

    event = moved.events.get(from_status=Status.DRAFT, to_status=Status.DRAFT)
    assert event.message.startswith(
        "Estimate re-run for Stanage (University of Sheffield) after the facility changed from "
        "Baskerville: 288 GPU hours on Baskerville before, "
    )

    client.force_login(make_user(staff=True, is_superuser=True))
    page = client.get(reverse("admin:allocations_allocationrequest_change", args=[moved.pk]))
    assertContains(page, 'id="earlier-estimates"')
    assertContains(page, "Baskerville: 1 × NVIDIA A100 40GB SXM4, 288 GPU hours")
    assertNotContains(page, 'id="other-facility"')  # the estimate is for the requested system


def test_a_facility_the_engine_cannot_size_keeps_the_estimate_and_says_so(client):
    # The TRE lists no hardware: nothing to re-run on, so the page says the estimate is for
    # another system instead of pretending.
    allocation_request = _sized_request()
    moved = allocation_request_update(
        allocation_request=allocation_request,
        researcher=allocation_request.researcher,
        fields={"facility": "turing-tre", "service": "secure"},
    )
    assert moved.estimate_snapshot["result"]["recommendation"]["system"] == "baskerville"
    assert "history" not in moved.estimate_snapshot
    client.force_login(moved.researcher)
    page = client.get(reverse("allocations:request-detail", args=[moved.pk]))
    assertContains(page, 'id="other-facility"')
    assertContains(page, "This estimate was made for Baskerville")


def test_a_facility_the_engine_cannot_size_is_tried_once_until_the_catalog_changes(monkeypatch):
    """Every save of a draft on such a facility used to run the engine again; now the reason is
    recorded once and the engine runs again only when the catalog (or the facility) changes."""
    from allocations import reestimate
    from catalog.models import CatalogVersion

    runs = []
    rerun = reestimate.estimate_rerun

    def counted(**kwargs):
        runs.append(kwargs["changes"])
        return rerun(**kwargs)

    monkeypatch.setattr(reestimate, "estimate_rerun", counted)
    allocation_request = _sized_request()
    researcher = allocation_request.researcher
    moved = allocation_request_update(
        allocation_request=allocation_request,
        researcher=researcher,
        fields={"facility": "turing-tre", "service": "secure"},
    )
    declined = moved.estimate_snapshot[reestimate.DECLINED]
    assert declined["facility"] == "turing-tre"
    assert declined["reason"]
    assert runs == [{"system": "turing-tre"}]

    for title in ("Renamed once", "Renamed twice"):
        moved = allocation_request_update(
            allocation_request=moved, researcher=researcher, fields={"project_title": title}
        )
    assert runs == [{"system": "turing-tre"}]
    assert moved.estimate_snapshot[reestimate.DECLINED] == declined

    CatalogVersion.objects.bump()  # staff added hardware, say: worth trying again
    allocation_request_update(
        allocation_request=moved, researcher=researcher, fields={"project_title": "Third"}
    )
    assert len(runs) == 2
