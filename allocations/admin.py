"""Staff review in the Django admin: the queue, the request with its frozen estimate, decisions.

Decisions and re-runs are extra admin URLs (get_urls) that call services; the admin never
writes a status itself.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.defaultfilters import linebreaksbr
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from allocations.estimates import EstimateUnavailable, estimate_comparison, estimate_rerun
from allocations.export import EXPORT_FIELDS, csv_safe, export_row, facility_fields_text
from allocations.forms import (
    ApproveForm,
    DecisionForm,
    EstimateRerunForm,
    RejectForm,
    RequestChangesForm,
)
from allocations.measurement_selectors import measurement_views
from allocations.measurement_services import allocation_request_approve_with_account
from allocations.models import (
    AllocationEvent,
    AllocationRequest,
    Notification,
    ServiceLimit,
)
from allocations.notifications import notifications_waiting_for_broker
from allocations.selectors import estimate_view
from allocations.services import (
    TRANSITIONS,
    Transition,
    allocation_request_record_rerun,
    allocation_request_reject,
    allocation_request_request_changes,
)
from catalog.models import System


@dataclass(frozen=True)
class Decision:
    """A staff decision: its button, its form, the workflow transition it takes and the
    service that takes it (called with the form's cleaned data as keyword arguments)."""

    label: str
    form: type[DecisionForm]
    transition: Transition
    service: Callable[..., AllocationRequest]

    def applies_to(self, allocation_request: AllocationRequest) -> bool:
        return allocation_request.status in self.transition.sources


DECISIONS = {
    "approve": Decision(
        "Approve", ApproveForm, TRANSITIONS["approve"], allocation_request_approve_with_account
    ),
    "request-changes": Decision(
        "Request changes",
        RequestChangesForm,
        TRANSITIONS["request_changes"],
        allocation_request_request_changes,
    ),
    "reject": Decision("Reject", RejectForm, TRANSITIONS["reject"], allocation_request_reject),
}


def _decision_log(allocation_request: AllocationRequest, label: str) -> str:
    """The admin history's line for a decision (Django's LogEntry, beside our own events)."""
    words = f"{label}: now {allocation_request.get_status_display().lower()}"
    if allocation_request.granted_gpu_hours and allocation_request.status == "approved":
        words += f", {allocation_request.granted_gpu_hours:,} GPU hours granted"
    return words + "."


class FacilityFilter(admin.SimpleListFilter):
    """Facilities by the names people use ("Dawn (Cambridge, ...)"), not catalog keys."""

    title = "facility"
    parameter_name = "facility"

    def lookups(self, request, model_admin):
        # One query, as the plain field filter costs: each facility with its catalog name.
        name = System.objects.filter(name=OuterRef("facility")).values("display_name")[:1]
        rows = (
            AllocationRequest.objects.exclude(facility="")
            .values("facility")
            .annotate(name=Subquery(name))
            .values_list("facility", "name")
            .distinct()
            .order_by("facility")
        )
        return sorted(((key, label or key) for key, label in rows), key=lambda kv: kv[1])

    def queryset(self, request, queryset):
        return queryset.filter(facility=self.value()) if self.value() else queryset


class AllocationEventInline(admin.TabularInline):
    model = AllocationEvent
    extra = 0
    can_delete = False
    fields = (
        "created_at",
        "actor",
        "from_status",
        "to_status",
        "granted_gpu_hours",
        "message",
        "note",
    )
    readonly_fields = fields
    ordering = ("created_at", "id")

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("actor")


@admin.register(AllocationRequest)
class AllocationRequestAdmin(admin.ModelAdmin):
    list_display = (
        "project_title",
        "researcher_name",
        "facility_name",
        "gpu_hours",
        "trial",
        "status",
        "submitted_at",
        "age",
    )
    list_display_links = ("project_title",)
    list_select_related = ("researcher", "system")
    list_filter = ("status", FacilityFilter, "service", "data_sensitivity", "trial")
    search_fields = (
        "project_title",
        "slurm_account",
        "project_code",
        "pi_name",
        "researcher__username",
        "researcher__email",
        "researcher__last_name",
    )
    date_hierarchy = "submitted_at"
    ordering = ("-submitted_at", "-created_at")
    list_per_page = 100
    show_full_result_count = False  # one COUNT(*) fewer on a large queue
    actions = ("export_csv", "export_json")
    inlines = (AllocationEventInline,)
    change_form_template = "admin/allocations/allocationrequest/change_form.html"
    fieldsets = (
        (
            "Status",
            {
                "fields": (
                    "status",
                    "granted_gpu_hours",
                    "slurm_account",
                    "submitted_at",
                    "decided_at",
                )
            },
        ),
        ("Caller", {"fields": ("researcher", "caller_name", "caller_branch")}),
        (
            "Project",
            {
                "fields": (
                    "project_title",
                    "project_code",
                    "research_area",
                    "research_purpose",
                    "pi_name",
                    "pi_email",
                )
            },
        ),
        (
            "Service",
            {
                "fields": (
                    "service",
                    "facility",
                    "allocation_kind",
                    "cpu_hours",
                    "gpu_hours",
                    "trial",
                    "start_date",
                    "end_date",
                )
            },
        ),
        (
            "Information",
            {"fields": ("data_sensitivity", "secure_environment_details", "justification_read")},
        ),
    )

    # --- The queue -----------------------------------------------------------------------

    @admin.display(description="Facility", ordering="facility")
    def facility_name(self, obj: AllocationRequest) -> str:
        # The catalog's name ("Dawn (Cambridge, AI Research Resource)"), not its key; the CSV
        # export keeps the key.
        return obj.system.display_name if obj.system_id else obj.facility

    @admin.display(description="Researcher", ordering="researcher__username")
    def researcher_name(self, obj: AllocationRequest) -> str:
        return obj.researcher.get_full_name() or obj.researcher.get_username()

    @admin.display(description="Age", ordering="submitted_at")
    def age(self, obj: AllocationRequest) -> str:
        if not obj.submitted_at:
            return "—"
        return timesince(obj.submitted_at, timezone.now(), depth=1)

    # --- The request page ----------------------------------------------------------------

    @admin.display(description="Secure environment details")
    def secure_environment_details(self, obj: AllocationRequest) -> str:
        answers = obj.facility_fields or []
        if not answers:
            return "—"
        return format_html_join(
            "\n", "<p><strong>{}</strong>: {}</p>", ((a["label"], a["value"]) for a in answers)
        )

    @admin.display(description="Justification (the research purpose first)")
    def justification_read(self, obj: AllocationRequest) -> str:
        return linebreaksbr(obj.justification_for_review, autoescape=True)

    def get_readonly_fields(self, request, obj=None):
        # Staff decide through the buttons (services); the researcher's words stay theirs.
        return [f for fieldset in self.fieldsets for f in fieldset[1]["fields"]]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        # Every field is read-only: decisions go through the buttons, so no Save buttons.
        extra_context = {
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
            **(extra_context or {}),
        }
        if obj is not None:
            extra_context.update(
                estimate=estimate_view(
                    obj.estimate_snapshot, requested_gpu_hours=obj.gpu_hours, facility=obj.facility
                ),
                measurements=measurement_views(allocation_request=obj),
                decisions=[(key, d.label) for key, d in DECISIONS.items() if d.applies_to(obj)],
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/decide/<slug:decision>/",
                self.admin_site.admin_view(self.decision_view),
                name="{}_{}_decide".format(*info),
            ),
            path(
                "<path:object_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name="{}_{}_rerun".format(*info),
            ),
            *super().get_urls(),
        ]

    def _get_for_review(self, request, object_id) -> AllocationRequest:
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404("No such allocation request.")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        return obj

    def decision_view(self, request: HttpRequest, object_id: str, decision: str) -> HttpResponse:
        if decision not in DECISIONS:
            raise Http404("No such decision.")
        obj = self._get_for_review(request, object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        label, form_class = DECISIONS[decision].label, DECISIONS[decision].form
        change_url = reverse("admin:allocations_allocationrequest_change", args=[obj.pk])
        if request.method == "POST":
            form = form_class(request.POST)
            if form.is_valid():
                try:
                    decided = DECISIONS[decision].service(
                        allocation_request=obj, reviewer=request.user, **form.cleaned_data
                    )
                except ValidationError as exc:
                    if hasattr(exc, "error_dict"):
                        for field, errors in exc.message_dict.items():
                            form.add_error(field if field in form.fields else None, errors)
                    else:
                        form.add_error(None, exc.messages)
                else:
                    self.log_change(request, decided, _decision_log(decided, label))
                    self.message_user(request, f"{label}: done for “{obj}”.", messages.SUCCESS)
                    if notifications_waiting_for_broker(allocation_request=obj):
                        self.message_user(
                            request,
                            "The decision is saved. The e-mail to the researcher will be sent "
                            "when the mail service is back.",
                            messages.WARNING,
                        )
                    return redirect(change_url)
        else:
            initial = {"granted_gpu_hours": obj.gpu_hours} if decision == "approve" else {}
            form = form_class(initial=initial)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"{label}: {obj}",
            "form": form,
            "decision_label": label,
            "change_url": change_url,
            "estimate": estimate_view(
                obj.estimate_snapshot, requested_gpu_hours=obj.gpu_hours, facility=obj.facility
            ),
        }
        return TemplateResponse(
            request, "admin/allocations/allocationrequest/decision.html", context
        )

    def rerun_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self._get_for_review(request, object_id)
        comparison = None
        error = ""
        form = EstimateRerunForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                new_result = estimate_rerun(
                    snapshot=obj.estimate_snapshot, changes=form.cleaned_data["changes"]
                )
            except EstimateUnavailable as exc:
                error = str(exc)
            else:
                comparison = estimate_comparison(
                    old=(obj.estimate_snapshot or {}).get("result") or {}, new=new_result
                )
                allocation_request_record_rerun(
                    allocation_request=obj,
                    actor=request.user,
                    changes=form.cleaned_data["changes"],
                    new_result=new_result,
                )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"Re-run the estimate: {obj}",
            "form": form,
            "comparison": comparison,
            "error": error,
            "change_url": reverse("admin:allocations_allocationrequest_change", args=[obj.pk]),
            "request_inputs": (obj.estimate_snapshot or {}).get("request") or {},
        }
        return TemplateResponse(request, "admin/allocations/allocationrequest/rerun.html", context)

    # --- Export --------------------------------------------------------------------------

    @admin.action(description="Export selected requests as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="allocation-requests.csv"'
        writer = csv.writer(response)
        writer.writerow(EXPORT_FIELDS)
        for obj in queryset.select_related("researcher").order_by("submitted_at", "created_at"):
            row = export_row(obj)
            row["facility_fields"] = facility_fields_text(row["facility_fields"])
            writer.writerow([csv_safe(row[field]) for field in EXPORT_FIELDS])
        return response

    @admin.action(description="Export selected requests as JSON")
    def export_json(self, request, queryset):
        rows = [
            {**export_row(obj), "estimate": obj.estimate_snapshot}
            for obj in queryset.select_related("researcher").order_by("submitted_at", "created_at")
        ]
        response = HttpResponse(
            json.dumps(rows, cls=DjangoJSONEncoder, indent=2), content_type="application/json"
        )
        response["Content-Disposition"] = 'attachment; filename="allocation-requests.json"'
        return response


@admin.register(ServiceLimit)
class ServiceLimitAdmin(admin.ModelAdmin):
    list_display = ("service", "latest_end_date", "max_gpu_hours", "max_cpu_hours", "note")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("kind", "status", "attempts", "created_at", "sent_at", "request_link")
    list_filter = ("status", "kind")
    list_select_related = ("event__allocation_request",)
    readonly_fields = (
        "event",
        "kind",
        "recipients",
        "status",
        "attempts",
        "queued_at",
        "last_error",
        "created_at",
        "sent_at",
    )

    @admin.display(description="Request")
    def request_link(self, obj: Notification) -> str:
        allocation_request = obj.event.allocation_request
        url = reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk])
        return format_html('<a href="{}">{}</a>', url, allocation_request)

    def has_add_permission(self, request):
        return False


# The feedback loop's staff pages (trial-run measurements, usage, calibration) register here.
from allocations import measurement_admin, usage_admin  # noqa: E402, F401
