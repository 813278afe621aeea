"""Template filters that turn catalog keys and raw numbers into what a person reads.

{{ "dawn"|system_name }} -> "Dawn (Cambridge, AI Research Resource)";
{{ "max1550-128"|accelerator_name }} -> "Intel Data Center GPU Max 1550 128GB (Ponte Vecchio)";
{{ 1300000000|parameters }} -> "1.3 billion parameters"; {{ "tensor_parallel"|strategy_name }}
-> "tensor parallel". CSV exports keep the keys; pages, the admin and e-mails use these.
"""

from __future__ import annotations

from django import template

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
