"""Number formatting: catalog figures (thousands separators, no trailing zeros) and bytes.

`gigabytes` is the one way pages write a byte count: decimal GB, as GPU memory is sold
(80 GB = 80e9 bytes), with thousands separators. Python code imports it; templates use the
filter of the same name.
"""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def figure(value) -> str:
    """2039.0 -> "2,039"; 989.4 -> "989.4"; 0.125 -> "0.125"; None -> ""."""
    if value is None or value == "":
        return ""
    text = f"{float(value):,.3f}".rstrip("0").rstrip(".")
    return text


@register.filter
def gigabytes(value, places: int = 1) -> str:
    """80e9 -> "80.0 GB"; 1.234e12 -> "1,234.0 GB"; with places=2: "80.00 GB"; None -> ""."""
    if value is None or value == "":
        return ""
    return f"{float(value) / 1e9:,.{int(places)}f} GB"
