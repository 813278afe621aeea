"""A server-rendered SVG of memory per component against each candidate GPU's capacity.

Readable without colour: every component has its own fill pattern and a legend, each bar says
in words how much it needs against the capacity and whether it fits, and the page shows the
same numbers in a table beside the picture. This module works out the geometry; the markup is
one template (templates/advisor/_memory_chart.html), which escapes every text it shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from advisor.engine.memory import COMPONENT_LABELS
from catalog.templatetags.catalog_format import gigabytes

COMPONENTS = list(COMPONENT_LABELS.items())
TEMPLATE = "advisor/_memory_chart.html"

WIDTH = 720
LEFT = 10
BAR_HEIGHT = 26
ROW_HEIGHT = 74


@dataclass(frozen=True)
class MemoryBar:
    label: str  # "NVIDIA A100 80GB x 1 (Baskerville)"
    capacity_bytes: int | None
    components: dict[str, int]  # component -> bytes per GPU

    @property
    def total_bytes(self) -> int:
        return sum(self.components.values())

    @property
    def fits(self) -> bool | None:
        return None if not self.capacity_bytes else self.total_bytes <= self.capacity_bytes


def _n(value: float) -> str:
    return f"{value:.1f}"


def memory_chart(*, bars: list[MemoryBar], title: str = "Memory per GPU") -> dict | None:
    """What the chart template draws: rows of bar segments, capacity lines and a legend."""
    if not bars:
        return None
    used = [c for c, _ in COMPONENTS if any(bar.components.get(c) for bar in bars)]
    scale_max = max(max(bar.total_bytes, bar.capacity_bytes or 0) for bar in bars) or 1
    plot_width = WIDTH - 2 * LEFT
    labels = dict(COMPONENTS)

    def x(n_bytes: float) -> float:
        return LEFT + plot_width * n_bytes / scale_max

    rows = []
    y = 30
    for bar in bars:
        top = y + 8
        segments = []
        start = 0
        for component in used:
            size = bar.components.get(component, 0)
            if size <= 0:
                continue
            segments.append(
                {
                    "component": component,
                    "label": labels[component],
                    "size": gigabytes(size),
                    "x": _n(x(start)),
                    "width": _n(max(x(start + size) - x(start), 0.5)),
                }
            )
            start += size
        rows.append(
            {
                "label": bar.label,
                # A label longer than the plot (long system and GPU names) is squeezed to fit
                # rather than cut off; 8 units is a bold 14 px character, on average.
                "squeeze": len(bar.label) * 8 > plot_width,
                "y": y,
                "top": top,
                "segments": segments,
                "capacity_x": _n(x(bar.capacity_bytes)) if bar.capacity_bytes else None,
                "line_top": top - 4,
                "line_bottom": top + BAR_HEIGHT + 4,
                "status_y": top + BAR_HEIGHT + 18,
                "status": _bar_status(bar),
            }
        )
        y += ROW_HEIGHT
    y += 4
    legend = []
    for index, component in enumerate(used):
        column, row = index % 3, index // 3
        lx, ly = LEFT + column * 236, y + row * 24
        legend.append(
            {
                "component": component,
                "label": labels[component],
                "x": lx,
                "y": ly,
                "text_x": lx + 24,
                "text_y": ly + 12,
            }
        )
    return {
        "title": title,
        "description": "; ".join(f"{bar.label} {_bar_status(bar)}" for bar in bars),
        "width": WIDTH,
        "height": 40 + ROW_HEIGHT * len(bars) + 24 * ((len(used) + 2) // 3) + 16,
        "left": LEFT,
        "plot_width": plot_width,
        "bar_height": BAR_HEIGHT,
        "components": used,
        "rows": rows,
        "legend": legend,
    }


def memory_chart_svg(*, bars: list[MemoryBar], title: str = "Memory per GPU") -> SafeString:
    """The chart's markup (empty without bars), from the one chart template."""
    chart = memory_chart(bars=bars, title=title)
    if chart is None:
        return SafeString("")
    return SafeString(render_to_string(TEMPLATE, {"chart": chart}).strip())


def _bar_status(bar: MemoryBar) -> str:
    if bar.fits is None:
        return f"needs {gigabytes(bar.total_bytes)}"
    verdict = "fits" if bar.fits else "does NOT fit"
    return (
        f"needs {gigabytes(bar.total_bytes)} of {gigabytes(bar.capacity_bytes or 0)}: {verdict} "
        "(dashed line: capacity)"
    )
