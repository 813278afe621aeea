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


class Service(models.TextChoices):
    HPC = "hpc", _("HPC")
    AZURE = "azure", _("Azure")
    LOCAL = "local", _("Local cluster")


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
            "be made up to 2025-03-31 (seed 001)."
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
