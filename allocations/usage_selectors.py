"""Reads for usage: GPU hours granted vs used vs estimated, per request and per system, with the
cumulative use over time that the admin's charts draw."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Count, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from allocations.models import AllocationRequest, Status, UsageRecord

UNDER_USE = 0.5  # used under half of the grant: listed first, with over-use


def _estimated_hours(allocation_request: AllocationRequest) -> float | None:
    result = (allocation_request.estimate_snapshot or {}).get("result") or {}
    hours = (result.get("recommendation") or {}).get("requested_gpu_hours")
    return float(hours) if isinstance(hours, int | float) else None


@dataclass
class UsageRow:
    allocation_request: AllocationRequest | None
    label: str
    system: str
    granted: float
    used: float
    estimated: float | None
    jobs: int
    period_start: date | None = None
    period_end: date | None = None
    # GPU hours of each job at the moment it ended (or started, while it runs).
    events: list[tuple[datetime, float]] = field(default_factory=list)

    @property
    def series(self) -> list[tuple[datetime, float]]:
        """Cumulative GPU hours used, in time order."""
        total, points = 0.0, []
        for moment, hours in sorted(self.events, key=lambda e: e[0]):
            total += hours
            points.append((moment, total))
        return points

    @property
    def used_fraction(self) -> float | None:
        return self.used / self.granted if self.granted else None

    @property
    def flag(self) -> str:
        fraction = self.used_fraction
        if fraction is None:
            return ""
        if fraction > 1:
            return "over"
        if fraction < UNDER_USE:
            return "under"
        return ""

    @property
    def flag_words(self) -> str:
        return {
            "over": "used more than granted",
            "under": "used under half of the grant",
        }.get(self.flag, "")

    @property
    def period_elapsed(self) -> float | None:
        if not (self.period_start and self.period_end):
            return None
        total = (self.period_end - self.period_start).days or 1
        done = (timezone.localdate() - self.period_start).days
        return min(max(done / total, 0.0), 1.0)

    @property
    def estimate_error(self) -> float | None:
        """Estimated / used - 1: positive when the estimate asked for more than was used."""
        if not self.estimated or not self.used:
            return None
        return self.estimated / self.used - 1


def usage_rows_by_request(*, system: str | None = None) -> list[UsageRow]:
    """Approved requests (with a Slurm account or matched jobs), flagged ones first."""
    requests = AllocationRequest.objects.filter(status=Status.APPROVED).select_related("system")
    if system:
        requests = requests.filter(facility=system)
    requests = list(requests.order_by("-decided_at"))
    events_by_request: dict = {}
    # Plain tuples, not model instances: a busy year is tens of thousands of jobs.
    for request_id, moment, hours in (
        UsageRecord.objects.filter(allocation_request__in=requests)
        .annotate(moment=Coalesce("end", "start"))
        .values_list("allocation_request_id", "moment", "gpu_hours")
    ):
        events_by_request.setdefault(request_id, []).append((moment, hours))
    rows = []
    for r in requests:
        events = events_by_request.get(r.pk, [])
        rows.append(
            UsageRow(
                allocation_request=r,
                label=str(r),
                system=r.facility_label,
                granted=float(r.granted_gpu_hours or 0),
                used=sum(hours for _, hours in events),
                estimated=_estimated_hours(r),
                jobs=len(events),
                period_start=r.start_date,
                period_end=r.end_date,
                events=events,
            )
        )
    order = {"over": 0, "under": 1, "": 2}
    rows.sort(key=lambda row: (order[row.flag], row.label.lower()))
    return rows


def usage_rows_by_system(request_rows: list[UsageRow] | None = None) -> list[UsageRow]:
    """One row per facility: the sums over its approved requests, and its use over time."""
    rows: dict[str, UsageRow] = {}
    for row in usage_rows_by_request() if request_rows is None else request_rows:
        key = row.system or "(no facility)"
        agg = rows.setdefault(
            key,
            UsageRow(
                allocation_request=None,
                label=key,
                system=key,
                granted=0,
                used=0,
                estimated=0,
                jobs=0,
            ),
        )
        agg.granted += row.granted
        agg.used += row.used
        agg.estimated = (agg.estimated or 0) + (row.estimated or 0)
        agg.jobs += row.jobs
        agg.events.extend(row.events)
        for attr, pick in (("period_start", min), ("period_end", max)):
            values = [v for v in (getattr(agg, attr), getattr(row, attr)) if v]
            setattr(agg, attr, pick(values) if values else None)
    order = {"over": 0, "under": 1, "": 2}
    return sorted(rows.values(), key=lambda row: (order[row.flag], row.label.lower()))


def unmatched_usage() -> list[dict]:
    """Accounts with imported jobs that match no approved request: a missing account on an
    approval, or use outside a grant's dates."""
    return list(
        UsageRecord.objects.filter(allocation_request__isnull=True)
        .values("account", "cluster")
        .annotate(jobs=Count("id"), gpu_hours=Sum("gpu_hours"))
        .order_by("-gpu_hours")
    )


# --- The chart: server-rendered SVG, no scripts ------------------------------------------------

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 40, 16, 36


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exponent:
            return step * exponent
    return 10 * exponent


def usage_chart(row: UsageRow) -> dict | None:
    """Coordinates for the chart: cumulative GPU hours used against time, with the grant and the
    estimate as horizontal lines. None when there is nothing to draw."""
    series = row.series
    if not series and not row.granted:
        return None
    now = timezone.now()
    moments = [m for m, _ in series]
    starts = list(moments)
    if row.period_start:
        starts.append(timezone.make_aware(datetime.combine(row.period_start, datetime.min.time())))
    ends = list(moments)
    if row.period_end:
        ends.append(timezone.make_aware(datetime.combine(row.period_end, datetime.min.time())))
    if not starts:
        starts = [now - timedelta(days=30)]
    if not ends:
        ends = [now]
    x0, x1 = min(starts), max(ends)
    if x1 <= x0:
        x1 = x0 + timedelta(days=1)
    top_value = max([row.granted, row.estimated or 0, row.used, 1.0])
    y_max = _nice_max(top_value * 1.05)
    span = (x1 - x0).total_seconds()
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(moment: datetime) -> float:
        return round(LEFT + plot_w * (moment - x0).total_seconds() / span, 1)

    def y(value: float) -> float:
        return round(TOP + plot_h * (1 - value / y_max), 1)

    points = [(x(x0), y(0))]
    for moment, total in series:
        px, py = x(moment), y(total)
        if px - points[-1][0] < 1 and len(points) > 1:
            points[-1] = (points[-1][0], py)  # same pixel column: keep the latest total
            continue
        points.append((px, points[-1][1]))  # a step: flat until the job ends
        points.append((px, py))
    if series:
        points.append((x(min(max(now, x0), x1)), points[-1][1]))
    ticks = [{"y": y(y_max * i / 4), "label": f"{y_max * i / 4:,.0f}"} for i in range(5)]
    x_ticks = [
        {
            "x": x(x0 + (x1 - x0) * i / 4),
            "label": timezone.localtime(x0 + (x1 - x0) * i / 4).strftime("%-d %b %Y"),
        }
        for i in range(5)
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "used_points": " ".join(f"{px},{py}" for px, py in points),
        "granted_y": y(row.granted) if row.granted else None,
        "estimated_y": y(row.estimated) if row.estimated else None,
        "y_ticks": ticks,
        "x_ticks": x_ticks,
        "summary": (
            f"{row.label}: {row.used:,.0f} GPU hours used of {row.granted:,.0f} granted"
            + (f" ({row.estimated:,.0f} estimated)" if row.estimated else "")
        ),
    }


def usage_for_request(*, allocation_request: AllocationRequest) -> dict | None:
    """What the researcher sees of their own use: GPU hours used so far against the grant."""
    if allocation_request.status != Status.APPROVED or not allocation_request.slurm_account:
        return None
    records = UsageRecord.objects.filter(allocation_request=allocation_request)
    totals = records.aggregate(used=Sum("gpu_hours"), jobs=Count("id"))
    last = (
        UsageRecord.objects.filter(account=allocation_request.slurm_account)
        .order_by("-usage_import__imported_at")
        .values_list("usage_import__imported_at", flat=True)
        .first()
    )
    granted = allocation_request.granted_gpu_hours or 0
    used = totals["used"] or 0.0
    return {
        "account": allocation_request.slurm_account,
        "used": used,
        "jobs": totals["jobs"],
        "granted": granted,
        "percent": round(100 * used / granted) if granted else None,
        "as_of": last,
    }
