""" "Not sure" about the precision, in the flowchart and the API: the estimate takes 16-bit
mixed precision in whichever type each GPU has (fp16 on V100s and T4s) and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains

from tests.support import walks

pytestmark = pytest.mark.django_db

BERT_BASE = json.loads(
    (
        Path(__file__).resolve().parents[1]
        / "engine"
        / "configs"
        / "google-bert__bert-base-uncased"
        / "config.json"
    ).read_text()
)


def test_not_sure_leaves_the_type_to_each_gpu_and_the_result_says_so(client, default_catalog):
    answers = walks.changed(walks.LORA_7B, precision="not_sure")
    advisor_session, page = walks.walk_to_result(client, answers, azure_first=True)
    assert page.status_code == 200
    assert advisor_session.estimate_request["precision"] is None
    assumptions = {a["name"]: a["value"] for a in advisor_session.estimate_result["assumptions"]}
    assert assumptions["Precision (not given)"].startswith("16-bit mixed precision: bf16 where")
    assertContains(page, "Precision (not given)")
    # Not "You chose bf16": the V100 question is answered from the estimate.
    assert b"You chose bf16" not in page.content


def test_the_api_without_a_precision_runs_bert_on_a_t4_in_fp16(client, default_catalog):
    response = client.post(
        reverse("advisor:api-estimate"),
        data=json.dumps(
            {"config": BERT_BASE, "task": "full_finetune", "seq_len": 512, "tokens": 10**8}
        ),
        content_type="application/json",
    )
    assert response.status_code == 200
    t4 = [o for o in response.json()["options"] if o["accelerator"] == "t4-16"]
    assert t4
    assert all(o["eligible"] and o["compute_dtype"] == "fp16" for o in t4)


def test_the_api_with_bf16_given_keeps_the_t4_ruled_out(client, default_catalog):
    response = client.post(
        reverse("advisor:api-estimate"),
        data=json.dumps(
            {
                "config": BERT_BASE,
                "task": "full_finetune",
                "precision": "bf16",
                "seq_len": 512,
                "tokens": 10**8,
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 200
    t4 = [o for o in response.json()["options"] if o["accelerator"] == "t4-16"]
    assert t4
    assert not any(o["eligible"] for o in t4)
    assert "no bf16 on NVIDIA T4 16GB (use fp16)." in t4[0]["reasons"]
