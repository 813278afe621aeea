from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KT


class AdvisorSession(models.Model):
    """One researcher's walk through the flowchart, and the estimate it produced.

    The UUID is the resume link's secret: anyone holding it may continue the session, so it is
    random and never sequential.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="advisor_sessions",
    )
    chart = models.CharField(max_length=100, help_text="Key of the flowchart definition used.")
    answers = models.JSONField(default=dict, blank=True)
    current_step = models.CharField(max_length=100, blank=True)
    estimate_request = models.JSONField(null=True, blank=True)
    estimate_result = models.JSONField(null=True, blank=True)
    # The stored estimate's error message, kept by the database beside it: a cached page asks
    # only whether the estimate failed, and reading it out of the JSON makes PostgreSQL
    # decompress the whole estimate (tens of kB) on every page view.
    estimate_error = models.GeneratedField(
        expression=KT("estimate_result__error"),
        output_field=models.TextField(null=True),
        db_persist=True,
    )
    # The project's GPU hours around the estimated run (advisor.project_plan.ProjectPlan).
    project_plan = models.JSONField(null=True, blank=True)
    engine_version = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"Advisor session {self.id} ({self.chart})"


class HfModelLookup(models.Model):
    """What the Hub said about one model at one revision, fetched in the background.

    One row per (canonical repo id, revision): every researcher who names the model shares it,
    so the Hub is asked once. `requested_id` keeps what was typed (`gpt2`) while `repo_id`
    becomes the Hub's canonical id (`openai-community/gpt2`) once known.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting to start"
        RUNNING = "running", "Asking the Hub"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # The page's address: random, so a lookup page cannot be found by counting (ids 1, 2, 3...
    # would show which private or gated models researchers typed).
    token = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    repo_id = models.CharField(max_length=200)
    requested_id = models.CharField(max_length=200)
    revision = models.CharField(max_length=200, default="main")
    sha = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error_kind = models.CharField(max_length=40, blank=True)
    message = models.TextField(blank=True, help_text="Shown to the researcher.")
    suggestions = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    # When the broker last took the lookup task; unset while it waits for the broker (the outbox
    # sweep sends it once the broker is back: config/outbox.py).
    queued_at = models.DateTimeField(null=True, blank=True)
    fetched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["repo_id", "revision"], name="hf_model_lookup_unique_repo_revision"
            ),
        ]
        indexes = [models.Index(fields=["requested_id", "revision"])]

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision} ({self.status})"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("advisor:lookup-detail", kwargs={"token": self.token})

    @property
    def in_flight(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def waiting_for_broker(self) -> bool:
        """Pending, and the task queue has not taken the lookup yet (it is down)."""
        return self.status == self.Status.PENDING and self.queued_at is None

    @property
    def model_url(self) -> str:
        return f"{settings.HF_ENDPOINT}/{self.repo_id}"

    @property
    def dtype_rows(self) -> list[dict]:
        """Stored tensor elements and bytes per dtype, largest first, for the summary card."""
        data = self.metadata or {}
        counts = data.get("safetensors_parameters") or {}
        sizes = data.get("bytes_per_dtype") or {}
        rows = [
            {"dtype": dtype, "count": count, "bytes": sizes.get(dtype)}
            for dtype, count in counts.items()
        ]
        return sorted(rows, key=lambda row: -row["count"])

    @property
    def weights_bytes(self) -> int | None:
        sizes = (self.metadata or {}).get("bytes_per_dtype") or {}
        return sum(sizes.values()) if sizes else None

    def to_hub_metadata(self):
        """The engine's view of this lookup, or None while there is nothing to estimate from."""
        from advisor.engine.models import HubModelMetadata

        data = self.metadata or {}
        if not data:  # a refresh in progress or failed keeps serving the last answer
            return None
        return HubModelMetadata(
            repo_id=self.repo_id,
            sha=self.sha or None,
            safetensors_parameters=data.get("safetensors_parameters") or {},
            safetensors_total=data.get("safetensors_total"),
            quantization_config=data.get("quantization_config"),
            config=data.get("config"),
            pipeline_tag=data.get("pipeline_tag"),
            library_name=data.get("library_name"),
            license=data.get("license"),
            gated=data.get("gated") or False,
            params_total=data.get("params_total"),
            params_source=data.get("params_source") or "",
            file_sizes=data.get("files") or {},
        )


class ActiveFlowchart(models.Model):
    """Which flowchart researchers get: one row, chosen by staff in the admin."""

    chart = models.CharField(
        max_length=100,
        default="default",
        help_text="The flowchart definition (a file in advisor/flowcharts/) new sessions use.",
    )
    changed_at = models.DateTimeField(auto_now=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name = "active flowchart"
        verbose_name_plural = "active flowchart"

    def __str__(self) -> str:
        return f"Active flowchart: {self.chart}"


class StaffModelConfig(models.Model):
    """A config.json staff added, so a lookup of this model works when the Hub does not answer.

    Looked up before the bundled configs (advisor/model_configs), case-insensitively by repo id.
    The admin validates the upload (a JSON object, a family the engine counts, real-model
    bounds) and stores the engine's count with it.
    """

    repo_id = models.CharField(max_length=200, unique=True, help_text="e.g. acme/our-model-7b")
    config = models.JSONField(help_text="The model's config.json.")
    model_type = models.CharField(max_length=100, editable=False)
    params_total = models.BigIntegerField(editable=False)
    source = models.CharField(
        max_length=300,
        blank=True,
        help_text="Where the file comes from (a URL, a colleague, the model's authors).",
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["repo_id"]
        verbose_name = "model config.json"
        verbose_name_plural = "model config.json files"

    def __str__(self) -> str:
        return self.repo_id
