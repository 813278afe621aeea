from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html_join

from advisor import flow_services, hub, services
from advisor.flowchart import FlowchartError, available_charts, load_chart
from advisor.models import ActiveFlowchart, AdvisorSession, HfModelLookup, StaffModelConfig
from web.admin import ViewOnlyAdminMixin


def chart_warnings(chart_key: str) -> list[str]:
    """What staff must know about a chart: it fails to load, or it routes to a retired system."""
    try:
        chart = load_chart(chart_key)
    except FlowchartError as exc:
        return [f"The chart {chart_key!r} does not load: {exc}"]
    problems = flow_services.chart_system_problems(chart=chart)
    leaves = {s: [n.id for n in chart.nodes if s in n.systems] for s in problems}
    return [
        f"The chart {chart_key!r} points at {system}, which {why} "
        f"(outcome {', '.join(leaves[system])}). Researchers are never recommended a retired "
        "system; check the chart's outcomes name systems researchers can use."
        for system, why in problems.items()
    ]


class ActiveFlowchartForm(forms.ModelForm):
    chart = forms.ChoiceField(choices=(), help_text="The chart new advisor sessions use.")

    class Meta:
        model = ActiveFlowchart
        fields = ["chart"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["chart"].choices = [
            (key, f"{key}: {_title(key)}") for key in available_charts()
        ]

    def clean_chart(self):
        key = self.cleaned_data["chart"]
        try:
            flow_services.chart_validate_systems(chart=load_chart(key))
        except FlowchartError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return key


def _title(key: str) -> str:
    try:
        return load_chart(key).title
    except FlowchartError:
        return "does not load"


@admin.register(ActiveFlowchart)
class ActiveFlowchartAdmin(admin.ModelAdmin):
    form = ActiveFlowchartForm
    list_display = ["chart", "changed_at", "changed_by"]
    readonly_fields = ["warnings", "changed_at", "changed_by"]
    fields = ["chart", "warnings", "changed_at", "changed_by"]

    def has_add_permission(self, request):
        return not ActiveFlowchart.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="Warnings")
    def warnings(self, obj):
        found = chart_warnings(obj.chart if obj else "default")
        if not found:
            return "None: every outcome points at an active system."
        return format_html_join("", "<p>{}</p>", ((w,) for w in found))

    def changelist_view(self, request, extra_context=None):
        for key in available_charts():
            try:
                flow_services.chart_validate_systems(chart=load_chart(key))
            except FlowchartError as exc:
                messages.error(request, f"The chart {key!r} cannot be activated: {exc}")
        row = ActiveFlowchart.objects.first()
        for warning in chart_warnings(row.chart if row else flow_services.active_chart_key()):
            messages.warning(request, warning)
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change):
        flow_services.active_flowchart_set(chart=obj.chart, user=request.user)
        for warning in chart_warnings(obj.chart):
            messages.warning(request, warning)


@admin.register(AdvisorSession)
class AdvisorSessionAdmin(ViewOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "chart", "user", "current_step", "completed_at", "updated_at"]
    list_filter = ["chart", "completed_at"]
    search_fields = ["id", "user__username", "user__email"]
    list_select_related = ["user"]
    readonly_fields = [f.name for f in AdvisorSession._meta.fields]


@admin.register(HfModelLookup)
class HfModelLookupAdmin(admin.ModelAdmin):
    """What the Hub said about each model researchers named; failures show the researcher's
    message, so staff can see why an estimate fell back to a typed parameter count."""

    list_display = [
        "repo_id",
        "revision",
        "status",
        "answered_from",
        "error_kind",
        "attempts",
        "fetched_at",
        "updated_at",
    ]
    list_filter = ["status", "error_kind"]
    search_fields = ["repo_id", "requested_id", "sha"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in HfModelLookup._meta.fields]

    @admin.display(description="Answered from")
    def answered_from(self, obj):
        source = (obj.metadata or {}).get("config_source")
        return {
            "hub": "the Hub",
            "hub+bundled": "the Hub (config.json bundled: gated)",
            "hub+staff": "the Hub (config.json from staff: gated)",
            "bundled": "bundled config (Hub did not answer)",
            "staff": "staff config (Hub did not answer)",
        }.get(source, "-")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class StaffModelConfigForm(forms.ModelForm):
    """Upload a config.json; it is validated by the service before anything is stored."""

    file = forms.FileField(
        label="config.json",
        help_text=(
            "The model's config.json from its repository. It must be a JSON object of a family "
            "the estimator counts, with real-model sizes; at most 1 MB."
        ),
    )

    class Meta:
        model = StaffModelConfig
        fields = ["repo_id", "source"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["file"].required = False
            self.fields["file"].help_text += " Leave empty to keep the current file."

    def clean_repo_id(self):
        repo_id = self.cleaned_data["repo_id"].strip()
        try:
            hub.validate_repo_id(repo_id)
        except hub.InvalidRepoIdError as exc:
            raise forms.ValidationError(exc.message) from exc
        clash = StaffModelConfig.objects.filter(repo_id__iexact=repo_id)
        if self.instance.pk:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError(
                f"A config.json for {clash.first().repo_id} was already added; change that one."
            )
        return repo_id

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if not upload:
            return None
        if upload.size > services.MAX_CONFIG_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; a config.json is at most "
                f"{services.MAX_CONFIG_BYTES:,}."
            )
        data = upload.read()
        try:
            services.model_config_parse(data)
        except services.ModelConfigRejected as exc:
            raise forms.ValidationError(str(exc)) from exc
        return data

    def save(self, commit=True):  # the admin's save_model stores it through the service
        self.save_m2m = lambda: None  # no many-to-many fields
        return self.instance


@admin.register(StaffModelConfig)
class StaffModelConfigAdmin(admin.ModelAdmin):
    """config.json files staff add so lookups work for models the Hub cannot give us (the Hub
    unreachable, or an in-house model); used before the bundled configs."""

    form = StaffModelConfigForm
    list_display = ["repo_id", "model_type", "params_total", "added_by", "updated_at"]
    search_fields = ["repo_id", "source"]
    readonly_fields = ["model_type", "params_total", "added_by", "created_at", "updated_at"]

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data.get("file")
        if data is None:  # a change without a new file: keep the stored config
            data = json.dumps(obj.config).encode()
        services.staff_model_config_save(
            repo_id=form.cleaned_data["repo_id"],
            data=data,
            source=form.cleaned_data.get("source") or "",
            user=request.user,
            instance=obj,
        )
