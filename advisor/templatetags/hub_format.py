"""Short, honest numbers for the model summary card (decimal units, as the Hub shows them)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def count_short(value) -> str:
    """1235814400 -> "1.24 B"; 124439808 -> "124.4 M"."""
    if value is None or value == "":
        return "unknown"
    n = int(value)
    for size, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.3g} {unit}" if n < 100 * size else f"{n / size:.1f} {unit}"
    return str(n)


@register.filter
def bytes_short(value) -> str:
    """2471628800 -> "2.47 GB" (decimal gigabytes, as GPU memory is sold)."""
    if value is None or value == "":
        return "unknown"
    n = int(value)
    for size, unit in ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"
