"""The engine's error against the institute's own jobs, and the uncertainty recomputed from it.

Two kinds of evidence, both from this institute:
- trial runs: the GPU hours a measured throughput implies for the full run, against the
  estimate's compute GPU hours (allocations.trial_runs.measurement_compare);
- accounting: the GPU hours an approved request's jobs used (Slurm), once its period ended,
  against the hours the estimate asked for (requested_gpu_hours, contingency included, which
  is meant to cover restarts and evaluation).

Error = estimated / actual - 1: +20 % means the engine asked for a fifth more than was needed.
Each estimate states a GPU-hour range for its kind of work, where its error fell for 80 % of
published test points (advisor.engine.uncertainty; an accounting point's estimate includes the
contingency, which moves that range); the report counts the institute's points inside the range
stated for theirs. The recomputed figure is the 80th percentile of the absolute errors, the band
four estimates in five fall within.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import date

from django.utils import timezone

from advisor.engine import constants as engine_constants
from advisor.engine.uncertainty import FAMILY_OF_TASK, gpu_hours_range
from allocations.measurement_selectors import measurement_views
from allocations.models import AllocationRequest, Status
from allocations.usage_selectors import usage_rows_by_request

COVERAGE = 0.8  # the share of estimates the stated band should hold
MIN_POINTS = 5  # fewer than this and a percentile says nothing


@dataclass(frozen=True)
class CalibrationPoint:
    kind: str  # "trial run" | "accounting"
    task: str
    system: str
    accelerator: str
    estimated: float
    actual: float
    label: str

    @property
    def error(self) -> float:
        return self.estimated / self.actual - 1

    @property
    def error_text(self) -> str:
        return _pct(self.error)

    @property
    def stated_range(self) -> tuple[float, float]:
        """The errors between which the engine said this estimate would fall: the range its
        kind of work's test points give the compute GPU hours, moved by the contingency where
        the estimate is the requested hours (accounting)."""
        under, over = gpu_hours_range(self.task)
        if self.kind == "accounting":
            kept = 1 + engine_constants.CONTINGENCY.value
            under, over = kept * (1 + under) - 1, kept * (1 + over) - 1
        return under, over

    @property
    def within_stated(self) -> bool:
        under, over = self.stated_range
        return under <= self.error <= over


@dataclass(frozen=True)
class ErrorSummary:
    task: str
    system: str
    n: int
    median_error: float
    median_abs_error: float
    p80_abs_error: float | None  # None with fewer than MIN_POINTS

    @property
    def texts(self) -> tuple[str, str, str]:
        """Median error, median absolute error, 80th percentile, as the pages print them."""
        return (
            _pct(self.median_error),
            _abs_pct(self.median_abs_error),
            _abs_pct(self.p80_abs_error),
        )


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least q of the values at or below)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def summarise(points: list[CalibrationPoint], *, task: str, system: str) -> ErrorSummary:
    errors = [p.error for p in points]
    absolute = [abs(e) for e in errors]
    return ErrorSummary(
        task=task,
        system=system,
        n=len(points),
        median_error=statistics.median(errors),
        median_abs_error=statistics.median(absolute),
        p80_abs_error=_percentile(absolute, COVERAGE) if len(points) >= MIN_POINTS else None,
    )


@dataclass(frozen=True)
class CalibrationReport:
    points: list[CalibrationPoint]
    groups: list[ErrorSummary]
    overall: ErrorSummary | None
    recomputed_margin: float | None
    within_stated: float | None  # share of points inside the range stated for theirs

    @property
    def verdict(self) -> str:
        if not self.points:
            return (
                "No institute evidence yet: upload trial-run measurements and import Slurm "
                "accounting, and this page fills in."
            )
        inside = (
            f"{self.within_stated:.0%} of the points fall inside the range the engine states "
            "for their kind of work"
        )
        if self.recomputed_margin is None:
            return (
                f"{len(self.points)} point(s): too few (under {MIN_POINTS}) to recompute the "
                f"uncertainty; the engine keeps its stated ranges ({inside})."
            )
        return (
            f"On the institute's own {len(self.points)} jobs and trial runs, four estimates in "
            f"five fall within ±{self.recomputed_margin:.0%} of what was used; {inside}."
        )


def calibration_report(points: list[CalibrationPoint]) -> CalibrationReport:
    grouped: dict[tuple[str, str], list[CalibrationPoint]] = {}
    for point in points:
        grouped.setdefault((point.task, point.system), []).append(point)
    groups = [summarise(g, task=t, system=s) for (t, s), g in sorted(grouped.items())]
    overall = summarise(points, task="all", system="all") if points else None
    within = sum(1 for p in points if p.within_stated) / len(points) if points else None
    return CalibrationReport(
        points=points,
        groups=groups,
        overall=overall,
        recomputed_margin=overall.p80_abs_error if overall else None,
        within_stated=within,
    )


# --- The points, from the database --------------------------------------------------------------


def calibration_points(*, today: date | None = None) -> list[CalibrationPoint]:
    today = today or timezone.localdate()
    points: list[CalibrationPoint] = []
    requests = AllocationRequest.objects.exclude(
        status__in=(Status.REJECTED, Status.WITHDRAWN)
    ).filter(measurements__gpu_present=True, measurements__review__in=("pending", "accepted"))
    for allocation_request in requests.distinct().select_related("system"):
        task = ((allocation_request.estimate_snapshot or {}).get("request") or {}).get("task")
        for view in measurement_views(allocation_request=allocation_request):
            c = view.comparison
            if view.measurement.review == "rejected" or not c.gpu_present:
                continue
            if not (c.measured_compute_gpu_hours and c.estimated_compute_gpu_hours):
                continue
            points.append(
                CalibrationPoint(
                    kind="trial run",
                    task=task or view.measurement.task,
                    system=allocation_request.facility_label or "—",
                    accelerator=view.measurement.accelerator or c.measured_device,
                    estimated=c.estimated_compute_gpu_hours,
                    actual=c.measured_compute_gpu_hours,
                    label=f"{allocation_request}: {view.measurement}",
                )
            )
    for row in usage_rows_by_request():
        r = row.allocation_request
        finished = r.end_date is not None and r.end_date < today
        if not finished or not row.used or not row.estimated:
            continue
        snapshot = r.estimate_snapshot or {}
        rec = (snapshot.get("result") or {}).get("recommendation") or {}
        points.append(
            CalibrationPoint(
                kind="accounting",
                task=(snapshot.get("request") or {}).get("task") or "—",
                system=row.system or "—",
                accelerator=rec.get("accelerator") or r.accelerator or "—",
                estimated=row.estimated,
                actual=row.used,
                label=f"{r}: {row.jobs} jobs",
            )
        )
    return points


# --- The docs page ------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.0%}".replace("%", " %")


def _abs_pct(value: float | None) -> str:
    return "too few" if value is None else f"{value:.0%}".replace("%", " %")


def calibration_markdown(report: CalibrationReport, *, generated_on: date) -> str:
    """docs/calibration.md: the same figures as the admin's calibration page."""
    lines = [
        "# Calibration against the institute's own jobs",
        "",
        "Generated by `python scripts/calibration_report.py` from the application's database "
        f"on {generated_on:%-d %B %Y}; do not edit by hand. The admin shows the same figures "
        "live (Usage records → Calibration).",
        "",
        "Error = estimated ÷ actual − 1: +20 % means the estimate asked for a fifth more GPU "
        "hours than were needed, −20 % a fifth fewer. Two kinds of evidence count:",
        "",
        "- **trial runs**: the compute GPU hours that a trial run's measured throughput implies "
        "for the whole run (its tokens ÷ measured tokens per second per GPU), against the "
        "estimate's compute GPU hours; measurements staff rejected are left out;",
        "- **accounting**: the GPU hours that an approved request's jobs used (Slurm `sacct`: "
        "allocated `gres/gpu` × elapsed), once its allocation period has ended, against the "
        "hours its estimate asked for (contingency included).",
        "",
        "Each estimate states the range its GPU hours' error fell in for 80 % of the published "
        "test points of its kind of work (`advisor/engine/uncertainty.json`, written by "
        f"`scripts/accuracy_report.py`): {_stated_ranges()}. An accounting point's estimate "
        f"includes the {engine_constants.CONTINGENCY.value:.0%} contingency, which moves its "
        "range by as much. The recomputed uncertainty is the 80th percentile of the absolute "
        f"errors (nearest rank), reported once there are at least {MIN_POINTS} points.",
        "",
        f"**{report.verdict}**",
        "",
    ]
    if not report.points:
        return "\n".join(lines)
    lines += [
        "## By task and system",
        "",
        "| Task | System | Points | Median error | Median abs. error | 80th pct. abs. error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for g in report.groups:
        lines.append(
            f"| {g.task} | {g.system} | {g.n} | {_pct(g.median_error)} | "
            f"{_abs_pct(g.median_abs_error)} | {_abs_pct(g.p80_abs_error)} |"
        )
    if report.overall:
        o = report.overall
        lines.append(
            f"| **all** | **all** | **{o.n}** | **{_pct(o.median_error)}** | "
            f"**{_abs_pct(o.median_abs_error)}** | **{_abs_pct(o.p80_abs_error)}** |"
        )
    lines += [
        "",
        "## Every point",
        "",
        "| Kind | Task | System | GPU | Estimated GPU hours | Actual | Error |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for p in report.points:
        lines.append(
            f"| {p.kind} | {p.task} | {_md(p.system)} | {_md(p.accelerator)} | "
            f"{p.estimated:,.0f} | {p.actual:,.0f} | {_pct(p.error)} |"
        )
    lines.append("")
    return "\n".join(lines)


def _stated_ranges() -> str:
    """The compute GPU-hour ranges the engine states, one per kind of work, in words."""
    said = {}
    for task, family in FAMILY_OF_TASK.items():
        under, over = gpu_hours_range(task)
        said.setdefault(family, f"{family} {_pct(under)} to {_pct(over)}")
    return ", ".join(said.values())


def _md(text: str) -> str:
    """Table-safe: a pipe or a line break in a name would break the row."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")
