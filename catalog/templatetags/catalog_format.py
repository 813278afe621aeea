"""Number formatting for the catalog pages: thousands separators, no trailing zeros."""

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
