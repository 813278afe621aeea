"""Staff review in the admin: a queue whose cost does not grow, decisions, exports."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from allocations.admin import csv_safe
from allocations.estimates import estimate_comparison
from allocations.models import AllocationRequest, Status
from tests.allocations.factories import estimate_result, make_request, make_session, make_user

pytestmark = pytest.mark.django_db

QUEUE = "/admin/allocations/allocationrequest/"


@pytest.fixture
def staff_client(client):
    client.force_login(make_user(staff=True, is_superuser=True))
    return client


def _make_many(count: int) -> None:
    researchers = [make_user() for _ in range(3)]
    for i in range(count):
        make_request(
            researcher=researchers[i % 3], status=Status.SUBMITTED, project_title=f"Project {i}"
        )


def _queue_queries(client, django_assert_num_queries, count: int) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(QUEUE)  # warm the session and content-type caches
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(QUEUE)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == count
    return len(ctx.captured_queries)


def test_queue_query_count_does_not_grow_with_rows(staff_client, django_assert_num_queries):
    _make_many(5)
    five = _queue_queries(staff_client, django_assert_num_queries, 5)
    _make_many(45)
    fifty = _queue_queries(staff_client, django_assert_num_queries, 50)
    assert five == fifty
    print("queue page queries:", five)
    with django_assert_num_queries(five):
        staff_client.get(QUEUE)


def test_queue_shows_the_columns_staff_need(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED, project_title="Protein folding")
    response = staff_client.get(QUEUE)
    for text in (
        "Protein folding",
        allocation_request.researcher.get_full_name(),
        "baskerville",
        "288",
        "Submitted",
    ):
        assertContains(response, text)
    assertContains(response, "Age")


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ("?status__exact=approved", "Approved one", "Pending one"),
        ("?trial__exact=1", "Approved one", "Pending one"),
        ("?q=pending", "Pending one", "Approved one"),
        ("?data_sensitivity__exact=internal", "Pending one", "Approved one"),
    ],
)
def test_queue_filters_and_search(staff_client, query, shown, hidden):
    make_request(status=Status.SUBMITTED, project_title="Pending one")
    make_request(
        status=Status.APPROVED, project_title="Approved one", trial=True, data_sensitivity="public"
    )
    response = staff_client.get(QUEUE + query)
    assertContains(response, shown)
    assertNotContains(response, hidden)


def test_request_page_shows_estimate_memory_picture_and_decisions(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = staff_client.get(
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
    )
    assertContains(response, "compute + ")
    assertContains(response, "<strong>288.0 GPU hours</strong>", html=True)
    assertContains(response, "0.42 of dense BF16 peak")  # an assumption
    assertContains(response, '<svg role="img"')
    assertContains(response, "26.8 GB per GPU of 40.0 GB capacity")
    for key in ("approve", "request-changes", "reject"):
        assertContains(
            response,
            reverse(
                "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, key]
            ),
        )
    assertContains(response, "Re-run estimate")


def test_request_page_shows_the_workload_the_estimate_was_for(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = staff_client.get(
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
    )
    for label, value in (
        ("Model", "meta-llama/Llama-2-7b-hf"),
        ("Work", "LoRA fine-tuning"),
        ("Precision", "bf16"),
        ("Global batch (sequences)", "4"),
        ("Sequence length", "2,048"),
        ("Tokens per epoch", "200,000,000"),
        ("Epochs", "3"),
        ("LoRA rank", "16"),
        ("Data sensitivity", "Internal"),
    ):
        assertContains(response, f"<dt>{label}</dt><dd>{value}</dd>", html=True)


def test_typed_parameter_count_reads_as_a_grouped_number(staff_client):
    session = make_session()
    session.estimate_request = {
        "params": 7_000_000_000,
        "task": "inference",
        "tokens": 5000,
        "epochs": 1,
    }
    session.save()
    allocation_request = make_request(status=Status.SUBMITTED, session=session)
    response = staff_client.get(
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
    )
    assertContains(
        response, "<dt>Model</dt><dd>7,000,000,000 parameters (as typed)</dd>", html=True
    )
    assertContains(response, "<dt>Tokens in total</dt><dd>5,000</dd>", html=True)
    assertNotContains(response, "<dt>Epochs</dt>", html=True)


@pytest.mark.parametrize(
    ("gpu_hours", "line"),
    [
        (200, "The request asks for 200 GPU hours: 88 fewer than this estimate's 288."),
        (300, "The request asks for 300 GPU hours: 12 more than this estimate's 288."),
        (288, None),
    ],
)
def test_request_page_flags_hours_that_differ_from_the_estimate(staff_client, gpu_hours, line):
    allocation_request = make_request(status=Status.RESUBMITTED, gpu_hours=gpu_hours)
    for url in (
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk]),
        reverse(
            "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
        ),
    ):
        response = staff_client.get(url)
        if line is None:
            assertNotContains(response, 'id="requested-against-estimate"')
        else:
            assertContains(response, f"<strong>{line}</strong>", html=True)


def test_no_decision_buttons_on_a_draft(staff_client):
    allocation_request = make_request(status=Status.DRAFT)
    response = staff_client.get(
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
    )
    assertNotContains(response, "/decide/approve/")


def _decide(client, allocation_request, decision, data):
    url = reverse(
        "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, decision]
    )
    return client.post(url, data)


def test_approve_with_different_granted_hours(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    response = _decide(
        staff_client,
        allocation_request,
        "approve",
        {"granted_gpu_hours": "200", "message": "Start with 200.", "note": "n"},
    )
    assert response.status_code == 302
    allocation_request.refresh_from_db()
    assert (allocation_request.status, allocation_request.granted_gpu_hours) == ("approved", 200)
    event = allocation_request.events.get()
    assert (event.message, event.note) == ("Start with 200.", "n")


def test_approve_form_is_prefilled_with_requested_hours(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    response = staff_client.get(
        reverse(
            "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
        )
    )
    assert response.context["form"].initial == {"granted_gpu_hours": 288}


@pytest.mark.parametrize(
    ("decision", "error"),
    [("request-changes", "This field is required."), ("reject", "This field is required.")],
)
def test_changes_and_rejection_need_a_message(staff_client, decision, error):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = _decide(staff_client, allocation_request, decision, {"message": ""})
    assert response.status_code == 200
    assert response.context["form"].errors["message"] == [error]
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED


def test_approving_a_draft_through_a_crafted_post_is_refused(staff_client):
    allocation_request = make_request(status=Status.DRAFT)
    response = _decide(staff_client, allocation_request, "approve", {"granted_gpu_hours": "10"})
    assert response.status_code == 200
    assertContains(response, "Cannot approve a request that is draft.")
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.DRAFT


def test_second_approval_is_refused(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    _decide(staff_client, allocation_request, "approve", {"granted_gpu_hours": "10"})
    response = _decide(staff_client, allocation_request, "approve", {"granted_gpu_hours": "99"})
    assertContains(response, "Cannot approve a request that is approved.")
    allocation_request.refresh_from_db()
    assert allocation_request.granted_gpu_hours == 10
    assert allocation_request.events.count() == 1


def test_unknown_decision_is_404(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    assert _decide(staff_client, allocation_request, "delete", {}).status_code == 404


def test_non_staff_cannot_post_decisions(client):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    response = _decide(client, allocation_request, "approve", {"granted_gpu_hours": "10"})
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('=HYPERLINK("http://evil")', '\'=HYPERLINK("http://evil")'),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("Plain title", "Plain title"),
        (288, "288"),
        (None, ""),
    ],
)
def test_csv_safe(value, expected):
    assert csv_safe(value) == expected


def _export(client, action, requests):
    return client.post(
        QUEUE,
        {
            "action": action,
            "_selected_action": [str(r.pk) for r in requests],
            "index": 0,
        },
    )


def test_csv_export_neutralises_formulas(staff_client):
    evil = make_request(
        status=Status.SUBMITTED, project_title="=cmd|' /C calc'!A0", justification="@SUM(1+1)"
    )
    response = _export(staff_client, "export_csv", [evil])
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 1
    assert rows[0]["project_title"] == "'=cmd|' /C calc'!A0"
    assert rows[0]["justification"] == "'@SUM(1+1)"
    assert rows[0]["id"] == str(evil.pk)
    assert rows[0]["gpu_hours"] == "288"


def test_json_export_includes_the_frozen_estimate(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = _export(staff_client, "export_json", [allocation_request])
    (row,) = json.loads(response.content)
    assert row["id"] == str(allocation_request.pk)
    assert row["gpu_hours"] == 288
    assert row["estimate"]["result"]["recommendation"]["system"] == "baskerville"


def test_rerun_form_requires_exactly_one_change(staff_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    url = reverse("admin:allocations_allocationrequest_rerun", args=[allocation_request.pk])
    response = staff_client.post(url, {"epochs": "6", "precision": "fp16"})
    assertContains(response, "Change exactly one assumption to compare like with like.")
    assert staff_client.get(url).status_code == 200


def test_estimate_comparison_marks_what_changed():
    old = estimate_result(requested_gpu_hours=288.0)
    new = estimate_result(requested_gpu_hours=576.0)
    rows = {row["label"]: row for row in estimate_comparison(old=old, new=new)}
    assert (rows["Requested GPU hours"]["old"], rows["Requested GPU hours"]["new"]) == (
        288.0,
        576.0,
    )
    assert rows["Requested GPU hours"]["changed"] is True
    assert rows["System"]["changed"] is False
    assert rows["Memory per GPU (GB)"]["old"] == 26.8


def test_admin_cannot_add_or_delete_requests(staff_client):
    assert staff_client.get(QUEUE + "add/").status_code == 403
    allocation_request = make_request()
    url = reverse("admin:allocations_allocationrequest_delete", args=[allocation_request.pk])
    assert staff_client.get(url).status_code == 403
    assert AllocationRequest.objects.filter(pk=allocation_request.pk).exists()


def test_session_factory_builds_a_valid_engine_result():
    from advisor.engine.models import EstimateResult

    session = make_session()
    assert EstimateResult.model_validate(session.estimate_result).recommendation.num_gpus == 1


def test_researcher_text_is_escaped_in_the_admin(staff_client):
    allocation_request = make_request(
        status=Status.SUBMITTED,
        project_title="<script>alert(1)</script>",
        justification="<img src=x onerror=alert(2)>",
    )
    for url in (
        QUEUE,
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk]),
    ):
        response = staff_client.get(url)
        assertNotContains(response, "<script>alert(1)</script>")
        assertNotContains(response, "<img src=x")
        assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")


@pytest.mark.parametrize(
    ("decision", "data", "logged"),
    [
        ("approve", {"granted_gpu_hours": "200"}, "Approve: now approved, 200 GPU hours granted."),
        (
            "request-changes",
            {"message": "Add the code."},
            "Request changes: now changes requested.",
        ),
        ("reject", {"message": "Out of scope."}, "Reject: now rejected."),
    ],
)
def test_a_decision_is_in_the_admins_own_history_too(staff_client, decision, data, logged):
    from django.contrib.admin.models import CHANGE, LogEntry

    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    assert _decide(staff_client, allocation_request, decision, data).status_code == 302
    entry = LogEntry.objects.get(object_id=str(allocation_request.pk))
    assert (entry.action_flag, entry.get_change_message()) == (CHANGE, logged)
    history = staff_client.get(
        reverse("admin:allocations_allocationrequest_history", args=[allocation_request.pk])
    )
    assertContains(history, logged)


def test_a_refused_decision_is_not_logged(staff_client):
    from django.contrib.admin.models import LogEntry

    allocation_request = make_request(status=Status.DRAFT)
    _decide(staff_client, allocation_request, "approve", {"granted_gpu_hours": "10"})
    assert not LogEntry.objects.exists()
