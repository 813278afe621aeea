"""Validators of catalog fields that the admin and the data files share: each turns input the
database or the engine would refuse into a message that names what to change."""

from __future__ import annotations

from django.core.exceptions import ValidationError

import catalog_schema


def _holds_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def validate_json_has_no_nul(value) -> None:
    """PostgreSQL's jsonb refuses \\u0000, so a NUL typed into the admin would be a 500."""
    if _holds_nul(value):
        raise ValidationError("Remove the NUL character (\\u0000): it cannot be stored.")


TIE_BREAKERS = catalog_schema.DEFAULT_TIE_BREAKERS


def validate_tie_breakers(value) -> None:
    if not isinstance(value, list) or not all(v in TIE_BREAKERS for v in value):
        raise ValidationError(
            "Give a list of tie-breakers from: %(names)s.",
            params={"names": ", ".join(TIE_BREAKERS)},
        )
    if len(set(value)) != len(value):
        raise ValidationError("Name each tie-breaker once.")


def validate_sensitivity_levels(value) -> None:
    allowed = set(catalog_schema.DATA_SENSITIVITY_LABELS)
    if not isinstance(value, list) or not all(level in allowed for level in value):
        raise ValidationError(
            "Give a list of levels from: %(levels)s.",
            params={"levels": ", ".join(catalog_schema.DATA_SENSITIVITY_LABELS)},
        )
