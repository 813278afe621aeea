from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from catalog.models import (
    Accelerator,
    Benchmark,
    ChargeRate,
    NodeType,
    Partition,
    Profile,
    System,
    SystemStatus,
    Tool,
    ToolingSupport,
)


class RetiredFilter(admin.SimpleListFilter):
    title = _("retired")
    parameter_name = "retired"

    def lookups(self, request, model_admin):
        return [("yes", _("Retired: never recommended")), ("no", _("In service"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(status=SystemStatus.RETIRED)
        if self.value() == "no":
            return queryset.exclude(status=SystemStatus.RETIRED)
        return queryset


class ChargeRateInline(admin.TabularInline):
    model = ChargeRate
    extra = 1
    autocomplete_fields = ["accelerator"]
    fields = ["accelerator", "rate_per_gpu_hour", "source", "as_of"]
    verbose_name = _("charge rate per GPU hour")
    verbose_name_plural = _(
        "charge rates per GPU hour (HPC systems without a price; the data file's defaults are "
        "cloud-equivalent list prices; a GPU without a rate is charged 'unknown', never 0)"
    )


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "is_active", "loaded_at", "source_file"]
    list_filter = ["is_active"]
    search_fields = ["name", "title"]
    readonly_fields = ["loaded_at", "source_file"]
    fieldsets = [
        (None, {"fields": ["name", "title", "description", "is_active"]}),
        (
            _("Ranking: what the job costs the institute"),
            {
                "fields": ["tie_breakers", "charge_currency"],
                "description": _(
                    "Options that fit and whose software runs come first, fully available "
                    "systems before limited ones; then these tie-breakers in this order, e.g. "
                    '["deadline", "cost", "gpu_class", "queue", "gpus"] (the default).'
                ),
            },
        ),
        (_("Loaded from"), {"fields": ["source_file", "loaded_at"]}),
    ]
    inlines = [ChargeRateInline]


@admin.register(Accelerator)
class AcceleratorAdmin(admin.ModelAdmin):
    list_display = [
        "display_name",
        "name",
        "vendor",
        "memory_gb",
        "memory_bandwidth_gb_s",
        "bf16_tflops",
        "fp16_tflops",
        "fp32_tflops",
        "tensor_cores",
        "launch",
    ]
    list_filter = ["vendor", "bf16_supported", "tensor_cores"]
    search_fields = ["name", "display_name", "vendor", "notes"]
    ordering = ["vendor", "name"]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "vendor", "launch", "interconnect", "tdp_w"]}),
        (_("Memory"), {"fields": ["memory_gb", "memory_bandwidth_gb_s"]}),
        (
            _("Dense peaks (TFLOP/s; INT8 in TOPS)"),
            {
                "fields": [
                    "fp64_tflops",
                    "fp32_tflops",
                    "tf32_tflops",
                    "fp16_tflops",
                    "bf16_tflops",
                    "int8_tops",
                    "fp16_nontensor_tflops",
                    "bf16_supported",
                    "tensor_cores",
                ]
            },
        ),
        (_("Seeds and sources"), {"fields": ["seed_values", "notes", "source"]}),
    ]


class NodeTypeInline(admin.TabularInline):
    model = NodeType
    extra = 0
    fields = [
        "name",
        "count",
        "gpus_per_node",
        "accelerator",
        "cpu_cores",
        "ram_gb",
        "intra_node_interconnect",
        "inter_node_interconnect",
        "inter_node_gbit_s",
        "price_per_gpu_hour",
        "status",
        "retired_on",
        "source",
    ]
    autocomplete_fields = ["accelerator"]


class PartitionInline(admin.StackedInline):
    model = Partition
    extra = 0
    fields = [
        ("name", "slurm_partition"),
        "node_types",
        ("max_wall_hours", "max_gpus_per_job", "max_nodes_per_job"),
        ("gpu_request", "constraint", "qos"),
        "notes",
        "source",
    ]
    filter_horizontal = ["node_types"]


class ToolingSupportInline(admin.TabularInline):
    model = ToolingSupport
    extra = 0
    fields = ["tool", "supported", "source"]


@admin.register(System)
class SystemAdmin(admin.ModelAdmin):
    list_display = [
        "display_name",
        "name",
        "profile",
        "kind",
        "scheduler",
        "status",
        "retired_warning",
        "notebooks",
        "trial_gpu_hours",
    ]
    list_filter = [RetiredFilter, "status", "kind", "profile", "notebooks"]
    search_fields = ["name", "display_name", "operator", "status_note", "access_route"]
    list_select_related = ["profile"]
    inlines = [NodeTypeInline, PartitionInline, ToolingSupportInline]
    fieldsets = [
        (None, {"fields": ["profile", "name", "display_name", "operator", "kind", "scheduler"]}),
        (
            _("Status"),
            {
                "fields": [
                    "status",
                    "status_since",
                    "status_note",
                    "closed_to_new_users_on",
                    "compute_ends_on",
                    "access_ends_on",
                ]
            },
        ),
        (
            _("Access"),
            {
                "fields": [
                    "access_route",
                    "trial_gpu_hours",
                    "trial_note",
                    "minimum_gpu_hours",
                    "data_sensitivity",
                    "data_sensitivity_note",
                    "request_fields",
                    "notebooks",
                    "notebook_note",
                    "queue_guidance",
                    "typical_queue_wait_hours",
                ]
            },
        ),
        (
            _("Price"),
            {
                "fields": [
                    "price_per_gpu_hour",
                    "currency",
                    ("currency_value_per_unit", "currency_value_currency"),
                    ("currency_value_source", "currency_value_as_of"),
                    "price_note",
                ],
                "description": _(
                    "What one unit of the currency is worth in another (0.01 USD per Service "
                    "Unit) lets the ranking compare this system's charges with the profile's "
                    "charge currency; without it they are not compared."
                ),
            },
        ),
        (_("Software"), {"fields": ["modules", "container"]}),
        (_("Sources"), {"fields": ["notes", "source"]}),
    ]

    @admin.display(description=_("warning"), ordering="status")
    def retired_warning(self, obj: System) -> str:
        if obj.status == SystemStatus.RETIRED:
            return "RETIRED: never recommended"
        if obj.status == SystemStatus.LIMITED:
            return "Limited: see status note"
        return ""


@admin.register(NodeType)
class NodeTypeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "system",
        "accelerator",
        "count",
        "gpus_per_node",
        "cpu_cores",
        "ram_gb",
        "inter_node_interconnect",
        "price_per_gpu_hour",
        "status",
    ]
    list_filter = ["status", "system__profile", "system", "accelerator", "inter_node_interconnect"]
    search_fields = ["name", "system__name", "accelerator__name", "accelerator__display_name"]
    list_select_related = ["system", "accelerator"]
    autocomplete_fields = ["accelerator", "system"]


@admin.register(Partition)
class PartitionAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "system",
        "slurm_partition",
        "max_wall_hours",
        "max_gpus_per_job",
        "gpu_request",
        "constraint",
        "qos",
    ]
    list_filter = ["system__profile", "system"]
    search_fields = ["name", "slurm_partition", "system__name", "gpu_request", "constraint"]
    list_select_related = ["system"]
    filter_horizontal = ["node_types"]


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ["name", "position"]
    search_fields = ["name"]
    ordering = ["position", "name"]


@admin.register(ToolingSupport)
class ToolingSupportAdmin(admin.ModelAdmin):
    list_display = ["system", "tool", "supported_words", "source"]
    list_filter = ["supported", "tool", "system"]
    search_fields = ["system__name", "tool__name"]
    list_select_related = ["system", "tool"]

    @admin.display(description=_("supported"), ordering="supported")
    def supported_words(self, obj: ToolingSupport) -> str:
        return {True: "Yes", False: "No", None: "Unknown"}[obj.supported]


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "accelerator",
        "system",
        "model",
        "strategy",
        "precision",
        "num_gpus",
        "batch_size",
        "seq_len",
        "tokens_per_second",
        "peak_memory_gb",
        "outcome",
    ]
    list_filter = ["outcome", "precision", "accelerator", "profile"]
    search_fields = ["name", "model", "accelerator__name", "system__name", "source"]
    list_select_related = ["accelerator", "system"]
    autocomplete_fields = ["accelerator", "system"]
