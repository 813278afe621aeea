"""The Turing chart in its own order, hosting priced per month, and availability respected."""

from __future__ import annotations

import pytest
from django.utils.html import escape
from pytest_django.asserts import assertContains, assertNotContains

from advisor.chart_walk import Decision, walk
from advisor.flowchart import load_chart
from advisor.models import AdvisorSession
from tests.support import walks

pytestmark = pytest.mark.django_db

HOSTING_7B = [
    ("azure", "no"),
    ("work_kind", "hosting"),
    ("model", ""),
    ("model_params", "7"),
    ("precision", "bf16"),
    ("hosting_months", "6"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
    ("hosting_who_pays", "project"),
]
NOTEBOOKS = [
    ("azure", "no"),
    ("work_kind", "notebooks"),
    ("model", ""),
    ("model_params", "0.11"),
    ("precision", "fp16"),
    ("framework_inference", "not_sure"),
    ("batch_size", "8"),
    ("seq_len", "512"),
    ("new_tokens", ""),
    ("inference_tokens", "5"),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "some"),
]
LORA_7B_FP16 = [("azure", "no"), *walks.changed(walks.LORA_7B, precision="fp16", azure=None)]


def never(node, answers):
    return Decision("no", "decided no")


def test_the_cloud_question_comes_first_on_every_path():
    chart = load_chart("default")
    assert chart.start == "azure"
    for kind in ("inference", "lora", "pretrain", "notebooks", "hosting", "cpu"):
        path = walk(chart, {"azure": "no", "work_kind": kind}, never)
        assert path.steps[:2] == ["azure", "work_kind"]


def test_work_without_a_gpu_that_needs_azure_reaches_the_azure_request():
    chart = load_chart("default")
    answers = {
        "azure": "yes",
        "who_pays": "project",
        "work_kind": "cpu",
        "cpu_data_size": 20,
        "cpu_interactive": "yes",
        "data_sensitivity": "public",
        "timeline": "",
        "hpc_experience": "none",
    }
    assert walk(chart, answers, never).outcome == "azure_brief"


def test_a_web_service_is_priced_per_month_on_an_always_on_vm(client, default_catalog):
    advisor_session, page = walks.walk_to_result(client, HOSTING_7B)
    assertContains(page, "Submit a brief Azure request")
    assertContains(page, "An always-on virtual machine")
    # 7B in bf16 is 14 GB of weights: the cheapest priced VM that holds it with margin is a
    # single A100 80GB (3.673 USD/h x 730 h = 2,681 USD a month, 16,088 for six), not an
    # 8-GPU H200 VM.
    assertContains(page, "Standard_NC24ads_A100_v4")
    assertContains(page, '<dd id="hosting-month">2,681 USD</dd>', html=True)
    assertContains(page, "<strong>16,088 USD</strong>", html=True)
    assertContains(page, "For 6 months")
    assertContains(page, "730 hours")
    assertNotContains(page, "#SBATCH")
    assertNotContains(page, "GPU hours to request")
    assertNotContains(page, "GPU(s)")
    justification = page.context["hosting_justification"]
    assert justification.startswith("We will host a web service")
    assert "Standard_NC24ads_A100_v4" in justification
    assertContains(page, escape(justification))


def test_a_web_service_in_fp8_is_hosted_only_where_its_kernels_run(client, default_catalog):
    # fp8 through transformers (the hosting path names no library) needs Hopper: the A100 VM
    # that holds 7B in bf16 is passed over, with the reason, for the cheapest Hopper VM.
    answers = [(step, "fp8" if step == "precision" else value) for step, value in HOSTING_7B]
    advisor_session, page = walks.walk_to_result(client, answers)
    plan = page.context["hosting"]
    assert plan.vm is not None
    assert plan.vm.accelerator in ("h100-80-sxm5", "h200-141-sxm")
    a100 = next(o for o in plan.options if o.name == "Standard_NC24ads_A100_v4")
    assert not a100.fits
    assert "Compute Capability>=9" in a100.reason
    assertContains(page, plan.vm.name)


def test_notebooks_are_never_sent_to_a_system_closed_to_the_turing(client, default_catalog):
    advisor_session, page = walks.walk_to_result(client, NOTEBOOKS)
    rec = advisor_session.estimate_result["recommendation"]
    assert rec["system"] != "baskerville"
    assert "baskerville" not in advisor_session.estimate_request["constraints"]["systems"]
    sentence = page.context["systems_sentence"]
    assert sentence == (
        "Systems considered for this answer (that offer notebooks): Microsoft Azure (Turing "
        "subscriptions); Baskerville is left out because the Turing's hpc-landscape README says "
        "Baskerville is no longer available to the Turing as of April 2026."
    )
    assertContains(page, escape(sentence))


def test_fp16_and_bf16_branches_weigh_the_same_systems_and_say_which(client, default_catalog):
    _, fp16 = walks.walk_to_result(client, LORA_7B_FP16)
    client.cookies.clear()
    AdvisorSession.objects.all().delete()
    bf16_answers = [(s, "bf16" if s == "precision" else v) for s, v in LORA_7B_FP16]
    _, bf16 = walks.walk_to_result(client, bf16_answers)
    for page in (fp16, bf16):
        sentence = page.context["systems_sentence"]
        assert "COSMA8" in sentence
        assert "Stanage" in sentence
        assert "Dawn" in sentence
        assert "Baskerville is left out" in sentence
        rec = page.context["result"].recommendation
        assert rec is None or rec.system != "baskerville"


def test_the_project_pays_so_the_result_shows_a_cost(client, default_catalog):
    answers = [("azure", "yes"), ("who_pays", "project")] + [
        a for a in LORA_7B_FP16[1:] if a[0] != "notebooks"
    ]
    advisor_session, page = walks.walk_to_result(client, answers)
    assertContains(page, "Submit a brief Azure request")
    assertContains(page, 'id="cost"')
    assertContains(page, '<th scope="col">Cost</th>', html=True)


def test_a_web_service_in_bf16_is_not_hosted_on_a_gpu_without_bf16(client, default_catalog):
    """A 1B model fits the cheap T4 VM, but a T4 has no bf16: in bf16 the service goes to the
    cheapest VM whose GPUs have it, and the T4 VM says why not. Left open, the precision is
    fp16 on the T4, which hosts it."""
    answers = [(step, "1" if step == "model_params" else value) for step, value in HOSTING_7B]
    _, page = walks.walk_to_result(client, answers)
    plan = page.context["hosting"]
    assert plan.vm is not None
    assert plan.vm.accelerator != "t4-16"
    t4 = next(o for o in plan.options if o.name == "Standard_NC4as_T4_v3")
    assert not t4.fits
    assert t4.reason == (
        "NVIDIA T4 16GB has no bf16: answer fp16, or 'Not sure', for the precision to host it "
        "there."
    )
    assertContains(page, escape(t4.reason))

    client.cookies.clear()
    AdvisorSession.objects.all().delete()
    open_answers = walks.changed(answers, precision="not_sure")
    _, page = walks.walk_to_result(client, open_answers)
    assert page.context["hosting"].vm.name == "Standard_NC4as_T4_v3"
