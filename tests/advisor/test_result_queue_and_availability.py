"""Issue 14, sections 3 and 4: the site's queue guidance reaches the API options and the result
page (seed 002: total time is the queue wait plus the run), and a limited-availability system
ranks after the available ones and says why."""

from __future__ import annotations

import pytest
from django.utils.html import escape
from pytest_django.asserts import assertContains

from catalog.models import System
from tests.advisor.test_api import GOOD, post
from tests.advisor.test_flow_results import walk_to_result
from tests.support.walks import LORA_7B

pytestmark = pytest.mark.django_db


def test_api_options_carry_the_sites_queue_guidance(client, default_catalog):
    result = post(client, GOOD).json()
    guidance = dict(System.objects.values_list("name", "queue_guidance"))
    assert result["options"]
    for option in result["options"]:
        assert option["queue_guidance"] == (guidance[option["system"]] or None)
    stanage = next(o for o in result["options"] if o["system"] == "stanage")
    assert stanage["queue_guidance"].startswith("Time limits: interactive 8 h")


def test_a_system_without_guidance_gives_none_not_an_empty_claim(client, default_catalog):
    System.objects.filter(name="stanage").update(queue_guidance="")
    result = post(client, GOOD).json()
    stanage = [o for o in result["options"] if o["system"] == "stanage"]
    assert stanage
    assert all(o["queue_guidance"] is None for o in stanage)


def test_the_result_page_shows_the_recommended_sites_queue_guidance(client, default_catalog):
    System.objects.update(queue_guidance="Long jobs wait <b>days</b> on the big GPUs.")
    advisor_session, page = walk_to_result(client, LORA_7B)
    assert advisor_session.estimate_result["recommendation"]["queue_guidance"]
    assertContains(page, 'id="queue-guidance"')
    # The catalog's text is escaped, never markup.
    assertContains(page, escape("Long jobs wait <b>days</b> on the big GPUs."))
    assertContains(page, "Your time to results is the queue wait plus the wall time")


def test_a_limited_system_ranks_after_the_available_ones_and_says_why(client, default_catalog):
    result = post(client, GOOD).json()
    ranked = [o for o in result["options"] if o["eligible"] and o["fits"]]
    limited = [o for o in ranked if o["system"] == "baskerville"]
    available = [o for o in ranked if o["system"] != "baskerville"]
    assert limited
    assert available
    assert max(o["rank"] for o in available) < min(o["rank"] for o in limited)
    reasons = limited[0]["reasons"]
    assert (
        "Baskerville has limited availability (The Turing's hpc-landscape README says "
        "Baskerville is no longer available to the Turing as of April 2026)." in reasons
    )
    assert (
        "Options on fully available systems are ranked before it; it is offered for when none "
        "of them can run the job." in reasons
    )
    assert result["recommendation"]["system"] != "baskerville"
