"""Staff pages for Slurm accounting: upload an export, GPU hours granted vs used vs estimated per
request and per system (server-rendered SVG charts), and the engine's calibration against the
institute's own jobs."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from allocations.calibration import calibration_points, calibration_report
from allocations.forms import SlurmAccountForm
from allocations.measurement_services import allocation_request_set_slurm_account
from allocations.models import AllocationRequest, UsageImport, UsageRecord
from allocations.sacct import MAX_FILE_BYTES
from allocations.usage_selectors import (
    unmatched_usage,
    usage_chart,
    usage_rows_by_request,
    usage_rows_by_system,
)
from allocations.usage_services import usage_import
from web.admin import ViewOnlyAdminMixin

MAX_CHARTS = 40  # charts drawn on one page; the table lists every request


class UsageUploadForm(forms.Form):
    file = forms.FileField(
        label="Slurm accounting export",
        help_text="sacct --json, or sacct -P --format=JobID,Cluster,Account,User,Partition,"
        "State,Start,End,ElapsedRaw,AllocTRES",
    )
    cluster = forms.CharField(
        label="Cluster", required=False, max_length=100, help_text="For exports without Cluster."
    )
    time_zone = forms.CharField(
        label="Cluster time zone",
        required=False,
        max_length=64,
        help_text="sacct -P prints local times; default: the site's time zone.",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_FILE_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; at most {MAX_FILE_BYTES:,}."
            )
        return upload


def _charts(rows):
    return [(row, usage_chart(row)) for row in rows[:MAX_CHARTS]]


@admin.register(UsageImport)
class UsageImportAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "file_format",
        "slurm_release",
        "jobs_read",
        "jobs_new",
        "jobs_updated",
        "jobs_unchanged",
        "jobs_matched",
        "gpu_hours_new",
        "imported_by",
    )
    readonly_fields = list_display[1:] + ("file_name", "imported_at")
    change_list_template = "admin/allocations/usage/import_changelist.html"

    def has_add_permission(self, request):
        return False  # through "Import an accounting file"

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        return [
            path(
                "upload/",
                self.admin_site.admin_view(self.upload_view),
                name="allocations_usageimport_upload",
            ),
            *super().get_urls(),
        ]

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.is_staff or not self.has_view_permission(request):
            raise PermissionDenied
        form = UsageUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                summary = usage_import(
                    raw=upload.read(MAX_FILE_BYTES + 1),
                    file_name=upload.name,
                    imported_by=request.user,
                    cluster=form.cleaned_data["cluster"],
                    time_zone=form.cleaned_data["time_zone"] or None,
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                self.message_user(request, f"Imported: {summary}.", messages.SUCCESS)
                return redirect("admin:allocations_usagerecord_overview")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Import Slurm accounting",
            "form": form,
        }
        response = TemplateResponse(request, "admin/allocations/usage/upload.html", context)
        if request.method == "POST":
            response.status_code = 400
        return response


@admin.register(UsageRecord)
class UsageRecordAdmin(ViewOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "job_id",
        "cluster",
        "account",
        "user",
        "state",
        "start",
        "gpus",
        "gpu_hours",
        "allocation_request",
    )
    list_filter = ("cluster", "state", ("allocation_request", admin.EmptyFieldListFilter))
    search_fields = ("job_id", "account", "user")
    list_select_related = ("allocation_request",)
    date_hierarchy = "start"
    readonly_fields = [f.name for f in UsageRecord._meta.fields]
    change_list_template = "admin/allocations/usage/record_changelist.html"

    def get_urls(self):
        return [
            path(
                "overview/",
                self.admin_site.admin_view(self.overview_view),
                name="allocations_usagerecord_overview",
            ),
            path(
                "account/<uuid:request_id>/",
                self.admin_site.admin_view(self.account_view),
                name="allocations_usagerecord_account",
            ),
            path(
                "calibration/",
                self.admin_site.admin_view(self.calibration_view),
                name="allocations_usagerecord_calibration",
            ),
            *super().get_urls(),
        ]

    def _context(self, request, title: str, **extra) -> dict:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            **extra,
        }

    def overview_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        wanted = request.GET.get("request", "")
        single = None
        if wanted:
            single = AllocationRequest.objects.filter(pk__in=_uuid_or_none(wanted)).first()
        rows = usage_rows_by_request()
        if single is not None:
            rows = [row for row in rows if row.allocation_request.pk == single.pk]
        system_rows = [] if single else usage_rows_by_system(rows)
        return TemplateResponse(
            request,
            "admin/allocations/usage/overview.html",
            self._context(
                request,
                f"GPU hours: {single}" if single else "GPU hours granted, used and estimated",
                rows=rows,
                charts=_charts(rows),
                system_rows=system_rows,
                systems=_charts(system_rows),
                unmatched=[] if single else unmatched_usage(),
                single=single,
                max_charts=MAX_CHARTS,
                upload_url=reverse("admin:allocations_usageimport_upload"),
            ),
        )

    def account_view(self, request: HttpRequest, request_id) -> HttpResponse:
        """Staff set or correct a request's Slurm account; stored jobs are matched again."""
        allocation_request = AllocationRequest.objects.filter(pk=request_id).first()
        if allocation_request is None:
            raise Http404("No such allocation request.")
        if not request.user.is_staff:
            raise PermissionDenied
        change_url = reverse("admin:allocations_allocationrequest_change", args=[request_id])
        form = SlurmAccountForm(
            request.POST or None, initial={"slurm_account": allocation_request.slurm_account}
        )
        if request.method == "POST" and form.is_valid():
            try:
                allocation_request_set_slurm_account(
                    allocation_request=allocation_request,
                    reviewer=request.user,
                    slurm_account=form.cleaned_data["slurm_account"],
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                self.message_user(request, "Slurm account saved; jobs matched again.")
                return redirect(change_url)
        return TemplateResponse(
            request,
            "admin/allocations/trialmeasurement/action.html",
            self._context(
                request,
                f"Slurm account: {allocation_request}",
                form=form,
                original=allocation_request,
                change_url=change_url,
                action="account",
            ),
        )

    def calibration_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        report = calibration_report(calibration_points())
        return TemplateResponse(
            request,
            "admin/allocations/usage/calibration.html",
            self._context(
                request, "Calibration: the engine against the institute's jobs", report=report
            ),
        )


def _uuid_or_none(value: str) -> list:
    import uuid

    try:
        return [uuid.UUID(value)]
    except ValueError:
        return []
