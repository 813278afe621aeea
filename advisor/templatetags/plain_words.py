"""Template filters that turn catalog keys and raw numbers into what a person reads.

{{ "dawn"|system_name }} -> "Dawn (Cambridge, AI Research Resource)";
{{ "max1550-128"|accelerator_name }} -> "Intel Data Center GPU Max 1550 128GB (Ponte Vecchio)";
{{ 1300000000|parameters }} -> "1.3 billion parameters"; {{ "tensor_parallel"|strategy_name }}
-> "tensor parallel"; {{ 0.0|hours_figure }} -> "under 0.01". CSV exports keep the keys;
pages, the admin and e-mails use these.
"""

from __future__ import annotations

from django import template
from django.template.defaultfilters import floatformat

from advisor.engine import words
from catalog.selectors import accelerator_display_name, system_display_name

register = template.Library()


@register.filter
def system_name(key) -> str:
    return system_display_name(key)


@register.filter
def accelerator_name(key) -> str:
    return accelerator_display_name(key)


@register.filter
def parameters(count) -> str:
    try:
        return words.parameters(int(count))
    except (TypeError, ValueError):
        return ""


@register.filter
def strategy_name(strategy) -> str:
    return words.STRATEGY_NAMES.get(str(strategy), str(strategy).replace("_", " "))


@register.filter
def hours_figure(value) -> str:
    """Hours as the result page shows them (two decimals at most, thousands grouped), where a
    figure the engine rounded to 0.00 reads "under 0.01": a tiny job is never "0 GPU hours"."""
    if value in (None, ""):
        return ""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    if number <= 0:
        return "under 0.01"
    return floatformat(number, "-2g")
