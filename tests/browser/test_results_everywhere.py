"""Issue 16's result pages as people meet them: on a desktop and a 390 px phone, with and
without JavaScript, and inside the intranet's embed (an iframe on another origin).

One walk per setting checks several points at once, on the page the researcher ends on:
- the Turing chart's order: "Do you need Azure?" comes first, on the GPU and the no-GPU paths;
- a web service is priced by the month from the VM's price, and an unknown price never wins;
- cost is shown whenever the project pays;
- no outcome recommends a system the catalog marks unavailable, and the result says in one
  sentence which systems it considered and why others were left out;
- words a person reads: no catalog keys, snake_case, "(s)", "a Intel" or ungrouped big numbers;
- nothing is wider than the screen, and the alternatives' "Why not" column is on screen.

Screenshots: test-artifacts/screenshots/16-<walk>-<setting>.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from advisor.engine.words import STRATEGY_NAMES
from advisor.models import AdvisorSession
from catalog.models import Accelerator, System, SystemStatus
from tests.browser.test_flow_browser import STEP, answer, assert_accessible
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
FRAME = "iframe.allocation-triage-frame"

# name: (viewport, JavaScript on, inside the embed)
SETTINGS = {
    "desktop-js": (DESKTOP, True, False),
    "phone-js": (PHONE, True, False),
    "desktop-no-js": (DESKTOP, False, False),
    "phone-no-js": (PHONE, False, False),
    "embed-desktop": (DESKTOP, True, True),
    "embed-phone": (PHONE, True, True),
}

AZURE_HOSTING = [
    ("azure", "yes"),
    ("who_pays", "project"),
    ("work_kind", "hosting"),
    ("model", ""),
    ("model_params", "7b"),  # as researchers type it
    ("precision", "bf16"),
    ("hosting_months", "6"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
]
NOTEBOOKS = [
    ("azure", "no"),
    ("work_kind", "inference"),
    ("model", ""),
    ("model_params", "8B"),
    ("precision", "bf16"),
    ("framework_inference", "not_sure"),
    ("batch_size", "8"),
    ("seq_len", "2048"),
    ("new_tokens", ""),
    ("inference_tokens", "50"),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "some"),
    ("notebooks", "yes"),
]
# No GPU at all, and still the cloud question first: the no-GPU branch reaches Azure.
AZURE_WITHOUT_GPU = [
    ("azure", "yes"),
    ("who_pays", "project"),
    ("work_kind", "cpu"),
    ("cpu_data_size", "20"),
    ("cpu_interactive", "no"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
]

CHART = Path(__file__).resolve().parents[2] / "advisor" / "flowcharts" / "default.yaml"


def _machine_names() -> set[str]:
    """Keys people never read: the chart's step ids and answer values, the engine's strategies."""
    chart = yaml.safe_load(CHART.read_text())
    names = {node["id"] for node in chart["nodes"]}
    names |= {str(c["value"]) for node in chart["nodes"] for c in node.get("choices", [])}
    names |= set(STRATEGY_NAMES)
    return {name for name in names if "_" in name}


# Machine grammar and raw values that must never reach a reader.
MACHINE_WORDS = [
    (re.compile(rf"\b({'|'.join(sorted(_machine_names()))})\b"), "a step, answer or strategy key"),
    (re.compile(r"\w\(s\)"), "'(s)' instead of a plural"),
    (re.compile(r"\ba (?=[AEIOU][a-z])"), "'a' before a vowel"),
    (re.compile(r"(?<![\d,.#/])\d{5,}(?![\d,])"), "a big number without thousands separators"),
    # A Python value printed as such; a source quoted by name ("the 'None' row") is fine.
    (re.compile(r"(?<!')\b(None|nan|True|False)\b(?!')"), "a Python value"),
]

READER_TEXT = """() => {
    // Text a person reads: not scripts, code or the Slurm script (which is code, on purpose).
    const skip = 'pre, code, script, style, template, noscript, textarea';
    const parts = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const parent = walker.currentNode.parentElement;
        if (parent && !parent.closest(skip)) parts.push(walker.currentNode.textContent);
    }
    return parts.join(' ').replace(/\\s+/g, ' ');
}"""


class Researcher:
    """One researcher's browser in one setting; `frame` is where the advisor's pages are."""

    def __init__(self, browser, live_server, intranet, settings, setting: str):
        viewport, self.javascript, self.embedded = SETTINGS[setting]
        self.setting = setting
        self.context = browser.new_context(viewport=viewport, java_script_enabled=self.javascript)
        self.page = self.context.new_page()
        self.width = viewport["width"]
        if self.embedded:
            allowed, _ = intranet
            settings.EMBED_ALLOWED_ORIGINS = [allowed.origin]
            self.page.goto(allowed.origin + "/index.html")
            self.frame = self.page.wait_for_selector(FRAME).content_frame()
            self.frame.wait_for_selector("main")
        else:
            self.page.goto(live_server.url + "/")
            self.frame = self.page.main_frame

    def walk(self, answers) -> None:
        self.frame.get_by_role("button", name="Start").click()
        self.frame.wait_for_selector(STEP)
        # The Turing chart's first question, whatever the work.
        assert self.frame.locator(STEP).get_attribute("data-step") == "azure"
        for step, value in answers:
            answer(self.frame, step, value, htmx=self.javascript)
        self.frame.wait_for_selector("#result-heading")

    def text(self) -> str:
        return self.frame.evaluate(READER_TEXT)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def researcher(request, browser, live_server, default_catalog, intranet, settings):
    made = []

    def start(setting: str) -> Researcher:
        made.append(Researcher(browser, live_server, intranet, settings, setting))
        return made[-1]

    yield start
    for one in made:
        one.close()


def assert_plain_words(text: str) -> None:
    text = re.sub(r"https?://\S+", "<link>", text)  # addresses are what they are
    for pattern, what in MACHINE_WORDS:
        found = pattern.search(text)
        assert found is None, f"{what}: ...{text[max(0, found.start() - 60) : found.end() + 60]}..."
    # Catalog keys that differ from the names people use ("max1550-128", "turing-tre").
    keys = [
        name
        for model in (System, Accelerator)
        for name, display in model.objects.values_list("name", "display_name")
        if name != display and re.search(r"[\d_-]", name)
    ]
    assert keys, "the catalog should have keys to look for"
    for key in keys:
        found = re.search(rf"(?<![\w/.-]){re.escape(key)}(?![\w/.-])", text)
        assert found is None, (
            f"a catalog key: ...{text[max(0, found.start() - 80) : found.end() + 60]}"
        )


def assert_fits_the_screen(researcher: Researcher) -> None:
    """Nothing needs a sideways scroll: not the page, nor the advisor inside its frame."""
    page_width = researcher.page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= researcher.width, page_width
    inner = researcher.frame.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert inner[0] <= inner[1], inner


def money(text: str) -> float:
    found = re.search(r"([\d,]+(?:\.\d+)?) [A-Z]{3}", text)
    assert found, text
    return float(found.group(1).replace(",", ""))


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_azure_web_service_is_priced_by_the_month(researcher, setting, axe_core_path):
    one = researcher(setting)
    one.walk(AZURE_HOSTING)
    frame = one.frame
    assert frame.locator("#result-heading").inner_text() == "Submit a brief Azure request"
    # The size was typed as "7b" and read as 7 billion parameters.
    assert AdvisorSession.objects.get().estimate_request["params"] == 7_000_000_000
    # Priced per month from the VM's price, for the months asked, because the project pays.
    month = money(frame.locator("#hosting-month").inner_text())
    total = money(frame.locator("#hosting-total").inner_text())
    assert month > 0
    assert total == pytest.approx(6 * month, rel=0.01)
    assert frame.locator("#hosting").get_by_text("priced by the month").count() == 1
    # The cheapest size that fits and has a price wins; a size without a price never does.
    rows = frame.locator("#hosting .alternatives-table tbody tr")
    priced = []
    for index in range(rows.count()):
        row = rows.nth(index)
        fits = row.locator("td[data-label='Fits?']").inner_text() == "Yes"
        price = row.locator("td[data-label='Per month']").inner_text()
        if fits and price != "unknown":
            priced.append((money(price), row.locator("th").inner_text()))
    assert priced, "some VM size should fit a 7B model"
    chosen = frame.locator("#hosting .recommendation strong").inner_text()
    assert chosen == min(priced)[1]
    assert "unknown" not in frame.locator("#hosting .figures").inner_text()
    assert_plain_words(one.text())
    assert_fits_the_screen(one)
    if one.javascript:
        assert_accessible(frame, axe_core_path)
    save_screenshot(one.page, f"16-azure-hosting-{setting}")


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_notebooks_never_go_to_an_unavailable_system(researcher, setting, axe_core_path):
    one = researcher(setting)
    one.walk(NOTEBOOKS)
    frame = one.frame
    assert frame.locator("#result-heading").inner_text() == (
        "Request time on a GPU system with notebooks"
    )
    assert AdvisorSession.objects.get().estimate_request["params"] == 8_000_000_000
    unavailable = System.objects.exclude(status=SystemStatus.ACTIVE)
    assert unavailable.filter(name="baskerville").exists()
    recommendation = frame.locator(".recommendation").inner_text()
    for system in unavailable:
        assert system.display_name not in recommendation, recommendation
    rec = AdvisorSession.objects.get().estimate_result["recommendation"]
    assert rec["system"] not in set(unavailable.values_list("name", flat=True))
    # A short note says which systems were considered and why Baskerville is not.
    note = frame.locator("#systems-considered").inner_text()
    # One sentence: the systems weighed, then "; <system> is left out because <why>".
    assert note.count(". ") == 0, note
    considered, _, left_out = note.partition("; ")
    assert System.objects.get(name=rec["system"]).display_name in considered, note
    assert "Baskerville is left out" in left_out, note
    assert "no longer available" in left_out, note
    # The alternatives say why not, and that column is on screen even at 390 px.
    why_not = frame.locator(".alternatives-table td[data-label='Why not']").first
    why_not.scroll_into_view_if_needed()
    box = why_not.bounding_box()
    assert box is not None
    assert 0 <= box["x"] <= box["x"] + box["width"] <= one.width
    assert_plain_words(one.text())
    assert_fits_the_screen(one)
    if one.javascript:
        assert_accessible(frame, axe_core_path)
    save_screenshot(one.page, f"16-notebooks-{setting}")


@pytest.mark.parametrize("setting", ["phone-no-js", "embed-desktop"])
def test_work_without_a_gpu_can_still_ask_for_azure(researcher, setting):
    one = researcher(setting)
    one.walk(AZURE_WITHOUT_GPU)
    frame = one.frame
    assert frame.locator("#result-heading").inner_text() == "Submit a brief Azure request"
    assert "Azure" in one.text()
    assert_plain_words(one.text())
    assert_fits_the_screen(one)
    save_screenshot(one.page, f"16-azure-without-gpu-{setting}")
