"""Allocation requests, the review trail, and the e-mails the trail sends.

The fields follow the institute's request form (seed 001, transcribed in
../shared/catalog-facts.md section 4). The estimate the researcher saw is frozen into the
request, so reviewers judge exactly that and not whatever the engine says today.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from catalog.models import DataSensitivity
from catalog_schema import PRECISION_LABELS, TASK_LABELS


class Status(models.TextChoices):
    DRAFT = "draft", _("Draft")
    SUBMITTED = "submitted", _("Submitted")
    CHANGES_REQUESTED = "changes_requested", _("Changes requested")
    RESUBMITTED = "resubmitted", _("Resubmitted")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Withdrawn")


# Waiting for staff: what the review queue shows first and what a researcher may withdraw.
PENDING_STATUSES = (Status.SUBMITTED, Status.RESUBMITTED)
# A request in one of these no longer holds its advisor result: a new request may be made from it.
CLOSED_STATUSES = (Status.REJECTED, Status.WITHDRAWN)
# The researcher may edit the fields only here.
EDITABLE_STATUSES = (Status.DRAFT, Status.CHANGES_REQUESTED)
RESEARCH_PURPOSE_MAX_CHARS = 1000


class Service(models.TextChoices):
    HPC = "hpc", _("HPC")
    AZURE = "azure", _("Azure")
    LOCAL = "local", _("Local cluster")
    # Sensitive data: the Turing's allocation flowchart points to Trusted Research Environments.
    SECURE = "secure", _("Trusted Research Environment")


class AllocationKind(models.TextChoices):
    NEW = "new", _("New")
    EXISTING = "existing", _("Existing")


class AllocationRequestQuerySet(models.QuerySet):
    def for_researcher(self, user) -> AllocationRequestQuerySet:
        return self.filter(researcher=user)

    def pending(self) -> AllocationRequestQuerySet:
        return self.filter(status__in=PENDING_STATUSES)


class AllocationRequest(models.Model):
    # The UUID is the only id that reaches a URL, so ids cannot be guessed or enumerated.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    researcher = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="allocation_requests"
    )
    advisor_session = models.ForeignKey(
        "advisor.AdvisorSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allocation_requests",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)

    # Caller
    caller_name = models.CharField(_("name"), max_length=200, blank=True)
    caller_branch = models.CharField(_("branch"), max_length=200, blank=True)
    # Project
    project_title = models.CharField(_("project title"), max_length=200, blank=True)
    project_code = models.CharField(_("project code"), max_length=50, blank=True)
    research_area = models.CharField(_("research area or programme"), max_length=200, blank=True)
    pi_name = models.CharField(_("PI/supervisor name"), max_length=200, blank=True)
    pi_email = models.EmailField(_("PI/supervisor email"), blank=True)
    # The one place the research purpose is kept: the justification staff read opens with it
    # (justification_for_review), and the researcher's next request is pre-filled from it.
    research_purpose = models.TextField(
        _("what is the research for?"),
        max_length=RESEARCH_PURPOSE_MAX_CHARS,
        blank=True,
        help_text=_(
            "One or two sentences a reviewer outside your field understands: the question the "
            "work answers and what it is for."
        ),
    )
    # Service
    service = models.CharField(_("service"), max_length=20, choices=Service.choices, blank=True)
    facility = models.CharField(
        _("facility"), max_length=100, blank=True, help_text=_("Catalog system key.")
    )
    # The catalog row behind `facility`. A catalog reload may remove a system; the request then
    # keeps its facility name (the record) and loses only this link.
    system = models.ForeignKey(
        "catalog.System",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allocation_requests",
        editable=False,
    )
    allocation_kind = models.CharField(
        _("new or existing allocation"),
        max_length=10,
        choices=AllocationKind.choices,
        default=AllocationKind.NEW,
    )
    cpu_hours = models.IntegerField(_("CPU hours requested"), default=0)
    gpu_hours = models.IntegerField(_("GPU hours requested"), default=0)
    start_date = models.DateField(_("start date"), null=True, blank=True)
    end_date = models.DateField(_("end date"), null=True, blank=True)
    # Information
    data_sensitivity = models.CharField(
        _("data sensitivity"), max_length=20, choices=DataSensitivity.choices, blank=True
    )
    justification = models.TextField(_("platform justification"), blank=True)
    # What a secure environment asks beyond the institute's form (System.request_fields, e.g.
    # the Turing TRE's Data Protection Assessment reference and security tier), as it was
    # asked: [{"label": ..., "value": ...}] in the system's order.
    facility_fields = models.JSONField(
        _("secure environment details"), default=list, blank=True, editable=False
    )
    trial = models.BooleanField(
        _("trial access"), default=False, help_text=_("Light justification, capped hours.")
    )

    # What the advisor showed: request, engine version and the full result, as they were.
    estimate_snapshot = models.JSONField(default=dict, blank=True, editable=False)
    engine_version = models.CharField(max_length=40, blank=True, editable=False)
    # Copied from the estimate for the queue (no JSON digging per row).
    accelerator = models.CharField(max_length=100, blank=True, editable=False)
    num_gpus = models.PositiveIntegerField(null=True, blank=True, editable=False)

    granted_gpu_hours = models.IntegerField(null=True, blank=True, editable=False)
    # Set by staff on approval; the approval e-mail tells the researcher to charge jobs to it,
    # and imported Slurm accounting is matched to the request by it (allocations.usage).
    slurm_account = models.CharField(
        _("Slurm account"), max_length=100, blank=True, db_index=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True, editable=False, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = AllocationRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-created_at"]
        indexes = [models.Index(fields=["status", "-submitted_at"], name="alloc_status_submitted")]
        constraints = [
            models.CheckConstraint(
                condition=Q(cpu_hours__gte=0), name="alloc_cpu_hours_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(gpu_hours__gte=0), name="alloc_gpu_hours_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(granted_gpu_hours__isnull=True) | Q(granted_gpu_hours__gte=0),
                name="alloc_granted_hours_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(start_date__isnull=True)
                | Q(end_date__isnull=True)
                | Q(end_date__gt=models.F("start_date")),
                name="alloc_end_after_start",
            ),
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="alloc_status_valid"
            ),
            models.UniqueConstraint(
                fields=["advisor_session"],
                condition=Q(advisor_session__isnull=False) & ~Q(status__in=CLOSED_STATUSES),
                name="alloc_one_active_request_per_session",
                violation_error_message=_(
                    "This advisor result already has an active allocation request."
                ),
            ),
        ]

    def __str__(self) -> str:
        return self.project_title or f"Allocation request {self.id}"

    @property
    def facility_label(self) -> str:
        """The facility as people name it ("Baskerville"), or its key once the catalog lost it."""
        return self.system.display_name if self.system_id else self.facility

    @property
    def purpose_text(self) -> str:
        """The research purpose as asked, else what the project fields say about it."""
        purpose = self.research_purpose.strip()
        if purpose:
            return purpose
        if self.project_title and self.research_area:
            return f"Project: {self.project_title} ({self.research_area})."
        return f"Project: {self.project_title}." if self.project_title else ""

    @property
    def justification_for_review(self) -> str:
        """The justification as staff read it: the research purpose first, then the sizing."""
        parts = [p for p in (self.purpose_text, self.justification.strip()) if p]
        return "\n\n".join(parts)

    @property
    def is_editable(self) -> bool:
        return self.status in EDITABLE_STATUSES

    @property
    def is_withdrawable(self) -> bool:
        return self.status in (*PENDING_STATUSES, *EDITABLE_STATUSES)


class AllocationEvent(models.Model):
    """One transition: who moved the request from which status to which, and what they said."""

    allocation_request = models.ForeignKey(
        AllocationRequest, on_delete=models.CASCADE, related_name="events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    from_status = models.CharField(max_length=20, choices=Status.choices, blank=True)
    to_status = models.CharField(max_length=20, choices=Status.choices)
    message = models.TextField(blank=True, help_text=_("Shown to the researcher."))
    note = models.TextField(blank=True, help_text=_("Internal: staff only."))
    granted_gpu_hours = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_status or 'new'} → {self.to_status}"


class ServiceLimit(models.Model):
    """Per-service limits staff can change without a deploy (the Azure end date, for one)."""

    service = models.CharField(max_length=20, choices=Service.choices, unique=True)
    latest_end_date = models.DateField(
        null=True,
        blank=True,
        help_text=_(
            "Requests may not end after this date. The Turing form said Azure requests could "
            "be made up to 2025-03-31 (the Turing's request form)."
        ),
    )
    max_gpu_hours = models.PositiveIntegerField(null=True, blank=True)
    max_cpu_hours = models.PositiveIntegerField(null=True, blank=True)
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["service"]

    def __str__(self) -> str:
        return f"Limits for {self.get_service_display()}"


class Notification(models.Model):
    """An e-mail to send once: the row makes a redelivered task harmless."""

    class Kind(models.TextChoices):
        STAFF_SUBMITTED = "staff_submitted", _("Staff: request submitted")
        RESEARCHER_DECISION = "researcher_decision", _("Researcher: decision")

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        SENDING = "sending", _("Sending")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")

    event = models.ForeignKey(
        AllocationEvent, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=30, choices=Kind.choices)
    recipients = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # When the broker last took the send task; unset while it waits for the broker (the outbox
    # sweep sends it once the broker is back: config/outbox.py).
    queued_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["event", "kind"], name="notification_once_per_event"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.status})"


class MeasurementReview(models.TextChoices):
    PENDING = "pending", _("Waiting for staff")
    ACCEPTED = "accepted", _("Accepted into the catalog")
    REJECTED = "rejected", _("Not used for calibration")


class TrialMeasurement(models.Model):
    """A trial-run measurement file (allocations/helper/trial_run.py) attached to a request.

    `report` is the validated file as JSON; the columns beside it are copied out of it for the
    admin's list and for calibration. Accepting it makes a catalog benchmark (`benchmark_name`).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    allocation_request = models.ForeignKey(
        AllocationRequest, on_delete=models.CASCADE, related_name="measurements"
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)
    file_name = models.CharField(max_length=200, blank=True)
    report = models.JSONField()
    device_name = models.CharField(_("GPU reported"), max_length=200, blank=True)
    gpu_present = models.BooleanField(default=True)
    num_gpus = models.PositiveIntegerField(default=0)
    # Choices only name the values for people (admin lists and filters); the trial-run report's
    # own validation decides what is accepted.
    task = models.CharField(max_length=20, choices=list(TASK_LABELS.items()))
    precision = models.CharField(max_length=10, choices=list(PRECISION_LABELS.items()))
    micro_batch_size = models.PositiveIntegerField()
    seq_len = models.PositiveIntegerField()
    params = models.BigIntegerField(null=True, blank=True)
    tokens_per_second = models.FloatField(help_text=_("Steady rate of the whole job."))
    max_memory_allocated_bytes = models.BigIntegerField(null=True, blank=True)
    max_memory_reserved_bytes = models.BigIntegerField(null=True, blank=True)

    review = models.CharField(
        max_length=10, choices=MeasurementReview.choices, default=MeasurementReview.PENDING
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    accelerator = models.CharField(
        max_length=64, blank=True, help_text=_("Catalog accelerator key, set on acceptance.")
    )
    benchmark_name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-uploaded_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(tokens_per_second__gt=0), name="measurement_tps_gt_0"
            ),
            models.CheckConstraint(
                condition=Q(review__in=MeasurementReview.values), name="measurement_review_valid"
            ),
        ]

    def __str__(self) -> str:
        device = self.device_name or "CPU"
        return f"{self.tokens_per_second:,.0f} tokens/s on {self.num_gpus} × {device}"


class UsageFormat(models.TextChoices):
    SACCT_JSON = "sacct_json", _("sacct --json")
    SACCT_PIPE = "sacct_pipe", _("sacct -P (pipe-separated)")


class UsageImport(models.Model):
    """One accounting file imported: who, when, what it held."""

    file_name = models.CharField(max_length=200, blank=True)
    file_format = models.CharField(max_length=20, choices=UsageFormat.choices)
    slurm_release = models.CharField(max_length=40, blank=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    imported_at = models.DateTimeField(auto_now_add=True)
    jobs_read = models.PositiveIntegerField(default=0)
    jobs_new = models.PositiveIntegerField(default=0)
    jobs_updated = models.PositiveIntegerField(default=0)
    jobs_unchanged = models.PositiveIntegerField(default=0)
    jobs_matched = models.PositiveIntegerField(default=0)
    gpu_hours_new = models.FloatField(default=0)

    class Meta:
        ordering = ["-imported_at"]

    def __str__(self) -> str:
        return f"{self.file_name or 'accounting file'} ({self.imported_at:%Y-%m-%d %H:%M})"


class UsageRecord(models.Model):
    """One Slurm job from accounting, with the GPU hours it used (allocated GPUs x elapsed)."""

    cluster = models.CharField(max_length=100, blank=True)
    job_id = models.CharField(max_length=64, help_text=_("Slurm JobID (array and het ids kept)."))
    account = models.CharField(max_length=100, db_index=True)
    user = models.CharField(max_length=100, blank=True)
    partition = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=40, blank=True)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    elapsed_seconds = models.PositiveBigIntegerField()
    gpus = models.PositiveIntegerField(default=0)
    gpu_type = models.CharField(max_length=100, blank=True)
    gpu_hours = models.FloatField(default=0)
    allocation_request = models.ForeignKey(
        AllocationRequest,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="usage_records",
    )
    usage_import = models.ForeignKey(UsageImport, on_delete=models.PROTECT, related_name="records")

    class Meta:
        ordering = ["start", "job_id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "job_id"], name="usage_job_once"),
            models.CheckConstraint(condition=Q(gpu_hours__gte=0), name="usage_gpu_hours_gte_0"),
        ]
        indexes = [models.Index(fields=["allocation_request", "start"], name="usage_request_start")]

    def __str__(self) -> str:
        return f"job {self.job_id} ({self.account}): {self.gpu_hours:.1f} GPU hours"
