"""The database refuses what the workflow must never contain, whatever code writes it."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import IntegrityError, transaction

from allocations.models import AllocationRequest, Status
from tests.allocations.factories import make_request, make_session, make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpu_hours", -1), ("cpu_hours", -5), ("granted_gpu_hours", -10), ("status", "lost")],
)
def test_constraint_refuses_bad_value(field, value):
    allocation_request = make_request()
    with pytest.raises(IntegrityError), transaction.atomic():
        AllocationRequest.objects.filter(pk=allocation_request.pk).update(**{field: value})


@pytest.mark.parametrize("end", [date(2026, 12, 1), date(2026, 11, 30)])
def test_constraint_refuses_end_not_after_start(end):
    allocation_request = make_request()
    with pytest.raises(IntegrityError), transaction.atomic():
        AllocationRequest.objects.filter(pk=allocation_request.pk).update(
            start_date=date(2026, 12, 1), end_date=end
        )


def test_one_active_request_per_advisor_session():
    researcher = make_user()
    session = make_session(user=researcher)
    make_request(researcher=researcher, session=session, status=Status.SUBMITTED)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_request(researcher=researcher, session=session)


@pytest.mark.parametrize("closed", [Status.WITHDRAWN, Status.REJECTED])
def test_closed_request_frees_its_advisor_session(closed):
    researcher = make_user()
    session = make_session(user=researcher)
    make_request(researcher=researcher, session=session, status=closed)
    second = make_request(researcher=researcher, session=session)
    assert second.status == Status.DRAFT
    assert AllocationRequest.objects.filter(advisor_session=session).count() == 2


def test_request_ids_are_random_uuids():
    first, second = make_request(), make_request()
    assert first.pk.version == 4
    assert str(first.pk) != str(second.pk)
