"""Researcher pages: create from an advisor result, my requests, detail, edit, withdraw."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from advisor.models import AdvisorSession
from allocations.facilities import trial_gpu_hours_limit
from allocations.forms import AllocationRequestForm, TrialRunUploadForm, form_add_errors
from allocations.measurement_selectors import measurement_views
from allocations.models import AllocationRequest
from allocations.notifications import notifications_waiting_for_broker
from allocations.selectors import (
    allocation_request_get_for_researcher,
    allocation_request_initial_from_session,
    allocation_request_list_for_researcher,
    estimate_view,
    trial_reason,
    trial_suggested,
)
from allocations.services import (
    CheckedFields,
    allocation_request_create_from_session,
    allocation_request_update,
    allocation_request_withdraw,
)
from allocations.trial_runs import HELPER_FILENAME, HELPER_PATH, MAX_FILE_BYTES
from allocations.usage_selectors import usage_for_request


def _wants_submit(request: HttpRequest) -> bool:
    return request.POST.get("action") == "submit"


def _say_if_mail_waits(request: HttpRequest, allocation_request: AllocationRequest) -> None:
    # The request is saved either way; only the e-mail waits for the task queue (the outbox).
    if notifications_waiting_for_broker(allocation_request=allocation_request):
        messages.warning(
            request,
            "Your request is saved. The e-mail telling staff about it will be sent when the mail "
            "service is back; there is nothing more for you to do.",
        )


def _estimate_systems(result: dict) -> list[str]:
    return [o.get("system", "") for o in result.get("options") or []]


def _fields(form: AllocationRequestForm) -> CheckedFields:
    """The form's fields as its clean() checked them, so the services do not check again."""
    assert form.checked is not None  # a valid form has checked its fields
    return form.checked


def _form_context(form, *, result: dict, allocation_request=None, session=None) -> dict:
    gpu_hours = form["gpu_hours"].value()
    if form.is_bound:
        # Only a facility that passed the form's own choice check is looked up: a tampered
        # value may hold anything, a NUL character included (PostgreSQL refuses those).
        facility = getattr(form, "cleaned_data", {}).get("facility") or ""
    else:
        facility = form["facility"].value() or ""
    try:
        hours = int(gpu_hours) if gpu_hours not in (None, "") else None
    except (TypeError, ValueError):
        hours = None
    return {
        "form": form,
        "allocation_request": allocation_request,
        "session": session,
        "trial_limit": trial_gpu_hours_limit(facility),
        "trial_suggested": trial_suggested(gpu_hours=hours, facility=facility, result=result),
        "trial_reason": trial_reason(gpu_hours=hours, facility=facility, result=result),
        "requested_hours": hours,
        "estimate": estimate_view({"result": result}) if result else None,
    }


@login_required
@require_http_methods(["GET", "POST"])
def request_create(request: HttpRequest, session_id) -> HttpResponse:
    session = get_object_or_404(AdvisorSession, pk=session_id, estimate_result__isnull=False)
    if session.user_id is not None and session.user_id != request.user.pk:
        # Someone else's advisor result looks exactly like a missing one.
        raise Http404("No such advisor result.")
    existing = (
        AllocationRequest.objects.for_researcher(request.user)
        .filter(advisor_session=session)
        .exclude(status__in=["withdrawn", "rejected"])
        .first()
    )
    if existing:
        messages.info(request, "You already have a request for this result; here it is.")
        return redirect("allocations:request-detail", pk=existing.pk)
    result = session.estimate_result or {}
    extra = _estimate_systems(result)
    if request.method == "POST":
        form = AllocationRequestForm(
            request.POST, for_submission=_wants_submit(request), extra_facilities=extra
        )
        if form.is_valid():
            try:
                allocation_request = allocation_request_create_from_session(
                    session=session,
                    researcher=request.user,
                    fields=_fields(form),
                    submit=_wants_submit(request),
                )
            except ValidationError as exc:
                form_add_errors(form, exc)
            else:
                messages.success(
                    request,
                    "Request submitted: staff will review it."
                    if _wants_submit(request)
                    else "Draft saved. Submit it when it is complete.",
                )
                _say_if_mail_waits(request, allocation_request)
                return redirect("allocations:request-detail", pk=allocation_request.pk)
    else:
        form = AllocationRequestForm(
            initial=allocation_request_initial_from_session(session=session, user=request.user),
            extra_facilities=extra,
        )
    return render(
        request,
        "allocations/request_form.html",
        _form_context(form, result=result, session=session),
    )


@login_required
def request_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "allocations/request_list.html",
        {"allocation_requests": allocation_request_list_for_researcher(user=request.user)},
    )


def _detail_context(allocation_request, *, upload_form=None) -> dict:
    return {
        "allocation_request": allocation_request,
        "events": allocation_request.events.all(),
        "estimate": estimate_view(
            allocation_request.estimate_snapshot,
            requested_gpu_hours=allocation_request.gpu_hours,
            facility=allocation_request.facility,
        ),
        "measurements": measurement_views(allocation_request=allocation_request),
        "usage": usage_for_request(allocation_request=allocation_request),
        "upload_form": upload_form or TrialRunUploadForm(),
        "max_file_kb": MAX_FILE_BYTES // 1024,
    }


@login_required
def request_detail(request: HttpRequest, pk) -> HttpResponse:
    allocation_request = allocation_request_get_for_researcher(user=request.user, pk=pk)
    return render(request, "allocations/request_detail.html", _detail_context(allocation_request))


@login_required
@require_POST
def measurement_upload(request: HttpRequest, pk) -> HttpResponse:
    """The researcher attaches a trial-run file; a bad file changes nothing and says why."""
    allocation_request = allocation_request_get_for_researcher(user=request.user, pk=pk)
    form = TrialRunUploadForm(request.POST, request.FILES)
    if form.is_valid() and form.upload(
        allocation_request=allocation_request, uploaded_by=request.user
    ):
        messages.success(request, "Measurement added: see it beside the estimate below.")
        detail = reverse("allocations:request-detail", args=[allocation_request.pk])
        return redirect(f"{detail}#measurements")
    response = render(
        request,
        "allocations/request_detail.html",
        _detail_context(allocation_request, upload_form=form),
    )
    response.status_code = 400
    return response


@require_GET
def trial_run_helper(request: HttpRequest) -> FileResponse:
    """The single-file helper researchers add to their training script."""
    return FileResponse(
        HELPER_PATH.open("rb"),
        as_attachment=True,
        filename=HELPER_FILENAME,
        content_type="text/x-python; charset=utf-8",
    )


@login_required
@require_http_methods(["GET", "POST"])
def request_edit(request: HttpRequest, pk) -> HttpResponse:
    allocation_request = allocation_request_get_for_researcher(user=request.user, pk=pk)
    result = (allocation_request.estimate_snapshot or {}).get("result") or {}
    if not allocation_request.is_editable:
        messages.error(
            request,
            f"A request that is {allocation_request.get_status_display().lower()} "
            "cannot be edited.",
        )
        return redirect("allocations:request-detail", pk=allocation_request.pk)
    extra = _estimate_systems(result)
    if request.method == "POST":
        submitting = _wants_submit(request)
        form = AllocationRequestForm(
            request.POST,
            instance=allocation_request,
            for_submission=submitting,
            extra_facilities=extra,
        )
        if form.is_valid():
            try:
                allocation_request_update(
                    allocation_request=allocation_request,
                    researcher=request.user,
                    fields=_fields(form),
                    submit=submitting,
                    message=form.cleaned_data["resubmit_message"],
                )
            except ValidationError as exc:
                form_add_errors(form, exc)
            else:
                messages.success(
                    request,
                    "Request submitted: staff will review it." if submitting else "Changes saved.",
                )
                _say_if_mail_waits(request, allocation_request)
                return redirect("allocations:request-detail", pk=allocation_request.pk)
    else:
        form = AllocationRequestForm(instance=allocation_request, extra_facilities=extra)
    return render(
        request,
        "allocations/request_form.html",
        _form_context(form, result=result, allocation_request=allocation_request),
    )


@login_required
@require_POST
def request_withdraw(request: HttpRequest, pk) -> HttpResponse:
    allocation_request = allocation_request_get_for_researcher(user=request.user, pk=pk)
    try:
        allocation_request_withdraw(allocation_request=allocation_request, researcher=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, "Request withdrawn.")
    return redirect("allocations:request-detail", pk=allocation_request.pk)
