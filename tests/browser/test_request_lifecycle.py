"""The product's whole story in real Chromium: advice, request, review, decision, e-mails.

A researcher walks the advisor to a result, turns it into an allocation request through the
sign-in page, submits; staff ask for changes in the admin; the researcher resubmits; staff
approve with fewer hours. E-mails go through the real Celery worker into files. axe-core checks
the researcher's request pages; screenshots land in test-artifacts/screenshots/.
"""

from __future__ import annotations

import email
import os
import re
import time
from datetime import date, timedelta
from email import policy
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from advisor.engine.words import STRATEGY_NAMES
from advisor.models import AdvisorSession
from allocations.facilities import facility_offers_trial, trial_gpu_hours_limit
from allocations.models import AllocationRequest, Notification, Status
from allocations.services import requested_gpu_hours_from_result
from catalog.models import Accelerator, System
from tests.browser.test_flow_browser import answer, assert_accessible, begin
from tests.support import walks
from tests.support.dates import iso_days_from_today
from tests.support.screenshots import save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.integration]

DEADLINE = iso_days_from_today(200)  # the flow's "by when do you need the results?" answer

# The worker starts once per session and inherits this environment: its e-mail goes to files.
# (tests/allocations/conftest.py does the same when those tests are collected; first one wins.)
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
os.environ.setdefault(
    "EMAIL_FILE_PATH",
    str(Path(__file__).resolve().parents[2] / "test-artifacts" / f"emails-{os.getpid()}"),
)

LORA_7B = walks.changed(walks.LORA_7B, dataset_tokens="4000", timeline=DEADLINE, azure=None)
PURPOSE = "To measure how <em>sentiment</em> in debates shifts after elections."
TITLE = 'LoRA <script>alert("pwned")</script> & friends'
CHANGES_MESSAGE = "Please trim the hours & say why 3 epochs <b>are</b> needed."
RESUBMIT_NOTE = "Trimmed to 2 epochs' worth <i>plus</i> contingency."
APPROVE_MESSAGE = "Approved for <Baskerville> & co."
INTERNAL_NOTE = "Staff only: PI confirmed by phone."
PASSWORD = "correct horse battery staple 7"
WAIT_MS = 20_000


def _user(username: str, *, staff: bool = False, **extra):
    user = get_user_model().objects.create_user(
        username=username, password=PASSWORD, is_staff=staff, is_superuser=staff, **extra
    )
    return user


def _sign_in(page, username: str) -> None:
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form [type=submit]").first.click()


def _wait_for_path(page, pattern: str) -> None:
    """Wait until the page's path and query match the regular expression `pattern`."""
    page.wait_for_url(
        lambda url: (
            re.fullmatch(
                pattern,
                urlsplit(url).path + ("?" + urlsplit(url).query if urlsplit(url).query else ""),
            )
            is not None
        ),
        timeout=WAIT_MS,
    )


def _delivered(email_dir: Path, before: set[Path]) -> list[email.message.EmailMessage]:
    return [
        email.message_from_bytes(path.read_bytes(), policy=policy.default)
        for path in sorted(set(email_dir.glob("*.log")) - before)
    ]


def _wait_until_sent(allocation_request, count: int, worker) -> None:
    """Poll the notification rows the worker updates: a condition with a deadline."""
    deadline = time.monotonic() + 30
    sent = 0
    while time.monotonic() < deadline:
        sent = Notification.objects.filter(
            event__allocation_request=allocation_request, status=Notification.State.SENT
        ).count()
        if sent >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{sent} of {count} e-mails sent:\n{worker.log()[-3000:]}")


def _parts(message) -> tuple[str, str]:
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    return text, html


def test_a_request_from_advice_to_approval(
    browser, live_server, default_catalog, celery_worker, axe_core_path, settings
):
    settings.STAFF_NOTIFICATION_EMAILS = []  # no fixed list: every active staff user hears
    email_dir = Path(os.environ["EMAIL_FILE_PATH"])
    before = set(email_dir.glob("*.log")) if email_dir.exists() else set()
    _user("ada", email="ada@example.ac.uk", first_name="Ada", last_name="Lovelace")
    _user("rcp", staff=True, email="rcp-staff@example.ac.uk")
    dialogs: list[str] = []

    researcher = browser.new_context(viewport={"width": 1280, "height": 900})
    page = researcher.new_page()
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    # (1) The advisor, to the result page; the parameter count is typed, no Hub needed.
    begin(page, live_server.url)
    for step, value in LORA_7B:
        answer(page, step, value)
    page.wait_for_selector("#result-heading")
    assert page.locator("#result-heading").inner_text() == (
        "Request time on an HPC system with A100, H100 or newer GPUs"
    )
    session = AdvisorSession.objects.get()
    rec = session.estimate_result["recommendation"]
    assert session.estimate_result["params_total"] == 7_000_000_000
    accelerator = Accelerator.objects.get(name=rec["accelerator"]).display_name
    system = System.objects.get(name=rec["system"]).display_name
    # The page names the strategy in words ("data parallel (DDP)"), never by its key.
    strategy = "" if rec["strategy"] == "single" else f", {STRATEGY_NAMES[rec['strategy']]}"
    nodes = f", {rec['nodes']} nodes" if rec["nodes"] > 1 else ""
    assert page.locator(".recommendation").inner_text() == (
        f"{accelerator} x {rec['num_gpus']} on {system}{strategy}{nodes}"
    )
    # GPU hours, the contingency on its own line, and their sum to request.
    assert page.locator("#gpu-hours").inner_text() == f"{_fmt(rec['gpu_hours'])} GPU hours"
    assert page.locator("#contingency").inner_text() == (
        f"+ {_fmt(rec['contingency_gpu_hours'])} GPU hours"
    )
    assert page.locator("#requested-hours").inner_text() == (
        f"{_fmt(rec['requested_gpu_hours'])} GPU hours"
    )
    # The memory picture: a bar per GPU against capacity, and the table under it.
    assert page.locator("svg.memory-chart").count() == 1
    assert (
        page.locator("#memory-heading + figure + table tbody tr")
        .last.inner_text()
        .startswith("Total")
    )
    save_screenshot(page, "lifecycle-1-result")

    # (2) Create the request: sign in first, then land on the pre-filled form.
    page.get_by_role("link", name="Create allocation request").click()
    _wait_for_path(page, r"/accounts/login/\?next=.+")
    assert page.locator("h1").inner_text() == "Sign in"
    assert_accessible(page, axe_core_path)
    # A mistyped password keeps the way back to the request form.
    page.locator("#id_username").fill("ada")
    page.locator("#id_password").fill("not the password")
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector("form .errorlist")
    assert "enter a correct username and password" in page.locator("form .errorlist").inner_text()
    assert page.locator("input[name=next]").input_value() == f"/requests/new/{session.pk}/"
    assert_accessible(page, axe_core_path)
    _sign_in(page, "ada")
    _wait_for_path(page, f"/requests/new/{session.pk}/")
    assert page.locator("h1").inner_text() == "Create allocation request"
    # The form asks for the whole project (runs, sweep, evaluation, development: issue 15), built
    # on top of one run's hours and contingency.
    per_run_hours = requested_gpu_hours_from_result(session.estimate_result)
    assert per_run_hours == _ceil(rec["requested_gpu_hours"])
    expected_hours = session.project_plan["total_gpu_hours"]
    assert expected_hours >= per_run_hours
    assert page.locator("#id_caller_name").input_value() == "Ada Lovelace"
    assert page.locator("#id_service").input_value() == "hpc"
    assert page.locator("#id_facility").input_value() == rec["system"]
    assert page.locator("#id_gpu_hours").input_value() == str(expected_hours)
    assert page.locator("#id_data_sensitivity").input_value() == "public"
    assert page.locator("#id_end_date").input_value() == DEADLINE  # the flow's deadline
    assert page.locator("#id_trial").is_checked() is (
        facility_offers_trial(rec["system"])
        and expected_hours <= trial_gpu_hours_limit(rec["system"])
    )
    justification = page.locator("#id_justification").input_value()
    # The engine's paragraph, then the project's lines and their total.
    assert justification.startswith(session.estimate_result["justification"])
    assert f"Total requested: {expected_hours:,} GPU hours." in justification
    # The frozen estimate sits beside the form.
    assert page.locator(".estimate .memory-picture").count() == 1
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "lifecycle-2-prefilled-form")

    # Submitting before completing the form says what is missing, next to each field.
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_selector("#error-summary")
    assert page.locator("#error-summary h2").inner_text() == (
        "The request was not submitted: fix these first"
    )
    page.locator("#error-summary").get_by_role("link", name="Start date:").click()
    page.wait_for_function("document.activeElement?.id === 'id_start_date'")
    assert page.locator("#id_project_title_error").inner_text() == (
        "Fill in the project title before submitting."
    )
    assert page.locator("#id_start_date_error").inner_text() == (
        "Fill in the start date before submitting."
    )
    assert page.locator("#id_project_title").get_attribute("aria-invalid") == "true"
    assert AllocationRequest.objects.count() == 0
    assert page.locator("#id_gpu_hours").input_value() == str(expected_hours)  # kept
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "lifecycle-2b-form-errors")

    page.locator("#id_project_title").fill(TITLE)
    page.locator("#id_project_code").fill("R-2026-042")
    page.locator("#id_research_area").fill("Natural language processing")
    page.locator("#id_pi_name").fill("Grace Hopper")
    page.locator("#id_pi_email").fill("grace@example.ac.uk")
    page.locator("#id_research_purpose").fill(PURPOSE)
    start = date.today() + timedelta(days=7)
    page.locator("#id_start_date").fill(start.isoformat())
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_selector("#request-status")
    assert page.locator("#request-status").inner_text() == "Draft"
    allocation_request = AllocationRequest.objects.get()
    assert allocation_request.project_title == TITLE
    assert allocation_request.gpu_hours == expected_hours
    page.get_by_role("link", name="Edit or submit").click()
    page.wait_for_selector("#id_project_title")
    assert page.locator("#id_project_title").input_value() == TITLE
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_selector("#request-status:text('Submitted')")
    assert page.locator("h1").inner_text() == TITLE
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "lifecycle-3-submitted")

    # (3) My requests: submitted, and the title as text, not markup.
    page.get_by_role("link", name="My requests").first.click()
    _wait_for_path(page, "/requests/")
    row = page.locator("tbody tr")
    assert row.count() == 1
    assert row.locator("td").nth(0).inner_text() == TITLE
    assert row.locator("td").nth(1).inner_text() == system  # as people name it, not its key
    assert row.locator("td").nth(3).inner_text() == "Submitted"
    assert "&lt;script&gt;" in page.content()
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "lifecycle-4-my-requests")

    # (4) Staff: the admin queue, filtered by status; the request with its frozen estimate.
    staff = browser.new_context(viewport={"width": 1400, "height": 900})
    admin = staff.new_page()
    admin.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    admin.goto(live_server.url + "/admin/")
    _sign_in(admin, "rcp")
    _wait_for_path(admin, "/admin/")  # the login page has the same header: wait for the index
    admin.goto(live_server.url + "/admin/allocations/allocationrequest/")
    admin.locator("#changelist-filter").get_by_role("link", name="Submitted", exact=True).click()
    _wait_for_path(admin, r"/admin/allocations/allocationrequest/\?status__exact=submitted")
    admin.locator("#result_list").get_by_role("link", name=TITLE).click()
    admin.wait_for_selector(".review-estimate")
    # The justification staff read opens with the research purpose, shown as text, not markup.
    justification = admin.locator(".field-justification_read .readonly").inner_text()
    assert justification.startswith(PURPOSE), justification
    assert not re.search(r"(?<![\d,.])0(\.0)? GPU hours", justification), justification
    estimate = admin.locator(".review-estimate")
    assert f"{_fmt1(rec['requested_gpu_hours'])} GPU hours" in estimate.inner_text()
    assert estimate.locator(".memory-picture").count() == 1
    assumptions = session.estimate_result["assumptions"]
    assert estimate.locator("tbody tr").count() == len(assumptions)
    assert (
        estimate.locator("tbody tr").first.locator("td").first.inner_text()
        == (assumptions[0]["name"])
    )
    # ... and the workload it was computed for, as the researcher described it.
    inputs = dict(
        zip(
            estimate.locator(".estimate-inputs dt").all_inner_texts(),
            estimate.locator(".estimate-inputs dd").all_inner_texts(),
            strict=True,
        )
    )
    assert inputs["Model"] == "7,000,000,000 parameters (as typed)"
    assert inputs["Work"] == "LoRA fine-tuning"
    assert (inputs["Tokens per epoch"], inputs["Epochs"]) == ("4,000,000,000", "3")
    save_screenshot(admin, "lifecycle-5-admin-review")
    # A staff re-run with one assumption changed goes into the request's history.
    before_rerun = timezone.now()
    admin.get_by_role("link", name="Re-run estimate").click()
    admin.wait_for_selector("#id_epochs")
    admin.locator("#id_epochs").fill("2")
    admin.locator("input[type=submit][value='Re-run']").click()
    admin.get_by_text("As submitted").wait_for(timeout=WAIT_MS)
    rerun = allocation_request.events.get(note__startswith="Estimate re-run with")
    assert before_rerun <= rerun.created_at <= timezone.now()
    assert rerun.from_status == rerun.to_status == Status.SUBMITTED
    save_screenshot(admin, "lifecycle-5b-admin-rerun")
    admin.goto(
        live_server.url + f"/admin/allocations/allocationrequest/{allocation_request.pk}/change/"
    )
    admin.wait_for_selector(".review-estimate")
    assert "Estimate re-run with" in admin.locator(".inline-group").inner_text()
    _decide(admin, "Request changes", message=CHANGES_MESSAGE, note=INTERNAL_NOTE)

    # (5) The researcher reads the message in the timeline, edits and resubmits.
    page.goto(live_server.url + f"/requests/{allocation_request.pk}/")
    assert page.locator("#request-status").inner_text() == "Changes requested"
    assert page.locator(".timeline blockquote").last.inner_text() == CHANGES_MESSAGE
    assert INTERNAL_NOTE not in page.content()
    page.get_by_role("link", name="Edit and resubmit").click()
    page.wait_for_selector("#id_gpu_hours")
    assert CHANGES_MESSAGE in page.locator("[role=note]").inner_text()
    trimmed = expected_hours * 2 // 3
    page.locator("#id_gpu_hours").fill(str(trimmed))
    page.locator("#id_resubmit_message").fill(RESUBMIT_NOTE)
    assert_accessible(page, axe_core_path)
    page.get_by_role("button", name="Resubmit", exact=True).click()
    page.wait_for_selector("#request-status:text('Resubmitted')")

    # (6) Staff approve, granting fewer hours than asked.
    granted = trimmed - 10
    admin.reload()
    assert admin.locator("#requested-against-estimate").inner_text() == (
        f"The request asks for {trimmed} GPU hours: {expected_hours - trimmed} fewer than this "
        f"estimate's {expected_hours}."
    )
    _decide(admin, "Approve", message=APPROVE_MESSAGE, granted=granted)

    # (7) The researcher sees the approval and the hours granted.
    page.goto(live_server.url + f"/requests/{allocation_request.pk}/")
    assert page.locator("#request-status").inner_text() == "Approved"
    assert f"{granted} GPU hours granted" in page.locator("main").inner_text()
    assert page.locator(".timeline blockquote").last.inner_text() == APPROVE_MESSAGE
    assert_accessible(page, axe_core_path)
    save_screenshot(page, "lifecycle-6-approved")
    assert dialogs == []  # no script from a title or message ever ran

    allocation_request.refresh_from_db()
    assert (allocation_request.status, allocation_request.gpu_hours) == (Status.APPROVED, trimmed)
    assert allocation_request.granted_gpu_hours == granted
    assert list(allocation_request.events.values_list("to_status", flat=True)) == [
        "draft",
        "submitted",
        "submitted",  # the staff re-run: recorded, the status unchanged
        "changes_requested",
        "resubmitted",
        "approved",
    ]
    # "Decided at" is the approval's time, not the earlier request for changes.
    approval = allocation_request.events.get(to_status=Status.APPROVED)
    assert abs(allocation_request.decided_at - approval.created_at) < timedelta(seconds=1)
    changes = allocation_request.events.get(to_status=Status.CHANGES_REQUESTED)
    assert allocation_request.decided_at > changes.created_at

    # The e-mails, through the real worker: staff twice, the researcher twice.
    _wait_until_sent(allocation_request, 4, celery_worker)
    messages = _delivered(email_dir, before)
    by_subject = {m["Subject"]: m for m in messages}
    assert sorted(by_subject) == sorted(
        [
            f"[Allocation request submitted] {TITLE}",
            f"[Allocation request resubmitted] {TITLE}",
            f"[Allocation request changes requested] {TITLE}",
            f"[Allocation request approved] {TITLE}",
        ]
    )
    submitted = by_subject[f"[Allocation request submitted] {TITLE}"]
    assert submitted["To"] == "rcp-staff@example.ac.uk"
    text, html = _parts(submitted)
    assert f"Project:      {TITLE} (R-2026-042)" in text
    assert f"GPU hours:    {expected_hours}" in text
    assert "LoRA &lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; friends" in html
    assert "<script>" not in html
    resubmitted = by_subject[f"[Allocation request resubmitted] {TITLE}"]
    text, html = _parts(resubmitted)
    assert RESUBMIT_NOTE in text
    assert "Trimmed to 2 epochs&#x27; worth &lt;i&gt;plus&lt;/i&gt; contingency." in html
    changes = by_subject[f"[Allocation request changes requested] {TITLE}"]
    assert changes["To"] == "ada@example.ac.uk"
    text, html = _parts(changes)
    assert CHANGES_MESSAGE in text
    assert "say why 3 epochs &lt;b&gt;are&lt;/b&gt; needed." in html
    assert INTERNAL_NOTE not in text + html
    approved = by_subject[f"[Allocation request approved] {TITLE}"]
    text, html = _parts(approved)
    assert f"GPU hours granted: {granted} (you asked for {trimmed})." in text
    assert "Approved for &lt;Baskerville&gt; &amp; co." in html
    assert "<script>" not in html
    assert "<Baskerville>" not in html
    staff.close()
    researcher.close()


def _decide(admin, label: str, *, message: str, granted: int | None = None, note: str = "") -> None:
    admin.locator(".review-decisions").get_by_role("link", name=label).click()
    admin.wait_for_selector("#id_message")
    if granted is not None:
        admin.locator("#id_granted_gpu_hours").fill(str(granted))
    admin.locator("#id_message").fill(message)
    admin.locator("#id_note").fill(note)
    admin.locator(f"input[type=submit][value='{label}']").click()
    admin.wait_for_selector(".messagelist .success, .errorlist, .errornote")
    assert admin.locator(".errorlist, .errornote").count() == 0, admin.locator(
        "#content-main"
    ).inner_text()
    assert admin.locator(".messagelist .success").inner_text().startswith(f"{label}: done")


def _fmt(value: float) -> str:
    """Django's floatformat:"-2g" for these magnitudes: thousands grouped, at most 2 places."""
    text = f"{value:,.2f}"
    return text[:-3] if text.endswith(".00") else text


def _fmt1(value: float) -> str:
    return f"{value:.1f}"


def _ceil(value: float) -> int:
    import math

    return max(1, math.ceil(value))
