"""Researchers walking the advisor in real headless Chromium, start to result.

Screenshots of every result land in test-artifacts/screenshots/. axe-core runs on the pages each
scenario visits and must find no serious or critical violation.
"""

from __future__ import annotations

import re

import pytest

from advisor.models import AdvisorSession
from tests.support import walks
from tests.support.dates import iso_days_from_today
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

STEP = "#advisor-step"
ON_STEP = "step => document.querySelector('#advisor-step')?.dataset.step === step"


def axe_violations(page, axe_core_path) -> list[dict]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=axe_core_path)
    return page.evaluate(
        """async () => {
            const result = await axe.run(document);
            return result.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => ({id: v.id, impact: v.impact, help: v.help,
                            nodes: v.nodes.map(n => n.target.join(' '))}));
        }"""
    )


def assert_accessible(page, axe_core_path):
    violations = axe_violations(page, axe_core_path)
    assert violations == [], f"{page.url}: {violations}"


def current_step(page) -> str:
    return page.locator(STEP).get_attribute("data-step")


def answer(page, step: str, value: str, *, axe: str | None = None, htmx: bool = True):
    """Answer the question on screen, which must be `step`, and wait for what follows."""
    assert current_step(page) == step, f"expected {step}, on {current_step(page)}"
    if axe:
        assert_accessible(page, axe)
    radio = page.locator(f"{STEP} input[name=answer][value='{value}']")
    if value and radio.count():
        radio.check()
    else:
        page.locator(f"{STEP} #id_answer").fill(value)
    page.locator(f"{STEP} button[type=submit]").click()
    if htmx:
        page.wait_for_function(
            """step => location.pathname.endsWith('/result/') ||
                (document.querySelector('#advisor-step') &&
                 document.querySelector('#advisor-step').dataset.step !== step)""",
            arg=step,
        )
    else:
        page.wait_for_load_state("load")


def begin(page, base_url: str, *, azure: str | None = "no"):
    """Start the flow and answer the Turing chart's first question, "Do you need Azure?"."""
    page.goto(base_url + "/")
    page.get_by_role("button", name="Start").click()
    page.wait_for_selector(STEP)
    if azure is not None:
        answer(page, "azure", azure)


def walk(page, answers, *, axe: str | None = None, htmx: bool = True):
    for step, value in answers:
        answer(page, step, value, axe=axe, htmx=htmx)
    page.wait_for_selector("#result-heading")


BERT_INFERENCE = walks.changed(walks.INFERENCE_110M, azure=None)
LORA_MISTRAL_7B = walks.changed(
    walks.LORA_7B,
    model="mistralai/Mistral-7B-v0.1",
    model_params=None,
    timeline=iso_days_from_today(200),
    azure=None,
)
PRETRAIN_1B = [
    ("work_kind", "pretrain"),
    ("model", ""),
    ("model_params", "1"),
    ("precision", "bf16"),
    ("framework_training", "not_sure"),
    ("batch_size", "8"),
    ("seq_len", "2048"),
    ("dataset_tokens", "20000"),
    ("epochs", "1"),
    ("num_gpus", "8"),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "lots"),
    ("notebooks", "no"),
]
AZURE_WEB_SERVICE = [
    ("azure", "yes"),
    ("who_pays", "project"),
    ("work_kind", "inference"),
    ("model", ""),
    ("model_params", "7"),
    ("precision", "bf16"),
    ("framework_inference", "not_sure"),
    ("batch_size", "1"),
    ("seq_len", "4096"),
    ("new_tokens", ""),
    ("inference_tokens", "200"),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
]
WEB_SCRAPING = walks.CPU_SCRAPING


def recommendation(page) -> str:
    return page.locator(".recommendation").inner_text()


def test_bert_inference_on_a_small_gpu(browser, live_server, default_catalog, axe_core_path):
    page = browser.new_page()
    begin(page, live_server.url)
    walk(page, BERT_INFERENCE)
    assert page.locator("#result-heading").inner_text() == (
        "Request time on a V100-class HPC system"
    )
    assert " x 1 on " in recommendation(page)
    assert page.get_by_text("decided for you: It needs").count() == 1
    assert page.locator("svg.memory-chart").count() == 1
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "1-bert-inference-result")
    page.close()


def test_lora_of_a_7b_model_with_hub_lookup(
    browser, live_server, default_catalog, fake_hub, axe_core_path
):
    page = browser.new_page()
    begin(page, live_server.url)
    answer(page, "work_kind", "lora", axe=axe_core_path)
    answer(page, "model", "mistralai/Mistral-7B-v0.1", axe=axe_core_path)
    # The model step started a Hub lookup; its card shows on the next step (the size is known,
    # so no size question is asked: issue 15).
    card = page.locator("#hf-lookup")
    card.wait_for()
    assert "mistralai/Mistral-7B-v0.1" in card.inner_text()
    walk(page, LORA_MISTRAL_7B[2:], axe=axe_core_path)
    assert page.locator("#result-heading").inner_text() == (
        "Request time on an HPC system with A100, H100 or newer GPUs"
    )
    advisor_session = AdvisorSession.objects.get()
    request = advisor_session.estimate_request
    assert request["model_id"] == "mistralai/Mistral-7B-v0.1"
    assert request["hub"]["repo_id"] == "mistralai/Mistral-7B-v0.1"
    assert advisor_session.estimate_result["params_total"] == 7_241_732_096
    assert page.locator("#contingency").inner_text().startswith("+ ")
    assert page.locator("#slurm-script").inner_text().startswith("#!/bin/bash")
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "2-lora-7b-result")
    page.close()


def test_pretraining_a_1b_model_on_several_gpus(
    browser, live_server, default_catalog, axe_core_path
):
    page = browser.new_page()
    begin(page, live_server.url)
    walk(page, PRETRAIN_1B)
    assert " x 8 on " in recommendation(page)
    rec = AdvisorSession.objects.get().estimate_result["recommendation"]
    assert rec["num_gpus"] == 8
    assert rec["requested_gpu_hours"] == pytest.approx(
        rec["gpu_hours"] + rec["contingency_gpu_hours"], abs=0.05
    )
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "3-pretrain-1b-result")
    page.close()


def test_public_web_service_that_needs_azure(browser, live_server, default_catalog, axe_core_path):
    page = browser.new_page()
    begin(page, live_server.url, azure=None)
    walk(page, AZURE_WEB_SERVICE)
    assert page.locator("#result-heading").inner_text() == "Submit a brief Azure request"
    assert "Azure" in recommendation(page)
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "4-azure-web-service-result")
    page.close()


def test_web_scraping_gets_cpu_advice(browser, live_server, default_catalog, axe_core_path):
    page = browser.new_page()
    begin(page, live_server.url)
    walk(page, WEB_SCRAPING, axe=axe_core_path)
    assert page.locator("#result-heading").inner_text() == (
        "Use an interactive CPU service, not a GPU"
    )
    assert page.locator("#gpu-hours").count() == 0
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "5-web-scraping-result")
    page.close()


def test_flow_without_javascript(browser, live_server, default_catalog):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    begin(page, live_server.url, azure=None)
    answer(page, "azure", "no", htmx=False)
    # A bad number is refused next to the field by a plain form post.
    answer(page, "work_kind", "lora", htmx=False)
    answer(page, "model", "", htmx=False)
    answer(page, "model_params", "seven", htmx=False)
    assert current_step(page) == "model_params"
    assert page.locator("#id_answer_error").inner_text() == (
        "Enter a number, for example 8. Sizes may also be typed as 8B, 125M or 1.3e9."
    )
    save_screenshot(page, "6-no-js-validation")
    after_size = [a for a in LORA_MISTRAL_7B if a[0] not in ("work_kind", "model", "model_params")]
    walk(page, [("model_params", "7"), *after_size], htmx=False)
    assert page.locator("#result-heading").inner_text() == (
        "Request time on an HPC system with A100, H100 or newer GPUs"
    )
    save_screenshot(page, "6-no-js-result")
    context.close()


def test_htmx_validation_back_forward_and_change_an_earlier_answer(
    browser, live_server, default_catalog, axe_core_path
):
    page = browser.new_page()
    begin(page, live_server.url)
    answer(page, "work_kind", "lora")
    answer(page, "model", "")
    page.locator("#id_answer").fill("99999")
    page.locator(f"{STEP} button[type=submit]").click()
    error = page.locator("#id_answer_error")
    error.wait_for()
    assert error.inner_text() == "Enter at most 2,000 billion parameters."
    # Focus moves to the message once htmx has settled the swap; wait for it, do not race it.
    page.wait_for_function("document.activeElement?.id === 'id_answer_error'", timeout=5000)
    assert_accessible(page, axe_core_path)
    answer(page, "model_params", "7")
    assert re.search(r"/step/precision/$", page.url)
    page.go_back()
    page.wait_for_function(ON_STEP, arg="model_params")
    page.go_forward()
    page.wait_for_function(ON_STEP, arg="precision")
    page.reload()
    assert current_step(page) == "precision"
    page.locator("summary", has_text="Your answers so far").click()
    page.get_by_role("link", name="Change the answer to: What kind of work is it?").click()
    page.wait_for_function(ON_STEP, arg="work_kind")
    answer(page, "work_kind", "cpu")
    assert current_step(page) == "cpu_data_size"
    page.close()


def test_closing_the_page_midway_and_resuming(browser, live_server, default_catalog):
    context = browser.new_context()
    page = context.new_page()
    begin(page, live_server.url)
    walk_part = BERT_INFERENCE[:6]  # up to batch_size, past recipes' framework question
    for step, value in walk_part:
        answer(page, step, value)
    resume = page.locator(".resume-link a").get_attribute("href")
    page.close()
    page = context.new_page()
    page.goto(live_server.url + "/")
    page.get_by_role("link", name="continue where you left off").click()
    page.wait_for_selector(STEP)
    assert current_step(page) == "seq_len"
    context.close()
    # The resume link alone works in another browser, too.
    other = browser.new_context()
    page = other.new_page()
    page.goto(resume)
    assert current_step(page) == "seq_len"
    walk(page, BERT_INFERENCE[6:])
    assert page.locator("#result-heading").count() == 1
    other.close()


def test_start_and_chart_pages_are_accessible(browser, live_server, default_catalog, axe_core_path):
    page = browser.new_page()
    page.goto(live_server.url + "/")
    assert_accessible(page, axe_core_path)
    page.goto(live_server.url + "/chart/")
    page.wait_for_selector("#flowchart-mermaid svg")
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "chart")
    page.close()


def test_embed_inside_an_allowed_intranet_frame(
    browser, live_server, default_catalog, intranet, settings
):
    allowed, denied = intranet
    settings.EMBED_ALLOWED_ORIGINS = [allowed.origin]
    page = browser.new_page()
    page.goto(allowed.origin + "/index.html")
    frame_element = page.locator("iframe.allocation-triage-frame")
    frame_element.wait_for()
    frame = page.frame_locator("iframe.allocation-triage-frame")
    frame.get_by_role("button", name="Start").click()
    frame.locator(STEP).wait_for()
    frame.locator("input[name=answer][value='no']").check()  # "Do you need Azure?" comes first
    frame.locator("button[type=submit]").click()
    frame.locator(f"{STEP}[data-step='work_kind']").wait_for()
    frame.locator("input[name=answer][value='cpu']").check()
    frame.locator("button[type=submit]").click()
    frame.locator(f"{STEP}[data-step='cpu_data_size']").wait_for()
    # The frame grows to its content through origin-checked postMessage.
    page.wait_for_function(
        "document.querySelector('iframe.allocation-triage-frame').style.height !== ''"
    )
    height = page.evaluate(
        "parseInt(document.querySelector('iframe.allocation-triage-frame').style.height)"
    )
    assert height > 300
    save_screenshot(page, "7-embed-allowed")
    page.close()


def test_embed_refused_inside_a_disallowed_frame(
    browser, live_server, default_catalog, intranet, settings
):
    allowed, denied = intranet
    settings.EMBED_ALLOWED_ORIGINS = [allowed.origin]
    page = browser.new_page()
    page.goto(denied.origin + "/index.html")
    page.locator("iframe.allocation-triage-frame").wait_for()
    page.wait_for_timeout(1500)
    frame = page.frame_locator("iframe.allocation-triage-frame")
    assert frame.get_by_role("button", name="Start").count() == 0
    assert (
        page.evaluate("document.querySelector('iframe.allocation-triage-frame').style.height") == ""
    )
    save_screenshot(page, "8-embed-denied")
    page.close()


@pytest.mark.parametrize(
    ("typed", "parameters", "javascript"),
    [
        pytest.param("125M", 125_000_000, True, id="125M-htmx"),
        pytest.param("1.3e9", 1_300_000_000, False, id="1.3e9-no-js"),
    ],
)
def test_a_size_typed_as_researchers_write_it_reaches_the_estimate(
    typed, parameters, javascript, browser, live_server, default_catalog
):
    """Issue 16: parameter counts accept "8B", "7b", "125M", "1.3e9" (the first two are walked
    in test_results_everywhere.py), with and without JavaScript, and the result says the size
    in words."""
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    begin(page, live_server.url)
    answers = [(s, typed if s == "model_params" else v) for s, v in BERT_INFERENCE]
    walk(page, answers, htmx=javascript)
    assert AdvisorSession.objects.get().estimate_request["params"] == parameters
    words = "125 million parameters" if parameters < 1e9 else "1.3 billion parameters"
    assert words in page.locator("main").inner_text()
    save_screenshot(page, f"16-size-typed-{typed}")
    context.close()
