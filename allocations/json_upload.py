"""Reading an uploaded JSON document (a sacct export, a trial-run report) with messages a
researcher can act on, instead of a decoder's traceback or a 500 on a pathological file."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def load_json_upload(
    text: str,
    *,
    error: Callable[[list[str]], Exception],
    not_json: str,
    too_deep: str,
) -> Any:
    """`json.loads(text)`, or `error([message])`: `not_json` is formatted with the decoder's
    `line`, `column` and `msg`; `too_deep` is said when the nesting exhausts the recursion
    limit (json.loads raises RecursionError, not a JSONDecodeError, for that)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error([not_json.format(line=exc.lineno, column=exc.colno, msg=exc.msg)]) from None
    except RecursionError:
        raise error([too_deep]) from None
