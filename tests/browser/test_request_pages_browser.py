"""Issue 16's request points in Chromium, on a desktop with JavaScript and on a 390 px phone
without it: the sign-in page says how accounts are obtained; the pre-filled form marks the
fields a submission needs and suggests trial access only within the system's trial limit; a
request moved to another facility is re-estimated for it or says plainly that the estimate was
made for another system; the request page uses people's names for systems and GPUs.

Screenshots: test-artifacts/screenshots/16-request-<step>-<setting>.png.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from advisor.models import AdvisorSession
from allocations.facilities import facility_offers_trial, trial_gpu_hours_limit
from allocations.models import AllocationRequest
from catalog.models import System, SystemKind, SystemStatus
from tests.browser.test_flow_browser import BERT_INFERENCE, begin, walk
from tests.browser.test_results_everywhere import DESKTOP, PHONE, READER_TEXT, assert_plain_words
from tests.support.dates import iso_days_from_today
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple 16"
SETTINGS = {"desktop-js": (DESKTOP, True), "phone-no-js": (PHONE, False)}
REQUIRED_TO_SUBMIT = [
    "project_title",
    "project_code",
    "research_area",
    "pi_name",
    "pi_email",
    "service",
    "facility",
    "allocation_kind",
    "start_date",
    "end_date",
    "data_sensitivity",
]
MARK = """id => {
    const label = document.querySelector(`label[for="${id}"]`);
    return label ? getComputedStyle(label, '::after').content : null;
}"""


WIDER_THAN_THE_SCREEN = """() => {
    // Text that runs past the right edge, outside any box that scrolls on its own.
    const wide = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const node = walker.currentNode;
        if (!node.textContent.trim() || node.parentElement.closest('.table-scroll, pre')) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        if (range.getBoundingClientRect().right > window.innerWidth + 1)
            wide.push(node.parentElement.tagName + ': ' + node.textContent.trim().slice(0, 80));
    }
    return {scroll: document.documentElement.scrollWidth, width: window.innerWidth, wide};
}"""


def fits_the_screen(page) -> bool:
    """Nothing needs a sideways scroll; else the text that runs off the screen is named."""
    found = page.evaluate(WIDER_THAN_THE_SCREEN)
    assert found["scroll"] <= found["width"], found
    return True


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_researcher_requests_time_and_moves_it_to_another_facility(
    setting, browser, live_server, default_catalog
):
    viewport, javascript = SETTINGS[setting]
    get_user_model().objects.create_user(
        username="ada", password=PASSWORD, email="ada@example.ac.uk", first_name="Ada"
    )
    context = browser.new_context(viewport=viewport, java_script_enabled=javascript)
    page = context.new_page()
    begin(page, live_server.url)
    walk(page, BERT_INFERENCE, htmx=javascript)
    session = AdvisorSession.objects.get()
    estimated = session.estimate_result["recommendation"]["system"]

    # Sign in: the page says how a researcher gets an account.
    page.get_by_role("link", name="Create allocation request").click()
    page.wait_for_selector("#id_username")
    how = page.locator("#how-to-get-an-account").inner_text()
    assert "How to get an account" in how
    assert "Ask them for one" in how or "single sign-on" in how
    assert fits_the_screen(page)
    save_screenshot(page, f"16-request-sign-in-{setting}")
    page.locator("#id_username").fill("ada")
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector("#id_facility")

    # The form marks what a submission needs, on the label a screen shows.
    for name in REQUIRED_TO_SUBMIT:
        mark = page.evaluate(MARK, f"id_{name}")
        if mark is None:  # a group of radio buttons: the mark is on its legend
            mark = page.evaluate(
                """id => getComputedStyle(
                    document.getElementById(id).closest('fieldset').querySelector('legend'),
                    '::after').content""",
                f"id_{name}_0",
            )
        assert "required to submit" in mark, name
    assert "required to submit" not in (page.evaluate(MARK, "id_justification") or "")
    # Trial access is ticked and suggested only when the hours fit the system's trial limit.
    hours = int(page.locator("#id_gpu_hours").input_value())
    within = facility_offers_trial(estimated) and hours <= trial_gpu_hours_limit(estimated)
    assert page.locator("#id_trial").is_checked() is within
    if not within:
        assert page.get_by_text("fits within trial access").count() == 0
    assert fits_the_screen(page)
    save_screenshot(page, f"16-request-form-{setting}")

    # Move the request to another active HPC system and save it as a draft.
    other = (
        System.objects.filter(kind=SystemKind.HPC_BATCH, status=SystemStatus.ACTIVE)
        .exclude(name=estimated)
        .order_by("name")
        .first()
    )
    assert other is not None
    page.locator("#id_facility").select_option(other.name)
    page.locator("#id_project_title").fill("Sentiment of parliamentary debates")
    page.locator("#id_start_date").fill(iso_days_from_today(14))
    page.locator("#id_end_date").fill(iso_days_from_today(120))
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_selector("#request-status")
    allocation_request = AllocationRequest.objects.get()
    assert allocation_request.facility == other.name
    estimate = page.locator(".estimate")
    system_shown = estimate.locator("dt:text-is('System') + dd").inner_text()
    if system_shown != other.display_name:
        # Not re-estimated: the page says so, naming both systems as people know them.
        note = page.locator("#other-facility").inner_text()
        assert note.startswith("This estimate was made for ")
        assert System.objects.get(name=estimated).display_name in note
        assert other.display_name in note
    save_screenshot(page, f"16-request-other-facility-{setting}")
    assert_plain_words(page.evaluate(READER_TEXT))
    assert fits_the_screen(page)
    context.close()
