"""A server-rendered SVG of memory per component against each candidate GPU's capacity.

Readable without colour: every component has its own fill pattern and a legend, each bar says
in words how much it needs against the capacity and whether it fits, and the page shows the
same numbers in a table beside the picture.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from advisor.engine.memory import COMPONENT_LABELS

COMPONENTS = list(COMPONENT_LABELS.items())

# (pattern body, fill) per component: shapes differ, and so do the greys behind them.
_PATTERNS = {
    "weights": ('<rect width="8" height="8" fill="#1b4f8a"/>', None),
    "gradients": (
        '<rect width="8" height="8" fill="#e8eef6"/>'
        '<path d="M0 8L8 0" stroke="#1b4f8a" stroke-width="2"/>',
        None,
    ),
    "optimizer_states": (
        '<rect width="8" height="8" fill="#f3e9d2"/>'
        '<path d="M0 0L8 8M8 0L0 8" stroke="#7a4b00" stroke-width="1.5"/>',
        None,
    ),
    "activations": (
        '<rect width="8" height="8" fill="#e5f2e8"/><circle cx="4" cy="4" r="1.8" fill="#1a6b32"/>',
        None,
    ),
    "logits": (
        '<rect width="8" height="8" fill="#f6e3e5"/>'
        '<path d="M4 0V8" stroke="#8a1c2b" stroke-width="2"/>',
        None,
    ),
    "kv_cache": (
        '<rect width="8" height="8" fill="#ece6f5"/>'
        '<path d="M0 4H8" stroke="#4b2a7a" stroke-width="2"/>',
        None,
    ),
    "quantization": (
        '<rect width="8" height="8" fill="#fff"/>'
        '<rect width="4" height="4" fill="#555"/><rect x="4" y="4" width="4" '
        'height="4" fill="#555"/>',
        None,
    ),
    "cuda_context": ('<rect width="8" height="8" fill="#9aa4ae"/>', None),
    "allocator_reserve": (
        '<rect width="8" height="8" fill="#fff"/>'
        '<path d="M0 0L8 8" stroke="#57606a" stroke-width="1"/>',
        None,
    ),
}

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


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def memory_chart_svg(*, bars: list[MemoryBar], title: str = "Memory per GPU") -> SafeString:
    if not bars:
        return mark_safe("")  # noqa: S308 - constant
    used = [c for c, _ in COMPONENTS if any(bar.components.get(c) for bar in bars)]
    scale_max = max(max(bar.total_bytes, bar.capacity_bytes or 0) for bar in bars) or 1
    plot_width = WIDTH - 2 * LEFT
    legend_rows = (len(used) + 2) // 3
    height = 40 + ROW_HEIGHT * len(bars) + 24 * legend_rows + 16

    def x(n_bytes: float) -> float:
        return LEFT + plot_width * n_bytes / scale_max

    parts = [
        format_html(
            '<svg xmlns="http://www.w3.org/2000/svg" class="memory-chart" role="img" '
            'viewBox="0 0 {} {}" width="100%" aria-labelledby="memory-chart-title '
            'memory-chart-desc">',
            WIDTH,
            height,
        ),
        format_html('<title id="memory-chart-title">{}</title>', title),
        format_html(
            '<desc id="memory-chart-desc">{}</desc>',
            "; ".join(_bar_sentence(bar) for bar in bars),
        ),
        "<defs>",
    ]
    for component in used:
        body, _ = _PATTERNS[component]
        parts.append(
            f'<pattern id="mem-{component}" width="8" height="8" '
            f'patternUnits="userSpaceOnUse">{body}</pattern>'
        )
    parts.append("</defs>")
    y = 30
    for bar in bars:
        # A label longer than the plot (long system and GPU names) is squeezed to fit rather
        # than cut off at the drawing's edge; 8 units is a bold 14 px character, on average.
        fit = (
            format_html(' textLength="{}" lengthAdjust="spacingAndGlyphs"', plot_width)
            if len(bar.label) * 8 > plot_width
            else ""
        )
        parts.append(
            format_html(
                '<text x="{}" y="{}" font-size="14" font-weight="bold"{}>{}</text>',
                LEFT,
                y,
                fit,
                bar.label,
            )
        )
        top = y + 8
        parts.append(
            format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#57606a"/>',
                LEFT,
                top,
                plot_width,
                BAR_HEIGHT,
            )
        )
        start = 0
        for component in used:
            size = bar.components.get(component, 0)
            if size <= 0:
                continue
            parts.append(
                format_html(
                    '<rect x="{}" y="{}" width="{}" height="{}" fill="url(#mem-{})" '
                    'stroke="#1b1f24" stroke-width="0.5"><title>{}: {}</title></rect>',
                    _n(x(start)),
                    top,
                    _n(max(x(start + size) - x(start), 0.5)),
                    BAR_HEIGHT,
                    component,
                    dict(COMPONENTS)[component],
                    _gb(size),
                )
            )
            start += size
        if bar.capacity_bytes:
            cap_x = x(bar.capacity_bytes)
            parts.append(
                format_html(
                    '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#1b1f24" '
                    'stroke-width="3" stroke-dasharray="4 2"/>',
                    _n(cap_x),
                    _n(cap_x),
                    top - 4,
                    top + BAR_HEIGHT + 4,
                )
            )
        parts.append(
            format_html(
                '<text x="{}" y="{}" font-size="13">{}</text>',
                LEFT,
                top + BAR_HEIGHT + 18,
                _bar_status(bar),
            )
        )
        y += ROW_HEIGHT
    y += 4
    for index, component in enumerate(used):
        column, row = index % 3, index // 3
        lx, ly = LEFT + column * 236, y + row * 24
        parts.append(
            format_html(
                '<rect x="{}" y="{}" width="18" height="14" fill="url(#mem-{})" stroke="#1b1f24"/>'
                '<text x="{}" y="{}" font-size="13">{}</text>',
                lx,
                ly,
                component,
                lx + 24,
                ly + 12,
                dict(COMPONENTS)[component],
            )
        )
    parts.append("</svg>")
    return mark_safe("".join(str(p) for p in parts))  # noqa: S308 - every value escaped above


def _bar_status(bar: MemoryBar) -> str:
    if bar.fits is None:
        return f"needs {_gb(bar.total_bytes)}"
    verdict = "fits" if bar.fits else "does NOT fit"
    return (
        f"needs {_gb(bar.total_bytes)} of {_gb(bar.capacity_bytes or 0)}: {verdict} "
        "(dashed line: capacity)"
    )


def _bar_sentence(bar: MemoryBar) -> str:
    return f"{bar.label} {_bar_status(bar)}"  # escaped where it is placed
