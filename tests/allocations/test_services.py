"""The workflow: every transition allowed and refused, recorded, and notified after commit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone

from allocations.models import AllocationEvent, Notification, ServiceLimit, Status
from allocations.services import (
    TRANSITIONS,
    TransitionError,
    allocation_request_approve,
    allocation_request_create_from_session,
    allocation_request_reject,
    allocation_request_request_changes,
    allocation_request_submit,
    allocation_request_transition,
    allocation_request_update,
    allocation_request_validate,
    allocation_request_withdraw,
)
from tests.allocations.factories import complete_fields, make_request, make_session, make_user
from tests.support.dates import days_from_today, spoken

pytestmark = pytest.mark.django_db

ALLOWED = {
    ("submit", Status.DRAFT): Status.SUBMITTED,
    ("resubmit", Status.CHANGES_REQUESTED): Status.RESUBMITTED,
    ("withdraw", Status.DRAFT): Status.WITHDRAWN,
    ("withdraw", Status.SUBMITTED): Status.WITHDRAWN,
    ("withdraw", Status.RESUBMITTED): Status.WITHDRAWN,
    ("withdraw", Status.CHANGES_REQUESTED): Status.WITHDRAWN,
    ("approve", Status.SUBMITTED): Status.APPROVED,
    ("approve", Status.RESUBMITTED): Status.APPROVED,
    ("request_changes", Status.SUBMITTED): Status.CHANGES_REQUESTED,
    ("request_changes", Status.RESUBMITTED): Status.CHANGES_REQUESTED,
    ("reject", Status.SUBMITTED): Status.REJECTED,
    ("reject", Status.RESUBMITTED): Status.REJECTED,
}
ALL_CASES = [(action, status) for action in TRANSITIONS for status in Status.values]


@pytest.fixture
def staff():
    return make_user(staff=True, email="staff@example.ac.uk")


@pytest.mark.parametrize(("action", "status"), ALL_CASES)
def test_transition_table(action, status, staff):
    allocation_request = make_request(status=status)
    actor = staff if TRANSITIONS[action].by_staff else allocation_request.researcher
    kwargs = {"message": "Please say more about the data."}
    if (action, status) in ALLOWED:
        result = allocation_request_transition(
            allocation_request=allocation_request, action=action, actor=actor, **kwargs
        )
        assert result.status == ALLOWED[(action, status)]
        event = AllocationEvent.objects.get(allocation_request=allocation_request)
        assert (event.from_status, event.to_status, event.actor) == (
            status,
            ALLOWED[(action, status)],
            actor,
        )
    else:
        with pytest.raises(TransitionError, match="Cannot"):
            allocation_request_transition(
                allocation_request=allocation_request, action=action, actor=actor, **kwargs
            )
        allocation_request.refresh_from_db()
        assert allocation_request.status == status
        assert not AllocationEvent.objects.filter(allocation_request=allocation_request).exists()


def test_approving_a_draft_is_refused_with_a_clear_message(staff):
    allocation_request = make_request(status=Status.DRAFT)
    with pytest.raises(TransitionError) as excinfo:
        allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    assert excinfo.value.messages == ["Cannot approve a request that is draft."]


def test_researcher_cannot_review(staff):
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(TransitionError, match="Only research-computing staff"):
        allocation_request_approve(
            allocation_request=allocation_request, reviewer=allocation_request.researcher
        )


def test_other_researcher_cannot_withdraw():
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(TransitionError, match="Only the researcher who made this request"):
        allocation_request_withdraw(allocation_request=allocation_request, researcher=make_user())


def test_approve_records_granted_hours_message_and_note(staff):
    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    approved = allocation_request_approve(
        allocation_request=allocation_request,
        reviewer=staff,
        granted_gpu_hours=200,
        message="Granted 200 now; ask again after the first run.",
        note="Queue is busy.",
    )
    assert approved.status == Status.APPROVED
    assert approved.granted_gpu_hours == 200
    assert approved.decided_at is not None
    event = approved.events.get()
    assert (event.granted_gpu_hours, event.message, event.note) == (
        200,
        "Granted 200 now; ask again after the first run.",
        "Queue is busy.",
    )


def test_approve_without_granted_hours_grants_what_was_asked(staff):
    allocation_request = make_request(status=Status.SUBMITTED, gpu_hours=288)
    approved = allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    assert approved.granted_gpu_hours == 288


@pytest.mark.parametrize("hours", [0, -3])
def test_approve_refuses_non_positive_grant(staff, hours):
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(ValidationError) as excinfo:
        allocation_request_approve(
            allocation_request=allocation_request, reviewer=staff, granted_gpu_hours=hours
        )
    assert excinfo.value.message_dict == {"granted_gpu_hours": ["Grant more than 0 GPU hours."]}
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED


def test_request_changes_needs_a_message(staff):
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(ValidationError) as excinfo:
        allocation_request_request_changes(
            allocation_request=allocation_request, reviewer=staff, message="   "
        )
    assert excinfo.value.message_dict == {"message": ["Say what the researcher should change."]}


def test_reject_needs_a_reason(staff):
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(ValidationError) as excinfo:
        allocation_request_reject(allocation_request=allocation_request, reviewer=staff, message="")
    assert excinfo.value.message_dict == {
        "message": ["Give the researcher the reason for the rejection."]
    }


def test_full_round_trip_records_every_event(staff):
    researcher = make_user()
    session = make_session(user=researcher)
    allocation_request = allocation_request_create_from_session(
        session=session, researcher=researcher, fields=complete_fields()
    )
    allocation_request_submit(allocation_request=allocation_request, researcher=researcher)
    allocation_request_request_changes(
        allocation_request=allocation_request, reviewer=staff, message="Add the project code."
    )
    allocation_request_update(
        allocation_request=allocation_request,
        researcher=researcher,
        fields={"project_code": "XYZ-002"},
    )
    # Submit and resubmit are one service: a request sent back for changes is resubmitted.
    allocation_request_submit(allocation_request=allocation_request, researcher=researcher)
    allocation_request_approve(allocation_request=allocation_request, reviewer=staff)
    trail = list(allocation_request.events.values_list("from_status", "to_status"))
    assert trail == [
        ("", "draft"),
        ("draft", "submitted"),
        ("submitted", "changes_requested"),
        ("changes_requested", "resubmitted"),
        ("resubmitted", "approved"),
    ]
    allocation_request.refresh_from_db()
    assert allocation_request.project_code == "XYZ-002"


def test_create_from_session_freezes_the_estimate():
    researcher = make_user()
    session = make_session(user=researcher)
    allocation_request = allocation_request_create_from_session(
        session=session, researcher=researcher, fields=complete_fields()
    )
    session.estimate_result = {"changed": True}
    session.save()
    allocation_request.refresh_from_db()
    snapshot = allocation_request.estimate_snapshot
    assert snapshot["result"]["recommendation"]["requested_gpu_hours"] == 288.0
    assert snapshot["request"]["model_id"] == "meta-llama/Llama-2-7b-hf"
    assert snapshot["engine_version"] == "0.1.0"
    assert (allocation_request.accelerator, allocation_request.num_gpus) == ("a100-40-sxm4", 1)


def test_second_active_request_from_one_session_is_refused():
    researcher = make_user()
    session = make_session(user=researcher)
    allocation_request_create_from_session(
        session=session, researcher=researcher, fields=complete_fields()
    )
    with pytest.raises(ValidationError, match="already has an active allocation request"):
        allocation_request_create_from_session(
            session=session, researcher=researcher, fields=complete_fields()
        )


def test_someone_elses_session_is_refused():
    session = make_session(user=make_user())
    with pytest.raises(ValidationError, match="belongs to someone else"):
        allocation_request_create_from_session(
            session=session, researcher=make_user(), fields=complete_fields()
        )


def test_editing_a_submitted_request_is_refused():
    allocation_request = make_request(status=Status.SUBMITTED)
    with pytest.raises(TransitionError, match="submitted cannot be edited"):
        allocation_request_update(
            allocation_request=allocation_request,
            researcher=allocation_request.researcher,
            fields={"gpu_hours": 10},
        )


def test_submit_refuses_an_incomplete_draft():
    allocation_request = make_request(project_code="", pi_email="", justification="short")
    with pytest.raises(ValidationError) as excinfo:
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    assert excinfo.value.message_dict == {
        "project_code": ["Fill in the project code before submitting."],
        "pi_email": ["Fill in the PI/supervisor email before submitting."],
        "justification": [
            "Explain why this platform suits the work (at least 40 characters), "
            "or ask for trial access."
        ],
    }
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.DRAFT


def _errors(**overrides):
    try:
        allocation_request_validate(values=complete_fields(**overrides), for_submission=True)
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_complete_fields_are_valid():
    assert _errors() == {}


def test_trial_over_the_limit_is_refused():
    assert _errors(trial=True, gpu_hours=401) == {
        "trial": [
            "Trial access is limited to 400 GPU hours; untick trial to request 401 GPU hours "
            "as a full allocation."
        ]
    }


def test_trial_needs_only_a_light_justification():
    assert _errors(trial=True, gpu_hours=400, justification="") == {}


def test_trial_limit_comes_from_settings(settings):
    settings.ALLOCATION_TRIAL_GPU_HOURS_DEFAULT = 100
    assert "trial" in _errors(trial=True, gpu_hours=101)


def test_gpu_hours_must_be_positive_and_sane(settings):
    settings.ALLOCATION_MAX_GPU_HOURS = 1000
    assert _errors(gpu_hours=0)["gpu_hours"] == [
        "Request more than 0 GPU hours: every facility here is a GPU service."
    ]
    assert _errors(gpu_hours=1001)["gpu_hours"] == [
        "At most 1,000 GPU hours can be requested at once."
    ]


def test_end_date_after_start_date():
    start = timezone.localdate() + timedelta(days=10)
    assert _errors(start_date=start, end_date=start)["end_date"] == [
        "The end date must be after the start date."
    ]


def test_a_new_allocation_cannot_start_in_the_past_but_an_existing_one_may():
    yesterday = timezone.localdate() - timedelta(days=1)
    end = timezone.localdate() + timedelta(days=60)
    assert _errors(start_date=yesterday, end_date=end)["start_date"] == [
        "A new allocation cannot start in the past: choose today or later."
    ]
    assert _errors(allocation_kind="existing", start_date=yesterday, end_date=end) == {}
    assert _errors(start_date=timezone.localdate(), end_date=end) == {}


def test_azure_end_date_limit_is_data():
    limit = days_from_today(120)
    ServiceLimit.objects.create(service="azure", latest_end_date=limit)
    start = timezone.localdate() + timedelta(days=10)
    late = limit + timedelta(days=1)
    errors = _errors(service="azure", facility="azure", start_date=start, end_date=late)
    assert errors == {"end_date": [f"Azure requests can end no later than {spoken(limit)}."]}
    assert _errors(service="azure", facility="azure", start_date=start, end_date=limit) == {}


def test_service_limit_caps_gpu_hours():
    ServiceLimit.objects.create(service="hpc", max_gpu_hours=5000)
    assert _errors(gpu_hours=5001)["gpu_hours"] == [
        "At most 5,000 GPU hours can be requested at once."
    ]


def test_submission_enqueues_staff_email_only_after_commit(
    staff, django_capture_on_commit_callbacks, settings
):
    settings.STAFF_NOTIFICATION_EMAILS = ["rcp@example.ac.uk"]
    allocation_request = make_request()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        allocation_request_submit(
            allocation_request=allocation_request, researcher=allocation_request.researcher
        )
    assert len(callbacks) == 1
    assert mail.outbox == []
    notification = Notification.objects.get()
    assert notification.status == Notification.State.PENDING
    callbacks[0]()
    assert [m.to for m in mail.outbox] == [["rcp@example.ac.uk"]]
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == (Notification.State.SENT, 1)


def test_rolled_back_decision_sends_nothing(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(status=Status.SUBMITTED)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(ValidationError),
    ):
        allocation_request_reject(allocation_request=allocation_request, reviewer=staff, message="")
    assert callbacks == []
    assert mail.outbox == []


def test_decision_emails_the_researcher(staff, django_capture_on_commit_callbacks):
    allocation_request = make_request(status=Status.SUBMITTED)
    with django_capture_on_commit_callbacks(execute=True):
        allocation_request_approve(
            allocation_request=allocation_request, reviewer=staff, granted_gpu_hours=250
        )
    assert [m.to for m in mail.outbox] == [[allocation_request.researcher.email]]
    assert "GPU hours granted: 250 (you asked for 288)." in mail.outbox[0].body
