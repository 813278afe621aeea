"""A refused htmx post must be seen: htmx 2 drops error responses unless told otherwise."""

from __future__ import annotations

import pytest

from advisor.models import AdvisorSession
from tests.browser.test_flow_browser import STEP, answer, assert_accessible, begin

pytestmark = [pytest.mark.browser]


def test_csrf_failure_during_an_htmx_step_shows_the_403_page(
    browser, live_server, default_catalog, axe_core_path
):
    context = browser.new_context()
    page = context.new_page()
    begin(page, live_server.url)
    answer(page, "work_kind", "lora")
    context.clear_cookies()  # a browser that dropped this site's cookies (inside a frame, say)
    page.locator(f"{STEP} #id_answer").fill("google-bert/bert-base-uncased")
    page.locator(f"{STEP} button[type=submit]").click()
    heading = page.get_by_role("heading", name="Your form could not be sent")
    heading.wait_for(timeout=5000)
    assert page.locator("main").count() == 1
    assert "Nothing was saved" in page.locator("main").inner_text()
    assert AdvisorSession.objects.get().answers == {"azure": "no", "work_kind": "lora"}
    assert_accessible(page, axe_core_path)
    context.close()


@pytest.mark.parametrize("path", ["/no/such/page/", "/a/00000000-0000-0000-0000-000000000000/"])
def test_error_pages_are_accessible(browser, live_server, default_catalog, axe_core_path, path):
    page = browser.new_page()
    response = page.goto(live_server.url + path)
    assert response.status == 404
    assert_accessible(page, axe_core_path)
    page.close()
