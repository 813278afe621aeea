"""Reading JSON from outside (the API, the estimate command) without surprises.

Python's json module turns a number with more than 4,300 digits into a ValueError (CPython's
integer-string conversion limit, docs.python.org/3/library/stdtypes.html#int-max-str-digits),
`1e999` into infinity and the bare words NaN and Infinity into floats. None of these is an
estimate request; each becomes a JsonNumberError with a message for the sender.
"""

from __future__ import annotations

import json
import math
from typing import Any

# The longest whole number any field could sensibly hold (tokens, parameters: under 10^16);
# a number this long is refused before Python converts it.
MAX_INTEGER_DIGITS = 30


class JsonNumberError(ValueError):
    """A number in the document that no request could contain."""


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise JsonNumberError(
            f"a whole number in the body has {digits} digits; no field takes more than "
            f"{MAX_INTEGER_DIGITS}"
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonNumberError(f"the number {text[:40]} is too large to be a real value")
    return value


def _parse_constant(name: str) -> float:
    raise JsonNumberError(f"{name} is not a number JSON allows")


def json_loads(text: str | bytes) -> Any:
    """json.loads, refusing absurd numbers with JsonNumberError (raised before other errors
    of the same document are looked at). Other failures are json's own."""
    return json.loads(
        text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
    )
