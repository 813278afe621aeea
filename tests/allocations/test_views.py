"""Researcher pages: pre-filled form, drafts and submission, and URL/form tampering."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains, assertRedirects

from allocations.models import AllocationRequest, Status
from tests.allocations.factories import (
    as_post,
    complete_fields,
    make_request,
    make_session,
    make_user,
)
from tests.support.dates import iso_days_from_today

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher():
    return make_user()


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


def test_create_form_is_prefilled_from_the_advisor_session(researcher_client, researcher):
    session = make_session(user=researcher)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.status_code == 200
    form = response.context["form"]
    answers = session.answers
    assert form.initial["facility"] == "baskerville"
    assert form.initial["service"] == "hpc"
    assert form.initial["gpu_hours"] == 288
    assert form.initial["cpu_hours"] == 0
    assert form.initial["start_date"].isoformat() == answers["timeline_start"]
    assert form.initial["end_date"].isoformat() == answers["timeline_end"]
    assert form.initial["data_sensitivity"] == "internal"
    assert form.initial["project_title"] == "Fine-tuning Llama for clinical notes"
    assert form.initial["justification"].startswith("LoRA fine-tuning of meta-llama/Llama-2-7b-hf")
    assert form.initial["trial"] is True  # 288 <= 400
    assertContains(response, 'id="trial-suggestion"')
    assertContains(response, '<option value="baskerville" selected>baskerville</option>', html=True)
    assertContains(response, "Weights: 13.48 GB")


def test_prefill_takes_the_end_date_from_the_flows_deadline_answer(researcher_client, researcher):
    # The default flowchart asks one date, "By when do you need the results?" (step timeline).
    deadline = iso_days_from_today(200)
    session = make_session(
        user=researcher, answers={"timeline": deadline, "data_sensitivity": "public"}
    )
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    form = response.context["form"]
    assert form.initial["end_date"].isoformat() == deadline
    assert form.initial["start_date"] is None
    assertContains(
        response,
        f'<input type="date" name="end_date" value="{deadline}" id="id_end_date">',
        html=True,
    )


def test_prefill_ignores_a_deadline_that_is_not_a_date(researcher_client, researcher):
    session = make_session(user=researcher, answers={"timeline": "soon"})
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.status_code == 200
    assert response.context["form"].initial["end_date"] is None


def test_large_estimate_does_not_suggest_trial(researcher_client, researcher):
    session = make_session(user=researcher, requested_gpu_hours=4000.0)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.context["form"].initial["trial"] is False
    assertNotContains(response, 'id="trial-suggestion"')


def test_prefill_survives_missing_and_malformed_answers(researcher_client, researcher):
    session = make_session(user=researcher, answers={"timeline_start": "next spring"})
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.status_code == 200
    assert response.context["form"].initial["start_date"] is None
    assert response.context["form"].initial["data_sensitivity"] == "internal"  # from the request


def test_save_draft_then_submit(researcher_client, researcher, settings):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp@example.ac.uk"]
    session = make_session(user=researcher)
    url = reverse("allocations:request-create", args=[session.pk])
    response = researcher_client.post(url, as_post(complete_fields(project_code=""), action="save"))
    allocation_request = AllocationRequest.objects.get()
    assertRedirects(response, reverse("allocations:request-detail", args=[allocation_request.pk]))
    assert allocation_request.status == Status.DRAFT
    edit_url = reverse("allocations:request-edit", args=[allocation_request.pk])
    response = researcher_client.post(
        edit_url, as_post(complete_fields(project_code=""), action="submit")
    )
    assert response.status_code == 200
    assertContains(response, "Fill in the project code before submitting.")
    response = researcher_client.post(edit_url, as_post(complete_fields(), action="submit"))
    assertRedirects(response, reverse("allocations:request-detail", args=[allocation_request.pk]))
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED
    assert allocation_request.project_code == "ABC-DEF-001"


def test_a_refused_submission_lists_every_problem_at_the_top(researcher_client, researcher):
    session = make_session(user=researcher)
    url = reverse("allocations:request-create", args=[session.pk])
    response = researcher_client.post(
        url, as_post(complete_fields(project_code="", pi_email="grace"), action="submit")
    )
    assert response.status_code == 200
    assert AllocationRequest.objects.count() == 0
    assertContains(
        response,
        '<h2 id="error-summary-heading">The request was not submitted: fix these first</h2>',
        html=True,
    )
    assertContains(
        response,
        '<li><a href="#id_project_code">Project code: '
        "Fill in the project code before submitting.</a></li>",
        html=True,
    )
    assertContains(
        response,
        '<li><a href="#id_pi_email">PI/supervisor email: Enter a valid email address.</a></li>',
        html=True,
    )


def test_a_valid_form_shows_no_error_summary(researcher_client, researcher):
    session = make_session(user=researcher)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assertNotContains(response, 'id="error-summary"')


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"pi_email": "not-an-email"}, "pi_email", "Enter a valid email address."),
        ({"gpu_hours": -5}, "gpu_hours", "GPU hours cannot be negative."),
        (
            {"gpu_hours": 0},
            "gpu_hours",
            "Request more than 0 GPU hours: every facility here is a GPU service.",
        ),
        (
            {"trial": True, "gpu_hours": 900},
            "trial",
            "Trial access is limited to 400 GPU hours; untick trial to request 900 GPU hours as a "
            "full allocation.",
        ),
        (
            {"end_date": iso_days_from_today(30), "start_date": iso_days_from_today(60)},
            "end_date",
            "The end date must be after the start date.",
        ),
        ({"project_title": ""}, "project_title", "Fill in the project title before submitting."),
        (
            {"facility": "not-a-system"},
            "facility",
            "Select a valid choice. not-a-system is not one of the available choices.",
        ),
    ],
)
def test_bad_input_gets_a_clear_message_and_saves_nothing(
    researcher_client, researcher, overrides, field, message
):
    session = make_session(user=researcher)
    response = researcher_client.post(
        reverse("allocations:request-create", args=[session.pk]),
        as_post(complete_fields(**overrides), action="submit"),
    )
    assert response.status_code == 200
    assert response.context["form"].errors[field] == [message]
    assert not AllocationRequest.objects.exists()


def test_researcher_text_is_escaped(researcher_client, researcher):
    allocation_request = make_request(
        researcher=researcher,
        project_title="<script>alert(1)</script>",
        justification="<img src=x onerror=alert(2)>",
    )
    response = researcher_client.get(
        reverse("allocations:request-detail", args=[allocation_request.pk])
    )
    assertNotContains(response, "<script>alert(1)</script>")
    assertNotContains(response, "<img src=x")
    assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")


def test_my_requests_lists_only_mine(researcher_client, researcher):
    mine = make_request(researcher=researcher, project_title="Mine")
    make_request(project_title="Somebody else's")
    response = researcher_client.get(reverse("allocations:request-list"))
    assert list(response.context["allocation_requests"]) == [mine]
    assertNotContains(response, "Somebody else")


def test_my_requests_and_detail_name_the_facility_as_the_catalog_does(
    researcher_client, researcher, django_assert_num_queries
):
    from catalog.models import Profile, System

    profile = Profile.objects.create(name="test", title="Test institute", is_active=True)
    system = System.objects.create(
        profile=profile,
        name="baskerville",
        display_name="Baskerville (Birmingham)",
        kind="hpc_batch",
        status="active",
        source="test",
    )
    linked = make_request(researcher=researcher, project_title="Linked", system=system)
    make_request(researcher=researcher, project_title="Catalog lost it", facility="gone-hpc")
    with django_assert_num_queries(3):  # session, user, requests with their systems
        response = researcher_client.get(reverse("allocations:request-list"))
    assertContains(response, "<td>Baskerville (Birmingham)</td>", html=True)
    assertContains(response, "<td>gone-hpc</td>", html=True)
    response = researcher_client.get(reverse("allocations:request-detail", args=[linked.pk]))
    assertContains(response, "HPC — Baskerville (Birmingham) (New allocation)")


def test_detail_tells_the_researcher_their_hours_differ_from_the_estimate(
    researcher_client, researcher
):
    allocation_request = make_request(researcher=researcher, gpu_hours=250)
    response = researcher_client.get(
        reverse("allocations:request-detail", args=[allocation_request.pk])
    )
    assertContains(
        response,
        "<strong>The request asks for 250 GPU hours: 38 fewer than this estimate's 288.</strong>",
        html=True,
    )


def test_detail_shows_timeline_with_staff_message_but_not_internal_note(
    researcher_client, researcher
):
    from allocations.services import allocation_request_request_changes

    allocation_request = make_request(researcher=researcher, status=Status.SUBMITTED)
    allocation_request_request_changes(
        allocation_request=allocation_request,
        reviewer=make_user(staff=True),
        message="Please add the PI's email.",
        note="Second time this month.",
    )
    response = researcher_client.get(
        reverse("allocations:request-detail", args=[allocation_request.pk])
    )
    assertContains(response, "Please add the PI&#x27;s email.")
    assertNotContains(response, "Second time this month.")
    assertContains(response, "Edit and resubmit")


@pytest.mark.parametrize("name", ["request-detail", "request-edit"])
def test_someone_elses_request_is_404(researcher_client, name):
    other = make_request()
    response = researcher_client.get(reverse(f"allocations:{name}", args=[other.pk]))
    assert response.status_code == 404


def test_withdrawing_someone_elses_request_is_404_and_changes_nothing(researcher_client):
    other = make_request(status=Status.SUBMITTED)
    response = researcher_client.post(reverse("allocations:request-withdraw", args=[other.pk]))
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.status == Status.SUBMITTED


def test_editing_someone_elses_request_by_post_is_404(researcher_client):
    other = make_request()
    response = researcher_client.post(
        reverse("allocations:request-edit", args=[other.pk]),
        as_post(complete_fields(project_title="Hijacked"), action="save"),
    )
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.project_title == "Fine-tuning Llama for clinical notes"


def test_someone_elses_advisor_session_is_404(researcher_client):
    session = make_session(user=make_user())
    url = reverse("allocations:request-create", args=[session.pk])
    assert researcher_client.get(url).status_code == 404
    assert researcher_client.post(url, as_post(complete_fields(), action="save")).status_code == 404
    assert not AllocationRequest.objects.exists()


def test_unknown_ids_are_404(researcher_client):
    missing = uuid.uuid4()
    assert researcher_client.get(f"/requests/{missing}/").status_code == 404
    assert researcher_client.get("/requests/1/").status_code == 404  # no sequential ids


def test_posted_status_and_owner_fields_are_ignored(researcher_client, researcher):
    session = make_session(user=researcher)
    someone = make_user()
    researcher_client.post(
        reverse("allocations:request-create", args=[session.pk]),
        as_post(
            complete_fields(),
            action="save",
            status="approved",
            researcher=someone.pk,
            granted_gpu_hours=99999,
        ),
    )
    allocation_request = AllocationRequest.objects.get()
    assert allocation_request.status == Status.DRAFT
    assert allocation_request.researcher == researcher
    assert allocation_request.granted_gpu_hours is None


def test_withdraw_while_pending(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, status=Status.SUBMITTED)
    researcher_client.post(reverse("allocations:request-withdraw", args=[allocation_request.pk]))
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.WITHDRAWN


def test_withdraw_needs_post(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, status=Status.SUBMITTED)
    url = reverse("allocations:request-withdraw", args=[allocation_request.pk])
    assert researcher_client.get(url).status_code == 405


def test_editing_an_approved_request_is_refused(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, status=Status.APPROVED)
    response = researcher_client.post(
        reverse("allocations:request-edit", args=[allocation_request.pk]),
        as_post(complete_fields(gpu_hours=5000), action="save"),
    )
    assertRedirects(response, reverse("allocations:request-detail", args=[allocation_request.pk]))
    allocation_request.refresh_from_db()
    assert allocation_request.gpu_hours == 288


@pytest.mark.parametrize(
    "url",
    ["/requests/", f"/requests/{uuid.uuid4()}/", f"/requests/new/{uuid.uuid4()}/"],
)
def test_anonymous_is_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_login_and_logout_pages(client, researcher):
    response = client.get(reverse("login"))
    assertContains(response, "Sign in")
    response = client.post(
        reverse("login"), {"username": researcher.username, "password": "pw-for-tests-only"}
    )
    assert response.status_code == 302
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get("/requests/").status_code == 302


def test_non_staff_cannot_reach_the_admin(researcher_client):
    response = researcher_client.get("/admin/allocations/allocationrequest/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.fixture
def remote_user_settings(settings):
    auth = "django.contrib.auth.middleware.AuthenticationMiddleware"
    middleware = list(settings.MIDDLEWARE)
    proxy = "allocations.middleware.ProxyRemoteUserMiddleware"
    middleware.insert(middleware.index(auth) + 1, proxy)
    settings.MIDDLEWARE = middleware
    settings.AUTHENTICATION_BACKENDS = [
        "allocations.backends.ProxyRemoteUserBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    settings.AUTH_REMOTE_USER_HEADER = "HTTP_X_REMOTE_USER"
    return settings


def test_proxy_authenticated_user_is_signed_in(client, remote_user_settings):
    response = client.get("/requests/", headers={"X-Remote-User": "jdoe"})
    assert response.status_code == 200
    assert response.wsgi_request.user.get_username() == "jdoe"


def test_without_the_proxy_header_login_is_still_required(client, remote_user_settings):
    response = client.get("/requests/")
    assert response.status_code == 302


@pytest.mark.parametrize(
    ("uncertainty", "suggested"),
    [
        ({"gpu_hours_relative": 0.25, "memory_high_bytes": 29e9}, False),
        ({"gpu_hours_relative": 0.6}, True),
        ({"gpu_hours_relative": 0.25, "memory_high_bytes": 41e9}, True),  # may not fit 40 GB
    ],
)
def test_trial_suggested_for_uncertain_large_estimates(
    researcher_client, researcher, uncertainty, suggested
):
    session = make_session(user=researcher, requested_gpu_hours=4000.0)
    session.estimate_result = {**session.estimate_result, "uncertainty": uncertainty}
    session.save()
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assert response.context["trial_suggested"] is suggested
    assert response.context["form"].initial["trial"] is False  # too big for trial itself


def test_prefilled_dates_render_as_iso_for_date_inputs(researcher_client, researcher):
    session = make_session(user=researcher)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    start = session.answers["timeline_start"]
    assertContains(
        response,
        f'<input type="date" name="start_date" value="{start}" id="id_start_date">',
        html=True,
    )


def test_session_without_an_estimate_is_404(researcher_client, researcher):
    session = make_session(user=researcher)
    session.estimate_result = None
    session.save()
    url = reverse("allocations:request-create", args=[session.pk])
    assert researcher_client.get(url).status_code == 404


def test_second_create_from_one_result_goes_to_the_existing_request(researcher_client, researcher):
    session = make_session(user=researcher)
    existing = make_request(researcher=researcher, session=session, status=Status.SUBMITTED)
    response = researcher_client.get(reverse("allocations:request-create", args=[session.pk]))
    assertRedirects(response, reverse("allocations:request-detail", args=[existing.pk]))
