"""Staff pages for trial-run measurements: upload for a request, accept into the catalog, reject,
and re-run the request's estimate with a measurement applied. Every write goes through
allocations.measurement_services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from advisor.engine_catalog import benchmark_spec
from allocations.estimates import EstimateUnavailable, estimate_comparison, estimate_rerun
from allocations.forms import (
    MeasurementAcceptForm,
    MeasurementRejectForm,
    TrialRunUploadForm,
    form_add_errors,
)
from allocations.measurement_selectors import (
    accelerator_choices,
    measurement_accelerator_guess,
    measurement_views,
)
from allocations.measurement_services import (
    trial_measurement_accept,
    trial_measurement_benchmark_values,
    trial_measurement_calibration_problem,
    trial_measurement_reject,
)
from allocations.models import AllocationRequest, MeasurementReview, TrialMeasurement
from catalog.models import Accelerator, Benchmark


@admin.register(TrialMeasurement)
class TrialMeasurementAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "request_link",
        "task",
        "precision",
        "micro_batch_size",
        "seq_len",
        "review",
        "uploaded_at",
    )
    list_filter = ("review", "task", "precision", "gpu_present")
    list_select_related = ("allocation_request",)
    search_fields = ("device_name", "allocation_request__project_title", "benchmark_name")
    readonly_fields = (
        "allocation_request",
        "uploaded_by",
        "uploaded_at",
        "file_name",
        "device_name",
        "gpu_present",
        "num_gpus",
        "task",
        "precision",
        "micro_batch_size",
        "seq_len",
        "params",
        "tokens_per_second",
        "max_memory_allocated_bytes",
        "max_memory_reserved_bytes",
        "review",
        "reviewed_by",
        "reviewed_at",
        "review_note",
        "accelerator",
        "benchmark_name",
        "report",
    )
    change_form_template = "admin/allocations/trialmeasurement/change_form.html"

    def has_add_permission(self, request):
        return False  # added through a request's "Upload a measurement"

    @admin.display(description="Request")
    def request_link(self, obj: TrialMeasurement) -> str:
        url = reverse(
            "admin:allocations_allocationrequest_change", args=[obj.allocation_request_id]
        )
        return format_html('<a href="{}">{}</a>', url, obj.allocation_request)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "upload/<uuid:request_id>/",
                self.admin_site.admin_view(self.upload_view),
                name="{}_{}_upload".format(*info),
            ),
            path(
                "<uuid:object_id>/accept/",
                self.admin_site.admin_view(self.accept_view),
                name="{}_{}_accept".format(*info),
            ),
            path(
                "<uuid:object_id>/reject/",
                self.admin_site.admin_view(self.reject_view),
                name="{}_{}_reject".format(*info),
            ),
            path(
                "<uuid:object_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name="{}_{}_rerun".format(*info),
            ),
            *super().get_urls(),
        ]

    def _measurement(self, request, object_id, *, change: bool = True) -> TrialMeasurement:
        obj = (
            TrialMeasurement.objects.select_related("allocation_request__system")
            .filter(pk=object_id)
            .first()
        )
        if obj is None:
            raise Http404("No such measurement.")
        allowed = self.has_change_permission if change else self.has_view_permission
        if not allowed(request, obj):
            raise PermissionDenied
        return obj

    def _context(self, request, *, title: str, measurement=None, **extra) -> dict:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "measurement": measurement,
            **extra,
        }

    def upload_view(self, request: HttpRequest, request_id) -> HttpResponse:
        allocation_request = AllocationRequest.objects.filter(pk=request_id).first()
        if allocation_request is None:
            raise Http404("No such allocation request.")
        if not self.has_view_permission(request) or not request.user.is_staff:
            raise PermissionDenied
        change_url = reverse("admin:allocations_allocationrequest_change", args=[request_id])
        form = TrialRunUploadForm(request.POST or None, request.FILES or None)
        if (
            request.method == "POST"
            and form.is_valid()
            and form.upload(allocation_request=allocation_request, uploaded_by=request.user)
        ):
            self.message_user(request, "Measurement added.", messages.SUCCESS)
            return redirect(f"{change_url}#measurements")
        context = self._context(
            request,
            title=f"Upload a trial-run measurement: {allocation_request}",
            form=form,
            original=allocation_request,
            change_url=change_url,
            action="upload",
        )
        response = TemplateResponse(
            request, "admin/allocations/trialmeasurement/action.html", context
        )
        if request.method == "POST":
            response.status_code = 400
        return response

    def accept_view(self, request: HttpRequest, object_id) -> HttpResponse:
        obj = self._measurement(request, object_id)
        choices = accelerator_choices()
        form = MeasurementAcceptForm(
            request.POST or None,
            accelerators=choices,
            initial={"accelerator": obj.accelerator or measurement_accelerator_guess(obj)},
        )
        if request.method == "POST" and form.is_valid():
            try:
                benchmark = trial_measurement_accept(
                    measurement=obj,
                    reviewer=request.user,
                    accelerator_name=form.cleaned_data["accelerator"],
                    params=form.cleaned_data["params"],
                    note=form.cleaned_data["note"],
                )
            except ValidationError as exc:
                form_add_errors(form, exc)
            else:
                self.message_user(
                    request,
                    f"Accepted: catalog benchmark {benchmark.name} now calibrates "
                    f"{benchmark.accelerator.display_name} estimates.",
                    messages.SUCCESS,
                )
                return redirect("admin:allocations_trialmeasurement_change", obj.pk)
        title = f"Accept into the catalog: {obj}"
        return self._action_page(request, obj, form, action="accept", title=title)

    def _action_page(self, request: HttpRequest, obj, form, *, action: str, title: str):
        """The accept or reject form for one measurement (GET, or a POST with errors)."""
        return TemplateResponse(
            request,
            "admin/allocations/trialmeasurement/action.html",
            self._context(
                request,
                title=title,
                measurement=obj,
                form=form,
                action=action,
                change_url=reverse("admin:allocations_trialmeasurement_change", args=[obj.pk]),
            ),
        )

    def reject_view(self, request: HttpRequest, object_id) -> HttpResponse:
        obj = self._measurement(request, object_id)
        form = MeasurementRejectForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            trial_measurement_reject(
                measurement=obj, reviewer=request.user, note=form.cleaned_data["note"]
            )
            self.message_user(request, "Kept out of the catalog.", messages.SUCCESS)
            return redirect("admin:allocations_trialmeasurement_change", obj.pk)
        title = f"Keep out of the catalog: {obj}"
        return self._action_page(request, obj, form, action="reject", title=title)

    def rerun_view(self, request: HttpRequest, object_id) -> HttpResponse:
        """The request's estimate again on the measured GPU, with the measurement as a benchmark."""
        obj = self._measurement(request, object_id, change=False)
        allocation_request = obj.allocation_request
        accelerator_name = obj.accelerator or measurement_accelerator_guess(obj)
        accelerator = Accelerator.objects.filter(name=accelerator_name).first()
        comparison, error = None, ""
        if not obj.gpu_present:
            error = "Measured on the CPU: there is no GPU throughput to apply."
        elif problem := trial_measurement_calibration_problem(obj):
            error = problem
        elif accelerator is None:
            error = (
                f"The GPU the run reported ({obj.device_name or 'unknown'}) matches no catalog "
                "accelerator; accept the measurement with the right GPU first."
            )
        else:
            values = trial_measurement_benchmark_values(
                measurement=obj,
                accelerator=accelerator,
                params=obj.params
                or ((allocation_request.estimate_snapshot or {}).get("result") or {}).get(
                    "params_total"
                ),
            )
            values.pop("source_kind")
            values.pop("source_reference")
            spec = benchmark_spec(Benchmark(name="trial-run-preview", **values))
            snapshot = allocation_request.estimate_snapshot or {}
            current = (snapshot.get("request") or {}).get("accelerator")
            changes = {} if current == accelerator.name else {"accelerator": accelerator.name}
            try:
                new = estimate_rerun(snapshot=snapshot, changes=changes, extra_benchmarks=(spec,))
            except EstimateUnavailable as exc:
                error = str(exc)
            else:
                comparison = estimate_comparison(old=snapshot.get("result") or {}, new=new)
        return TemplateResponse(
            request,
            "admin/allocations/trialmeasurement/rerun.html",
            self._context(
                request,
                title=f"Re-run with the measurement applied: {allocation_request}",
                measurement=obj,
                original=allocation_request,
                accelerator=accelerator,
                comparison=comparison,
                error=error,
                change_url=reverse(
                    "admin:allocations_allocationrequest_change", args=[allocation_request.pk]
                ),
            ),
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = {"show_save": False, "show_save_and_continue": False, "show_delete": False}
        if obj is not None:
            views = [
                v
                for v in measurement_views(allocation_request=obj.allocation_request)
                if v.measurement.pk == obj.pk
            ]
            extra["measurements"] = views
            extra["can_accept"] = obj.review != MeasurementReview.ACCEPTED and obj.gpu_present
            extra["can_reject"] = obj.review != MeasurementReview.REJECTED
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})
