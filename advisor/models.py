from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


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
    engine_version = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"Advisor session {self.id} ({self.chart})"


class ActiveFlowchart(models.Model):
    """Which flowchart researchers get: one row, chosen by staff in the admin."""

    chart = models.CharField(
        max_length=100,
        default="default",
        help_text="The flowchart definition (a file in advisor/flowcharts/) new sessions use.",
    )
    changed_at = models.DateTimeField(auto_now=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name = "active flowchart"
        verbose_name_plural = "active flowchart"

    def __str__(self) -> str:
        return f"Active flowchart: {self.chart}"
