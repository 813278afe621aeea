"""Dates for tests, always relative to today: a literal such as 2027-06-30 is in the future when a
test is written and in the past a few months later, when the flow and the request form refuse it."""

from __future__ import annotations

from datetime import date, timedelta

from django.utils import timezone


def days_from_today(days: int) -> date:
    return timezone.localdate() + timedelta(days=days)


def iso_days_from_today(days: int) -> str:
    return days_from_today(days).isoformat()


def spoken(value: date) -> str:
    """A date as the pages and messages write it: 31 March 2027."""
    return f"{value.day} {value:%B %Y}"
