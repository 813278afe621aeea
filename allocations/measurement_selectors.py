"""Reads for trial-run measurements: what each one means beside the request's estimate."""

from __future__ import annotations

from dataclasses import dataclass

from allocations.models import AllocationRequest, TrialMeasurement
from allocations.trial_runs import (
    Comparison,
    TrialRunReport,
    accelerator_guess,
    measurement_compare,
)
from catalog.models import Accelerator


@dataclass(frozen=True)
class MeasurementView:
    measurement: TrialMeasurement
    report: TrialRunReport
    comparison: Comparison


def measurement_views(*, allocation_request: AllocationRequest) -> list[MeasurementView]:
    """Newest first; each with its comparison against the frozen estimate."""
    views = []
    for measurement in allocation_request.measurements.select_related("uploaded_by"):
        report = TrialRunReport.model_validate(measurement.report)
        views.append(
            MeasurementView(
                measurement=measurement,
                report=report,
                comparison=measurement_compare(
                    report=report,
                    snapshot=allocation_request.estimate_snapshot or {},
                    requested_gpu_hours=allocation_request.gpu_hours,
                ),
            )
        )
    return views


def accelerator_choices() -> list[tuple[str, str]]:
    return list(Accelerator.objects.order_by("display_name").values_list("name", "display_name"))


def measurement_accelerator_guess(measurement: TrialMeasurement) -> str:
    return accelerator_guess(measurement.device_name, accelerator_choices())
