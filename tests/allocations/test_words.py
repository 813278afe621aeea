"""What people read about a request uses names and sizes, not catalog keys or raw counts
(issue 16: "the admin and e-mails show 'dawn', 'max1550-128', '1300000000'")."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from pytest_django.asserts import assertContains

from allocations.estimates import estimate_comparison
from allocations.models import Status
from allocations.selectors import estimate_inputs
from allocations.services import allocation_request_approve, allocation_request_record_rerun
from tests.allocations.factories import estimate_result, make_request, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _catalog():
    call_command("load_catalog", "default", verbosity=0)


def test_the_decision_email_names_the_facility_and_the_gpu(django_capture_on_commit_callbacks):
    allocation_request = make_request(status=Status.SUBMITTED, facility="dawn", service="hpc")
    allocation_request.accelerator = "max1550-128"
    allocation_request.save(update_fields=["accelerator"])
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_approve(
            allocation_request=allocation_request,
            reviewer=make_user(staff=True),
            granted_gpu_hours=250,
        )
    (message,) = mail.outbox
    assert "for Dawn (Cambridge, AI Research Resource) is now: approved." in message.body
    assert (
        "The estimate sized the work for 1 × Intel Data Center GPU Max 1550 128GB" in message.body
    )
    assert "max1550-128" not in message.body
    assert " dawn " not in message.body


def test_the_rerun_comparison_shows_names_and_sizes():
    old = estimate_result(requested_gpu_hours=288.0)
    new = estimate_result(requested_gpu_hours=576.0, system="stanage")
    rows = {row["label"]: row for row in estimate_comparison(old=old, new=new)}
    assert (rows["System"]["old"], rows["System"]["new"]) == (
        "Baskerville",
        "Stanage (University of Sheffield)",
    )
    assert rows["System"]["changed"] is True
    assert rows["GPU"]["old"] == "NVIDIA A100 40GB SXM4"
    assert rows["Parameters"]["old"] == "6.74 billion parameters"
    assert rows["Parameters"]["changed"] is False
    assert rows["Fits in memory"]["new"] == "yes"


def test_the_rerun_note_names_the_system():
    allocation_request = make_request(status=Status.SUBMITTED)
    event = allocation_request_record_rerun(
        allocation_request=allocation_request,
        actor=make_user(staff=True),
        changes={"epochs": 6},
        new_result=estimate_result(requested_gpu_hours=576.0, system="stanage"),
    )
    assert event.note.endswith("576 GPU hours now on Stanage (University of Sheffield).")


def test_the_queue_filters_facilities_by_name(client):
    client.force_login(make_user(staff=True, is_superuser=True))
    make_request(status=Status.SUBMITTED, facility="dawn")
    page = client.get(reverse("admin:allocations_allocationrequest_changelist"))
    assertContains(page, "Dawn (Cambridge, AI Research Resource)</a>")
    assertContains(page, "?facility=dawn")


def test_the_rerun_note_names_a_changed_gpu_in_words():
    event = allocation_request_record_rerun(
        allocation_request=make_request(status=Status.SUBMITTED),
        actor=make_user(staff=True),
        changes={"accelerator": "max1550-128"},
        new_result=estimate_result(requested_gpu_hours=576.0, system="dawn"),
    )
    assert event.note.startswith(
        "Estimate re-run with the Intel Data Center GPU Max 1550 128GB (Ponte Vecchio): 288 GPU"
    )
    assert "max1550-128" not in event.note


def test_the_workload_rows_name_a_pinned_system_gpu_and_strategy():
    rows = dict(
        estimate_inputs(
            {
                "params": 1_300_000_000,
                "task": "full_finetune",
                "system": "dawn",
                "accelerator": "max1550-128",
                "strategy": "tensor_parallel",
                "num_gpus": 4,
            }
        )
    )
    assert rows["Model"] == "1,300,000,000 parameters (as typed)"
    assert rows["System asked for"] == "Dawn (Cambridge, AI Research Resource)"
    assert rows["GPU asked for"].startswith("Intel Data Center GPU Max 1550 128GB")
    assert rows["Parallel strategy asked for"] == "tensor parallel"
    assert rows["GPUs asked for"] == "4"


def test_the_workload_rows_say_when_the_precision_was_left_open():
    rows = dict(estimate_inputs({"params": 7_000_000_000, "task": "lora", "precision": None}))
    assert rows["Precision"] == "not given: 16-bit, bf16 or fp16 as the GPU has it"
    rows = dict(estimate_inputs({"params": 7_000_000_000, "task": "lora", "precision": "bf16"}))
    assert rows["Precision"] == "bf16"


def test_the_workload_rows_say_a_preference_job_counts_pairs():
    """A reviewer reads what the job learns from, and that its batch counts pairs."""
    request = {"params": 7_000_000_000, "task": "lora", "batch_size": 64}
    dpo = dict(estimate_inputs({**request, "training_objective": "dpo"}))
    assert dpo["Learns from"] == "Preference pairs with a reference model (DPO)"
    assert dpo["Global batch (preference pairs)"] == "64"
    kto = dict(estimate_inputs({**request, "training_objective": "kto"}))
    assert kto["Learns from"] == "Single answers marked good or bad, with a reference model (KTO)"
    assert kto["Global batch (labelled examples)"] == "64"
    grpo = dict(
        estimate_inputs(
            {**request, "training_objective": "grpo", "new_tokens": 1024,
             "generations_per_prompt": 8, "seq_len": 300, "kl_penalty": True,
             "generation_tensor_parallel": 4}
        )
    )  # fmt: skip
    assert grpo["Learns from"] == "Answers it writes itself, scored by reward functions (GRPO)"
    assert grpo["Global batch (completions)"] == "64"
    assert (grpo["Prompt length"], grpo["Longest answer written"]) == ("300", "1,024")
    assert grpo["Answers per prompt"] == "8"
    assert grpo["KL penalty"] == "yes: a frozen reference model"
    assert grpo["GPUs per vLLM engine"] == "4"
    sft = dict(estimate_inputs(request))
    assert "Learns from" not in sft
    assert sft["Global batch (sequences)"] == "64"
