"""Issue 15's walk: six researchers in Chromium with the Hugging Face Hub unreachable.

Each ends on a result page with a recommendation or route and a request a reviewer could
accept: the project's GPU hours line by line, and a justification that lists them. Named
models are sized from the configurations the service keeps (advisor/model_configs/); a typed
size is read as researchers write it ("1.3B"). Screenshots: test-artifacts/screenshots/path-*.png.
"""

from __future__ import annotations

import re

import pytest

from advisor.models import AdvisorSession
from tests.browser.test_flow_browser import answer, assert_accessible, begin, current_step, walk
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

TAIL_HPC = [
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "some"),
    ("notebooks", "no"),
]

WALKS = {
    "qlora-llama-3.1-8b": [
        ("azure", "no"),
        ("work_kind", "qlora"),
        ("model", "meta-llama/Llama-3.1-8B"),
        ("precision", "bf16"),
        ("framework_training", "not_sure"),
        ("training_objective", "not_sure"),
        ("batch_size", "4"),
        ("seq_len", "2048"),
        ("dataset_tokens", "20"),
        ("epochs", "2"),
        ("num_gpus", ""),
        *TAIL_HPC,
    ],
    "pretrain-typed-1.3b": [
        ("azure", "no"),
        ("work_kind", "pretrain"),
        ("model", ""),
        ("model_params", "1.3B"),
        ("precision", "bf16"),
        ("framework_training", "not_sure"),
        ("batch_size", "8"),
        ("seq_len", "2048"),
        ("dataset_tokens", "26000"),
        ("epochs", "1"),
        ("num_gpus", ""),
        *TAIL_HPC,
    ],
    "mixtral-inference": [
        ("azure", "no"),
        ("work_kind", "inference"),
        ("model", "mistralai/Mixtral-8x7B-v0.1"),
        ("precision", "bf16"),
        ("framework_inference", "not_sure"),
        ("batch_size", "8"),
        ("seq_len", "4096"),
        ("new_tokens", ""),
        ("inference_tokens", "200"),
        *TAIL_HPC,
    ],
    "bert-base-finetune": [
        ("azure", "no"),
        ("work_kind", "full_finetune"),
        ("model", "google-bert/bert-base-uncased"),
        ("precision", "fp16"),
        ("framework_training", "not_sure"),
        ("training_objective", "not_sure"),
        ("batch_size", "32"),
        ("seq_len", "128"),
        ("dataset_tokens", "5"),
        ("epochs", "3"),
        ("num_gpus", ""),
        *TAIL_HPC,
    ],
    "confidential-data": [
        ("azure", "no"),
        ("work_kind", "lora"),
        ("model", "meta-llama/Llama-3.1-8B"),
        ("precision", "bf16"),
        ("framework_training", "not_sure"),
        ("training_objective", "not_sure"),
        ("batch_size", "4"),
        ("seq_len", "2048"),
        ("dataset_tokens", "20"),
        ("epochs", "2"),
        ("num_gpus", ""),
        ("project_plan", "suggested"),
        ("data_sensitivity", "confidential"),
        ("timeline", ""),
        ("hpc_experience", "none"),
    ],
    "azure-web-service": [
        ("azure", "yes"),
        ("who_pays", "project"),
        ("work_kind", "hosting"),
        ("model", ""),
        ("model_params", "7B"),
        ("precision", "bf16"),
        ("hosting_months", "6"),
        ("data_sensitivity", "public"),
        ("timeline", ""),
        ("hpc_experience", "none"),
    ],
}

HEADLINES = {
    "qlora-llama-3.1-8b": "Request time on",
    "pretrain-typed-1.3b": "Request time on an HPC system with A100, H100 or newer GPUs",
    "mixtral-inference": "Request time on an HPC system with A100, H100 or newer GPUs",
    "bert-base-finetune": "Request time on",
    "confidential-data": "Use the Turing's Trusted Research Environment",
    "azure-web-service": "Submit a brief Azure request",
}


@pytest.fixture
def hub_away(settings):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens
    settings.HF_TIMEOUT_SECONDS = 1


@pytest.mark.parametrize("name", list(WALKS))
def test_each_researcher_reaches_a_request_a_reviewer_could_accept(
    name, browser, live_server, default_catalog, hub_away, axe_core_path
):
    page = browser.new_page()
    begin(page, live_server.url, azure=None)  # the walks answer "Do you need Azure?" themselves
    answers = WALKS[name]
    model_id = dict(answers)["model"]
    upto = [step for step, _ in answers].index("model") + 1
    for step, value in answers[:upto]:
        answer(page, step, value)
    if model_id:
        # A named model: its size came from the bundled configuration, not the Hub, so the
        # flow goes straight on to precision and the lookup card says where the size came from.
        assert current_step(page) == "precision"
        card = page.locator("#hf-lookup")
        card.wait_for()
        assert model_id in card.inner_text()
    walk(page, answers[upto:])
    assert page.locator("#result-heading").inner_text().startswith(HEADLINES[name])
    assert page.get_by_text("could not estimate").count() == 0
    assert page.get_by_text("try a lower precision").count() == 0

    advisor_session = AdvisorSession.objects.get()
    justification = page.locator("#justification").inner_text()
    # A reviewer never reads a zero: small jobs still state their hours (issue 16).
    assert not re.search(r"(?<![\d.,])0(\.0+)? GPU hours", justification), justification
    if name == "azure-web-service":
        # A service that stays up is priced by the month, not by runs: no project plan.
        assert advisor_session.project_plan is None
        assert "We will host a web service" in justification
        assert advisor_session.estimate_result["recommendation"]["system"] == "azure"
        assert_accessible(page, axe_core_path)
        save_screenshot(page, f"path-{name}")
        page.close()
        return
    plan = advisor_session.project_plan
    assert plan is not None, advisor_session.estimate_result
    total = plan["total_gpu_hours"]
    # The request is built line by line, and the justification lists the same lines.
    table = page.locator("#project-plan")
    assert table.locator("tr[data-line='runs']").count() == 1
    assert page.locator("#plan-total").inner_text() == str(total)
    assert f"Total requested: {total:,} GPU hours." in justification
    assert "Full runs (seeds, ablations, the final run)" in justification
    # Sensible sizes: a reviewer sees neither a minute nor a lifetime.
    assert 8 <= total <= 500_000, total
    if model_id:
        assert advisor_session.estimate_request["model_id"] == model_id
    if name == "confidential-data":
        assert page.get_by_text("What to do with confidential data").count() == 1
        assert page.get_by_text("trustedresearch@turing.ac.uk", exact=False).count() >= 1
        assert page.locator("#secure-hardware li").count() >= 2
    else:
        assert advisor_session.estimate_result["recommendation"]["fits"] is True
    if name == "pretrain-typed-1.3b":
        assert advisor_session.estimate_request["params"] == 1_300_000_000
    assert_accessible(page, axe_core_path)
    save_screenshot(page, f"path-{name}")
    page.close()
