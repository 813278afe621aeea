"""In real Chromium: the card polls while a real worker asks the (slow) fake Hub, then stops."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture
def page(browser):
    page = browser.new_page()
    yield page
    page.close()


def test_card_polls_until_the_worker_is_done_then_stops(page, fake_hub, celery_worker, live_server):
    from playwright.sync_api import expect

    fake_hub.delay("acme/slow-model", 1.5)  # model info + config.json: about 3 s in flight
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if r.headers.get("hx-request") else None)

    page.goto(f"{live_server.url}/lookups/")
    page.fill("#id_repo_id", "acme/slow-model")
    page.click("button[type=submit]")

    card = page.locator("#hf-lookup")
    expect(card).to_have_attribute("data-status", re.compile("pending|running"))
    expect(card).to_have_attribute("data-status", "done", timeout=30_000)
    expect(card).to_contain_text("494 M")
    expect(card).to_contain_text("apache-2.0")
    polled = len(polls)
    assert polled >= 1  # htmx, not a reload, brought the answer
    page.wait_for_timeout(4500)  # two polling periods
    assert len(polls) == polled  # the done card carries no trigger: polling stopped


def test_typing_fills_suggestions_from_the_hub(page, fake_hub, celery_worker, live_server):
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/lookups/")
    page.locator("#id_repo_id").press_sequentially("mistral", delay=30)

    options = page.locator("#model-suggestion-options option")
    expect(options).to_have_count(1, timeout=10_000)
    assert options.first.get_attribute("value") == "mistralai/Mistral-7B-v0.1"
    assert fake_hub.requests_for("/api/models") <= 2  # debounced: not one request per key
