"""The catalog of systems: accelerators, systems, node types, partitions, tooling, benchmarks.

Data, not code: rows come from `catalog/data/<profile>.json` through `manage.py load_catalog`
(catalog.services.catalog_load) and staff may correct them in the admin. The engine never sees
these models: `advisor.engine_catalog` maps them to the engine's frozen pydantic specs, and this
app imports nothing from `advisor`.

Every write to a catalog table (a save, a delete, a bulk update, an M2M change) replaces
`CatalogVersion.stamp` in the same transaction (catalog/versioning.py, catalog/signals.py), so
readers that cache what they built from the catalog know when to build it again.

Profiles: a profile is one institute's view (the Turing's "default", "lancaster", "uva").
Systems and benchmarks belong to exactly one profile; accelerators and tools are shared by all
profiles (a V100 is a V100 everywhere). Exactly one profile is active at a time: the last one
loaded. The advisor and the /catalog/ page show the active profile's systems.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import F, Q

import catalog_schema

# Re-exported: the migrations name the validators by their path in catalog.models.
from catalog.validators import (  # noqa: F401
    validate_json_has_no_nul,
    validate_sensitivity_levels,
    validate_tie_breakers,
)
from catalog.versioning import (  # noqa: F401 - re-exported: Django finds models in catalog.models
    CatalogManager,
    CatalogQuerySet,
    CatalogVersion,
    CatalogVersionManager,
)


def _empty_or(field: str, *, name: str, **bound: float) -> models.CheckConstraint:
    """A figure the catalog may leave empty but never set out of range: `gt=0` or `gte=0`."""
    ((lookup, value),) = bound.items()
    return models.CheckConstraint(
        condition=Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__{lookup}": value}), name=name
    )


def text_choices(name: str, labels: dict[str, str]) -> type[models.TextChoices]:
    """Django choices for one of catalog_schema's enumerations: values and labels are defined
    there, once; members are the values upper-cased (`SystemStatus.RETIRED == "retired"`)."""
    members = [(value.upper(), (value, label)) for value, label in labels.items()]
    return models.TextChoices(name, members, module=__name__)


class Profile(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    is_active = models.BooleanField(
        default=False, help_text="The profile the advisor and the systems page use."
    )
    source_file = models.CharField(max_length=500, blank=True)
    loaded_at = models.DateTimeField(null=True, blank=True)
    # The ranking's tie-breakers after "fits and runs" (advisor/engine/ranking.py), in order.
    tie_breakers = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tie_breakers],
        help_text="Order of: deadline, cost, gpu_class, queue, gpus (any left out follow in that "
        "order). Empty: that default order.",
    )
    charge_currency = models.CharField(
        max_length=10,
        default="USD",
        help_text="Currency of the charge rates below (the data files' cloud-equivalent "
        "defaults are Azure list prices in USD).",
    )

    objects = CatalogManager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"],
                condition=Q(is_active=True),
                name="catalog_profile_one_active",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Accelerator(models.Model):
    """One GPU/accelerator model. Peaks are DENSE (never with sparsity), in TFLOP/s (TOPS for int8).

    `seed_values` keeps what the seed documents printed, verbatim, with a note where it
    disagrees with vendor data (e.g. the Turing table's H100 1513 is with sparsity).
    """

    name = models.SlugField(max_length=64, unique=True, help_text="Catalog key, e.g. a100-80-sxm4")
    display_name = models.CharField(max_length=200)
    vendor = models.CharField(max_length=100)
    memory_gb = models.FloatField(help_text="Decimal GB as the vendor states it.")
    memory_bandwidth_gb_s = models.FloatField()
    fp64_tflops = models.FloatField(null=True, blank=True, help_text="Vector (non-tensor).")
    fp32_tflops = models.FloatField(null=True, blank=True, help_text="Vector (non-tensor).")
    tf32_tflops = models.FloatField(null=True, blank=True, help_text="Tensor, dense.")
    fp16_tflops = models.FloatField(
        null=True, blank=True, help_text="Tensor, FP32 accumulate, dense."
    )
    bf16_tflops = models.FloatField(null=True, blank=True, help_text="Tensor, dense.")
    int8_tops = models.FloatField(null=True, blank=True, help_text="Tensor, dense.")
    fp16_nontensor_tflops = models.FloatField(null=True, blank=True)
    bf16_supported = models.BooleanField(default=False)
    tensor_cores = models.BooleanField(default=False)
    tdp_w = models.FloatField(null=True, blank=True)
    interconnect = models.CharField(max_length=300, blank=True)
    launch = models.CharField(max_length=20, blank=True, help_text="YYYY-MM")
    seed_values = models.JSONField(default=list, blank=True, validators=[validate_json_has_no_nul])
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=300)

    objects = CatalogManager()

    class Meta:
        ordering = ["vendor", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(memory_gb__gt=0), name="catalog_acc_memory_gt_0"),
            models.CheckConstraint(
                condition=Q(memory_bandwidth_gb_s__gt=0), name="catalog_acc_bandwidth_gt_0"
            ),
            _empty_or("bf16_tflops", gt=0, name="catalog_acc_bf16_gt_0"),
            _empty_or("fp16_tflops", gt=0, name="catalog_acc_fp16_gt_0"),
            _empty_or("fp32_tflops", gt=0, name="catalog_acc_fp32_gt_0"),
        ]

    def __str__(self) -> str:
        return self.display_name


SystemKind = text_choices("SystemKind", catalog_schema.SYSTEM_KIND_LABELS)
SystemStatus = text_choices("SystemStatus", catalog_schema.SYSTEM_STATUS_LABELS)
# Shared by the catalog (what a system allows) and allocation requests (what the data is).
DataSensitivity = text_choices("DataSensitivity", catalog_schema.DATA_SENSITIVITY_LABELS)


class System(models.Model):
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="systems")
    name = models.SlugField(max_length=64, unique=True, help_text="Catalog key, e.g. baskerville")
    display_name = models.CharField(max_length=200)
    operator = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=20, choices=SystemKind.choices, default=SystemKind.HPC_BATCH)
    scheduler = models.CharField(max_length=100, blank=True, help_text="slurm, none, cloud, ...")
    status = models.CharField(
        max_length=20, choices=SystemStatus.choices, default=SystemStatus.ACTIVE
    )
    status_since = models.DateField(null=True, blank=True)
    status_note = models.TextField(blank=True)
    closed_to_new_users_on = models.DateField(null=True, blank=True)
    compute_ends_on = models.DateField(null=True, blank=True)
    access_ends_on = models.DateField(null=True, blank=True)
    notebooks = models.BooleanField(default=False)
    notebook_note = models.TextField(blank=True)
    data_sensitivity = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_sensitivity_levels],
        help_text="Levels allowed: public, internal, confidential, restricted.",
    )
    data_sensitivity_note = models.TextField(
        blank=True,
        help_text="What the operator documents about the data it may hold, with the source; "
        "say so where nothing establishes more than public data.",
    )
    minimum_gpu_hours = models.FloatField(
        null=True,
        blank=True,
        help_text="The smallest allocation the site grants, where it documents one.",
    )
    request_fields = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_json_has_no_nul],
        help_text='What a request to this system must also give: [{"label": ..., "help": ...}].',
    )
    trial_gpu_hours = models.FloatField(null=True, blank=True)
    trial_note = models.TextField(blank=True)
    price_per_gpu_hour = models.FloatField(null=True, blank=True)
    currency = models.CharField(max_length=10, blank=True)
    # What one unit of `currency` is worth in another (0.01 USD per UVA Service Unit): the
    # ranking compares charges in the profile's charge currency.
    currency_value_per_unit = models.FloatField(null=True, blank=True, help_text="e.g. 0.01")
    currency_value_currency = models.CharField(
        max_length=3,
        blank=True,
        validators=[RegexValidator(r"^[A-Z]{3}$", "Give an ISO 4217 code such as USD.")],
        help_text="The currency that value is in (ISO 4217, e.g. USD).",
    )
    currency_value_source = models.CharField(max_length=300, blank=True)
    currency_value_as_of = models.DateField(null=True, blank=True)
    price_note = models.TextField(blank=True)
    typical_queue_wait_hours = models.FloatField(null=True, blank=True)
    access_route = models.TextField(blank=True)
    queue_guidance = models.TextField(blank=True)
    modules = models.JSONField(default=list, blank=True, validators=[validate_json_has_no_nul])
    container = models.CharField(max_length=300, blank=True)
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=300)

    objects = CatalogManager()

    class Meta:
        ordering = ["display_name"]
        constraints = [
            _empty_or("trial_gpu_hours", gte=0, name="catalog_system_trial_gte_0"),
            _empty_or("minimum_gpu_hours", gte=0, name="catalog_system_minimum_gte_0"),
            _empty_or("price_per_gpu_hour", gte=0, name="catalog_system_price_gte_0"),
            _empty_or("currency_value_per_unit", gt=0, name="catalog_system_currency_value_gt_0"),
            models.CheckConstraint(
                condition=Q(currency_value_per_unit__isnull=True, currency_value_currency="")
                | (
                    Q(currency_value_per_unit__isnull=False)
                    & ~Q(currency="")
                    & ~Q(currency_value_currency="")
                    & ~Q(currency_value_currency=F("currency"))
                ),
                name="catalog_system_currency_value_complete",
                violation_error_message="A currency value needs both the value and its "
                "currency, the system's own currency, and a currency other than that one.",
            ),
            models.CheckConstraint(
                condition=Q(typical_queue_wait_hours__isnull=True)
                | Q(typical_queue_wait_hours__gte=0),
                name="catalog_system_wait_gte_0",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=SystemKind.values), name="catalog_system_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=SystemStatus.values), name="catalog_system_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.display_name

    @property
    def is_retired(self) -> bool:
        return self.status == SystemStatus.RETIRED


IntraNodeInterconnect = text_choices(
    "IntraNodeInterconnect", catalog_schema.INTRA_NODE_INTERCONNECT_LABELS
)
InterNodeInterconnect = text_choices(
    "InterNodeInterconnect", catalog_schema.INTER_NODE_INTERCONNECT_LABELS
)


class NodeType(models.Model):
    """A kind of node in a system (for a cloud system: one VM size)."""

    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="node_types")
    name = models.CharField(max_length=100)
    count = models.PositiveIntegerField(help_text="Nodes of this type; 0 on a cloud = on demand.")
    gpus_per_node = models.PositiveIntegerField()
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.PROTECT, related_name="node_types"
    )
    cpu_cores = models.PositiveIntegerField(null=True, blank=True)
    ram_gb = models.FloatField(null=True, blank=True)
    intra_node_interconnect = models.CharField(
        max_length=20, choices=IntraNodeInterconnect.choices, default=IntraNodeInterconnect.PCIE
    )
    inter_node_interconnect = models.CharField(
        max_length=20, choices=InterNodeInterconnect.choices, default=InterNodeInterconnect.NONE
    )
    inter_node_gbit_s = models.FloatField(null=True, blank=True)
    interconnect_note = models.CharField(max_length=300, blank=True)
    price_per_gpu_hour = models.FloatField(null=True, blank=True)
    status = models.CharField(
        max_length=20, choices=SystemStatus.choices, default=SystemStatus.ACTIVE
    )
    retired_on = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=300)

    objects = CatalogManager()

    class Meta:
        ordering = ["system", "name"]
        constraints = [
            models.UniqueConstraint(fields=["system", "name"], name="catalog_nodetype_unique"),
            models.CheckConstraint(
                condition=Q(gpus_per_node__gte=0), name="catalog_nodetype_gpus_gte_0"
            ),
            models.CheckConstraint(condition=Q(count__gte=0), name="catalog_nodetype_count_gte_0"),
            _empty_or("ram_gb", gt=0, name="catalog_nodetype_ram_gt_0"),
            _empty_or("price_per_gpu_hour", gte=0, name="catalog_nodetype_price_gte_0"),
        ]

    def __str__(self) -> str:
        return f"{self.system.name}: {self.name}"


class Partition(models.Model):
    """A way to run on some node types: a Slurm partition, or a constraint within one."""

    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(max_length=100, help_text="Catalog key, unique within the system.")
    slurm_partition = models.CharField(
        max_length=100, blank=True, help_text="--partition value; empty: the system default."
    )
    node_types = models.ManyToManyField(NodeType, related_name="partitions")
    max_wall_hours = models.FloatField(null=True, blank=True)
    max_gpus_per_job = models.PositiveIntegerField(null=True, blank=True)
    max_nodes_per_job = models.PositiveIntegerField(null=True, blank=True)
    gpu_request = models.CharField(
        max_length=200, default="--gres=gpu:{n}", help_text="How to ask for {n} GPUs."
    )
    constraint = models.CharField(max_length=200, blank=True)
    qos = models.CharField(max_length=100, blank=True)
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=300)

    objects = CatalogManager()

    class Meta:
        ordering = ["system", "name"]
        constraints = [
            models.UniqueConstraint(fields=["system", "name"], name="catalog_partition_unique"),
            _empty_or("max_wall_hours", gt=0, name="catalog_partition_wall_gt_0"),
        ]

    def __str__(self) -> str:
        return f"{self.system.name}: {self.name}"


class Tool(models.Model):
    name = models.CharField(max_length=100, unique=True)
    position = models.PositiveIntegerField(default=0, help_text="Row order in the matrix.")

    objects = CatalogManager()

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name


class ToolingSupport(models.Model):
    """One cell of the tooling matrix. supported=None means unknown, never 'unsupported'."""

    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="tooling")
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="support")
    supported = models.BooleanField(null=True, blank=True)
    source = models.CharField(max_length=300)

    objects = CatalogManager()

    class Meta:
        ordering = ["system", "tool"]
        constraints = [
            models.UniqueConstraint(fields=["system", "tool"], name="catalog_tooling_unique")
        ]

    def __str__(self) -> str:
        word = {True: "yes", False: "no", None: "unknown"}[self.supported]
        return f"{self.system.name} / {self.tool.name}: {word}"


BenchmarkTask = text_choices("BenchmarkTask", catalog_schema.TASK_LABELS)
BenchmarkPrecision = text_choices("BenchmarkPrecision", catalog_schema.PRECISION_LABELS)
BenchmarkOutcome = text_choices("BenchmarkOutcome", catalog_schema.BENCHMARK_OUTCOME_LABELS)


class BenchmarkSourceKind(models.TextChoices):
    PUBLISHED = "published", "Published measurement"
    INSTITUTE_RUN = "institute_run", "The institute's own run"


class Benchmark(models.Model):
    """A measured run on an accelerator (optionally on a given system), used for calibration.

    Published rows come from the catalog's data file; institute-run rows are trial-run
    measurements staff accepted, and a catalog reload keeps them. `source_reference` names
    the measurement as plain text ("allocation-request:<id>/measurement:<id>"): the catalog
    imports nothing from the apps that make such rows.

    A benchmark without a profile is shared by every profile (catalog/data/shared/benchmarks.json,
    `manage.py load_benchmarks`): a GPU's speed does not depend on the institute.
    """

    profile = models.ForeignKey(
        Profile,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="benchmarks",
        help_text="Empty: shared by every profile.",
    )
    name = models.SlugField(max_length=100, unique=True)
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.PROTECT, related_name="benchmarks"
    )
    system = models.ForeignKey(
        System, null=True, blank=True, on_delete=models.CASCADE, related_name="benchmarks"
    )
    model = models.CharField(max_length=200)
    params = models.BigIntegerField(null=True, blank=True)
    task = models.CharField(max_length=20, blank=True, choices=BenchmarkTask.choices)
    strategy = models.CharField(max_length=30, blank=True)
    precision = models.CharField(max_length=10, blank=True, choices=BenchmarkPrecision.choices)
    num_gpus = models.PositiveIntegerField(default=1)
    batch_size = models.PositiveIntegerField(null=True, blank=True)
    seq_len = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_second = models.FloatField(null=True, blank=True)
    peak_memory_gb = models.FloatField(null=True, blank=True)
    mfu = models.FloatField(null=True, blank=True)
    hidden_size = models.PositiveIntegerField(null=True, blank=True)
    num_layers = models.PositiveIntegerField(null=True, blank=True)
    gradient_checkpointing = models.BooleanField(null=True, blank=True)
    vocab_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="The model's vocabulary (entries of its LM head)."
    )
    fused_loss = models.BooleanField(
        null=True,
        blank=True,
        help_text="Whether the run's loss was fused (flash-attention's or Liger's "
        "cross-entropy, Unsloth): an unfused loss's traffic over the logits is part of its "
        "speed. Unknown is read as fused.",
    )
    outcome = models.CharField(
        max_length=20, choices=BenchmarkOutcome.choices, default=BenchmarkOutcome.COMPLETED
    )
    notes = models.TextField(blank=True)
    source = models.CharField(max_length=300)
    source_kind = models.CharField(
        max_length=20, choices=BenchmarkSourceKind.choices, default=BenchmarkSourceKind.PUBLISHED
    )
    source_reference = models.CharField(max_length=200, blank=True)

    objects = CatalogManager()

    class Meta:
        ordering = ["accelerator", "model", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(num_gpus__gte=1), name="catalog_bench_gpus_gte_1"),
            _empty_or("tokens_per_second", gt=0, name="catalog_bench_tps_gt_0"),
            models.CheckConstraint(
                condition=Q(mfu__isnull=True) | (Q(mfu__gt=0) & Q(mfu__lte=1)),
                name="catalog_bench_mfu_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ChargeRate(models.Model):
    """What the institute counts per GPU hour on an accelerator, for the profile's HPC systems
    that have no price of their own. The data file gives defaults (catalog/data/README.md,
    "Charge rates"); staff change them here. Without one the charge is "unknown", never 0."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="charge_rates")
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.CASCADE, related_name="charge_rates"
    )
    rate_per_gpu_hour = models.FloatField(help_text="In the profile's charge currency.")
    source = models.CharField(
        max_length=300, help_text="Where the rate comes from: a published charge, a decision."
    )
    as_of = models.DateField(
        null=True, blank=True, help_text="When the rate was set or its price was read."
    )

    objects = CatalogManager()

    class Meta:
        ordering = ["profile", "accelerator"]
        constraints = [
            models.UniqueConstraint(
                fields=["profile", "accelerator"], name="catalog_chargerate_unique"
            ),
            models.CheckConstraint(
                condition=Q(rate_per_gpu_hour__gte=0), name="catalog_chargerate_gte_0"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.profile.name}: {self.accelerator.name} {self.rate_per_gpu_hour:g}"
