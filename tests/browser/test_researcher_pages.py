"""Issue 16 in real Chromium: the embed sizes itself both ways and shows the current question,
the tab title follows the question, /chart/ reads without JavaScript, tables fit a 390 px phone,
and every page has an icon.

Screenshots land in test-artifacts/screenshots/ (names start with "16-").
"""

from __future__ import annotations

import pytest

from tests.browser.test_flow_browser import (
    BERT_INFERENCE,
    STEP,
    answer,
    assert_accessible,
    begin,
    walk,
)
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

PHONE = {"width": 390, "height": 844}
FRAME = "iframe.allocation-triage-frame"


def frame_height(page) -> int:
    return page.evaluate(f"parseInt(document.querySelector('{FRAME}').style.height || '0')")


def frame_answer(page, frame, step: str, value: str) -> None:
    """Answer `step` inside the embed and wait for the frame to move on."""
    frame.locator(f"{STEP}[data-step='{step}']").wait_for()
    radio = frame.locator(f"{STEP} input[name=answer][value='{value}']")
    if value and radio.count():
        radio.check()
    else:
        frame.locator(f"{STEP} #id_answer").fill(value)
    frame.locator(f"{STEP} button[type=submit]").click()
    frame.locator(f"{STEP}[data-step='{step}']").wait_for(state="detached")


def in_parent_viewport(page, frame, selector: str) -> bool:
    """Whether the top of `selector` inside the frame is on the host page's screen."""
    box = frame.locator(selector).first.bounding_box()
    viewport = page.viewport_size
    return box is not None and 0 <= box["y"] <= viewport["height"] - 40


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_embed_frame_grows_shrinks_and_shows_the_current_question(
    browser, live_server, default_catalog, intranet, settings, viewport
):
    allowed, _ = intranet
    settings.EMBED_ALLOWED_ORIGINS = [allowed.origin]
    context = browser.new_context(viewport=viewport) if viewport else browser.new_context()
    page = context.new_page()
    suffix = "phone" if viewport else "desktop"
    page.goto(allowed.origin + "/index.html")
    page.locator(FRAME).wait_for()
    frame = page.frame_locator(FRAME)
    frame.get_by_role("button", name="Start").click()
    for step, value in [("azure", "no"), *BERT_INFERENCE]:
        frame_answer(page, frame, step, value)
    frame.locator("#result-heading").wait_for()
    page.wait_for_function(f"parseInt(document.querySelector('{FRAME}').style.height) > 1500")
    long_result = frame_height(page)
    # The frame is as tall as the result: nothing inside it scrolls.
    inner = frame.locator("body").evaluate("b => b.getBoundingClientRect().height")
    assert abs(long_result - inner) <= 2
    save_screenshot(page, f"16-embed-result-{suffix}")

    # "Change" an early answer from the end of the long result: the frame shrinks to the
    # question and the host page scrolls it into view.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    frame.get_by_role("link", name="Change the answer to: What kind of work is it?").click()
    frame.locator(f"{STEP}[data-step='work_kind']").wait_for()
    page.wait_for_function(
        f"parseInt(document.querySelector('{FRAME}').style.height) < {long_result - 500}"
    )
    page.wait_for_function(
        f"""() => {{
            const frame = document.querySelector('{FRAME}');
            const top = frame.getBoundingClientRect().top;
            return top > -2000 && top < window.innerHeight;
        }}"""
    )
    assert in_parent_viewport(page, frame, "#step-heading")
    save_screenshot(page, f"16-embed-change-{suffix}", full_page=False)

    # Answer in place (htmx): the next question is in view too.
    frame_answer(page, frame, "work_kind", "cpu")
    frame.locator(f"{STEP}[data-step='cpu_data_size']").wait_for()
    page.wait_for_timeout(300)
    assert in_parent_viewport(page, frame, "#step-heading")

    save_screenshot(page, f"16-embed-next-question-{suffix}", full_page=False)
    context.close()


@pytest.mark.parametrize("width", [pytest.param(1280, id="desktop"), pytest.param(390, id="390px")])
def test_embed_start_again_after_a_result_shrinks_the_frame(
    width, browser, live_server, default_catalog, intranet, settings
):
    allowed, _ = intranet
    settings.EMBED_ALLOWED_ORIGINS = [allowed.origin]
    page = browser.new_page(viewport={"width": width, "height": 720})
    page.goto(allowed.origin + "/index.html")
    frame = page.frame_locator(FRAME)
    frame.get_by_role("button", name="Start").click()
    for step, value in [("azure", "no"), *BERT_INFERENCE]:
        frame_answer(page, frame, step, value)
    frame.locator("#result-heading").wait_for()
    page.wait_for_function(f"parseInt(document.querySelector('{FRAME}').style.height) > 1500")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    frame.get_by_role("link", name="Start again with new answers").click()
    frame.get_by_role("button", name="Start").wait_for()
    page.wait_for_function(f"parseInt(document.querySelector('{FRAME}').style.height) < 1200")
    inner = frame.locator("body").evaluate("b => b.getBoundingClientRect().height")
    assert abs(frame_height(page) - inner) <= 2
    # The host page is no longer than its heading plus the short start page.
    page_height = page.evaluate("document.documentElement.scrollHeight")
    assert page_height < frame_height(page) + 400
    assert in_parent_viewport(page, frame, "main")
    save_screenshot(page, f"16-embed-start-again-{width}px")
    page.close()


def test_tab_title_follows_the_question_after_htmx_swaps(browser, live_server, default_catalog):
    page = browser.new_page()
    begin(page, live_server.url, azure=None)
    assert page.title() == "Do you need Azure? | Allocation Triage"
    answer(page, "azure", "no")
    assert page.title() == "What kind of work is it? | Allocation Triage"
    answer(page, "work_kind", "cpu")
    assert page.title() == "How much data will you handle? | Allocation Triage"
    answer(page, "cpu_data_size", "20")
    assert page.title().startswith("Will you need to watch the job")
    page.go_back()
    page.wait_for_function(
        "document.querySelector('#advisor-step').dataset.step === 'cpu_data_size'"
    )
    assert page.title() == "How much data will you handle? | Allocation Triage"
    page.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_chart_page_reads_as_steps_in_order(
    browser, live_server, default_catalog, axe_core_path, javascript
):
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(live_server.url + "/chart/")
    outline = page.locator(".chart-outline")
    assert outline.is_visible()
    first = outline.locator("> li").first.inner_text()
    assert first.startswith("Question: Do you need Azure?")
    assert "graph TD" not in page.locator("main").inner_text()
    assert "Rectangles" not in page.locator("main").inner_text() or javascript
    # Every branch links to the step it leads to.
    link = outline.locator("a").first
    target = link.get_attribute("href")
    assert page.locator(target).count() == 1
    if javascript:
        page.wait_for_selector("#flowchart-mermaid svg")
        assert_accessible(page, axe_core_path)
    name = "js" if javascript else "no-js"
    save_screenshot(page, f"16-chart-{name}")
    context.close()


def test_result_tables_fit_a_phone(browser, live_server, default_catalog, axe_core_path):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    begin(page, live_server.url)
    walk(page, BERT_INFERENCE)
    # Nothing on the page is wider than the screen, so nothing needs a sideways scroll.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    why_not = page.locator(".alternatives-table td[data-label='Why not']").first
    box = why_not.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"]
    # The memory chart's labels sit inside the drawing.
    clipped = page.evaluate(
        """() => {
            const svg = document.querySelector('svg.memory-chart');
            const frame = svg.getBoundingClientRect();
            return [...svg.querySelectorAll('text')].filter(t => {
                const r = t.getBoundingClientRect();
                return r.left < frame.left - 1 || r.right > frame.right + 1
                    || r.top < frame.top - 1;
            }).map(t => t.textContent);
        }"""
    )
    assert clipped == []
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "16-result-phone")
    context.close()


def test_every_page_has_an_icon(browser, live_server, default_catalog):
    page = browser.new_page()
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    for path in ("/", "/chart/", "/catalog/", "/accounts/login/"):
        page.goto(live_server.url + path)
        href = page.locator("link[rel=icon]").get_attribute("href")
        assert href
        assert href.endswith(".svg")
        assert page.request.get(live_server.url + href).ok
    assert page.request.get(live_server.url + "/favicon.ico").ok
    assert missing == []
    page.close()
