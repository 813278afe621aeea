"""fp8 through the flowchart: inference gets an estimate in fp8; training in fp8 gets the
engine's reason on the result page, never an error page."""

from __future__ import annotations

import pytest

from tests.support import walks

pytestmark = pytest.mark.django_db


def test_fp8_inference_is_estimated_in_fp8(client, default_catalog):
    answers = walks.changed(walks.INFERENCE_110M, precision="fp8")
    advisor_session, page = walks.walk_to_result(client, answers, azure_first=True)
    assert page.status_code == 200
    assert advisor_session.estimate_request["precision"] == "fp8"
    assumptions = [a["name"] for a in advisor_session.estimate_result["assumptions"]]
    assert "fp8 weights and speed" in assumptions


def test_fp8_training_shows_why_on_the_result_page(client, default_catalog):
    answers = walks.changed(walks.LORA_7B, precision="fp8")
    advisor_session, page = walks.walk_to_result(client, answers, azure_first=True)
    assert page.status_code == 200
    assert b"fp8 is offered for inference" in page.content
