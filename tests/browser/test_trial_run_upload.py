"""Issue 12 in real Chromium: a researcher downloads the helper, uploads a trial-run file through
the plain form (no JavaScript needed) and reads measured against estimated; the page passes
axe-core. Screenshots land in test-artifacts/screenshots/ (names start with "12-")."""

from __future__ import annotations

import json

import pytest

from allocations.models import Status, TrialMeasurement
from tests.allocations.factories import make_request, make_user
from tests.allocations.test_trial_runs import gpu_run
from tests.browser.test_flow_browser import assert_accessible
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser]

PASSWORD = "pw-for-tests-only"  # tests.allocations.factories.make_user


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_researcher_uploads_a_trial_run(
    browser, live_server, transactional_db, axe_core_path, tmp_path, javascript
):
    researcher = make_user(username=f"ada-{'js' if javascript else 'nojs'}")
    allocation_request = make_request(researcher=researcher, status=Status.SUBMITTED)
    cpu = {
        "schema": "allocation-triage/trial-run",
        "schema_version": 1,
        "helper_version": "1.0.0",
        "started_at": "2026-11-01T10:00:00+00:00",
        "finished_at": "2026-11-01T10:05:00+00:00",
        "device": {"kind": "cpu", "gpu_present": False, "name": "x86_64", "count": 0},
        "software": {"python": "3.11.7", "framework": "pytorch", "packages": {"torch": "2.13.0"}},
        "workload": {"task": "lora", "precision": "bf16", "micro_batch_size": 4, "seq_len": 2048},
        "recipe": {},
        "measurement": {
            "steps_total": 20,
            "warmup_steps": 5,
            "steady_steps": 15,
            "tokens_processed": 163840,
            "steady_tokens": 122880,
            "steady_seconds": 132.7,
            "tokens_per_second": 926.0,
        },
        "memory": {},
        "environment": {},
        "notes": [],
    }
    path = tmp_path / "trial-run.json"
    path.write_bytes(gpu_run(json.dumps(cpu).encode(), tokens_per_second=925.93))

    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{live_server.url}/requests/{allocation_request.pk}/")
    page.locator("#id_username").fill(researcher.username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form [type=submit]").first.click()
    page.wait_for_selector("#measurements")
    assert "No measurements yet." in page.locator("#measurements").inner_text()
    helper = page.get_by_role("link", name="trial_run.py")
    assert helper.get_attribute("href") == "/trial-run/trial_run.py"

    page.locator("input[type=file][name=file]").set_input_files(str(path))
    page.get_by_role("button", name="Upload").click()
    page.wait_for_selector(".measurement-sentence")
    sentence = page.locator(".measurement-sentence").inner_text()
    assert sentence.startswith(
        "At the measured 926 tokens/s the full run takes 180 GPU hours, 25 % less than estimated."
    )
    assert TrialMeasurement.objects.filter(allocation_request=allocation_request).count() == 1
    if javascript:  # axe-core runs as a script
        assert_accessible(page, axe_core_path)
    name = "js" if javascript else "no-js"
    save_screenshot(page, f"12-trial-run-{name}")
    context.close()
