"""Numbers as researchers type them: "8B", "7b", "125M", "1.3e9", "1,300,000,000".

Pure Python, shared by the flowchart's number questions and any form that asks for a count
(the allocation form, the lookup page). Suffixes follow the way model sizes are written in
model names and papers: K thousand, M million, B (or G) billion, T trillion, case-insensitive.
"""

from __future__ import annotations

import math
import re

SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_NUMBER = re.compile(
    r"""^\s*
    (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)
    \s*(?P<suffix>[kmbgt])?
    \s*(?:params?|parameters?)?\s*$""",
    re.IGNORECASE | re.VERBOSE,
)
# Thousands separators: "1,300,000,000", "1 300 000", "1_300_000" (only between groups of 3).
_GROUPED = re.compile(r"^\s*[+-]?\d{1,3}(?:[,_ ]\d{3})+(?:\.\d+)?")


class QuantityError(ValueError):
    """Text that is not a number; the message says what to type."""


def parse_quantity(text: str) -> tuple[float, bool]:
    """The number in `text` and whether a size suffix (K, M, B, T) gave its scale.

    >>> parse_quantity("8B")
    (8000000000.0, True)
    >>> parse_quantity("1,300,000,000")
    (1300000000.0, False)
    """
    raw = str(text).strip()
    grouped = _GROUPED.match(raw)
    if grouped:
        head = re.sub(r"[,_ ]", "", grouped.group(0))
        raw = head + raw[grouped.end() :]
    match = _NUMBER.match(raw)
    if not match:
        raise QuantityError("Enter a number, for example 8, 1.3e9, 125M or 8B.")
    value = float(match.group("number"))
    suffix = (match.group("suffix") or "").lower()
    if suffix:
        value *= SUFFIXES[suffix]
    if not math.isfinite(value):
        raise QuantityError("Enter a number, for example 8, 1.3e9, 125M or 8B.")
    return value, bool(suffix)


def parse_parameter_count(text: str) -> int:
    """A parameter count typed as "8B", "7b", "125M", "1.3e9" or "1,300,000,000".

    A plain number below 10,000 is read as billions ("7" is a 7B model: nobody trains a model
    of seven parameters); anything larger is a count.
    """
    value, suffixed = parse_quantity(text)
    if value <= 0:
        raise QuantityError("A model has more than zero parameters.")
    if not suffixed and value < 1e4:
        value *= 1e9
    if value < 1:
        raise QuantityError("A model has at least one parameter.")
    return round(value)


def in_units(
    value: float,
    suffixed: bool,
    *,
    scale: float,
    maximum: float | None,
    minimum: float | None = None,
) -> float:
    """A typed value in a question's unit (e.g. billions when scale is 1e9).

    A suffixed value ("125M") is absolute; so is a plain value too large to be in the unit
    ("1,300,000,000" where the question asks for billions, at most 2,000).
    """
    if scale == 1:
        return value
    if suffixed:
        return value / scale
    if (
        maximum is not None
        and value > maximum
        and value / scale <= maximum
        and (minimum is None or value / scale >= minimum)
    ):
        return value / scale
    return value
