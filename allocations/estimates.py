"""Re-running a frozen estimate with one assumption changed, and comparing the two results.

The engine and the catalog are other apps' work; this module is allocations' only door to
them, and says plainly when the engine cannot run rather than failing the admin page.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any


class EstimateUnavailable(Exception):
    """The estimate could not be re-run; the message says why, in words staff can act on."""


def _engine():
    try:
        from advisor.engine import estimate
        from advisor.engine.models import EstimateRequest

        engine_catalog = import_module("catalog.selectors").engine_catalog
    except (ImportError, AttributeError) as exc:
        raise EstimateUnavailable(
            f"The estimation engine or the catalog is not available in this build ({exc})."
        ) from exc
    return estimate, EstimateRequest, engine_catalog


def estimate_rerun(
    *, snapshot: dict[str, Any], changes: dict[str, Any], extra_benchmarks: tuple = ()
) -> dict[str, Any]:
    """The frozen request with `changes` applied, estimated against today's catalog.

    `extra_benchmarks` (engine BenchmarkSpecs) join the catalog's benchmarks for this run only:
    a trial-run measurement applied before staff accept it into the catalog.
    """
    estimate, estimate_request_model, engine_catalog = _engine()
    inputs = dict((snapshot or {}).get("request") or {})
    if not inputs:
        raise EstimateUnavailable("This request has no frozen estimate inputs to re-run.")
    inputs.update(changes)
    if "accelerator" in changes:
        inputs["system"] = None  # another GPU may live on another system: let the engine choose
    try:
        request = estimate_request_model.model_validate(inputs)
        catalog = engine_catalog()
        if extra_benchmarks:
            catalog = catalog.model_copy(
                update={"benchmarks": [*catalog.benchmarks, *extra_benchmarks]}
            )
        result = estimate(request, catalog)
    except ValueError as exc:  # pydantic's ValidationError and the engine's input errors
        raise EstimateUnavailable(f"The engine refused the changed inputs: {exc}") from exc
    return result.model_dump(mode="json")


GB = 1e9

_ROWS = (
    ("System", lambda r: r.get("system")),
    ("GPU", lambda r: r.get("accelerator")),
    ("GPUs", lambda r: r.get("num_gpus")),
    ("Nodes", lambda r: r.get("nodes")),
    ("Strategy", lambda r: r.get("strategy")),
    ("Memory per GPU (GB)", lambda r: _round(r.get("memory_per_gpu_bytes"), GB)),
    ("Fits in memory", lambda r: r.get("fits")),
    ("Compute GPU hours", lambda r: _round(r.get("gpu_hours"))),
    ("Contingency GPU hours", lambda r: _round(r.get("contingency_gpu_hours"))),
    ("Requested GPU hours", lambda r: _round(r.get("requested_gpu_hours"))),
    ("Wall hours", lambda r: _round(r.get("wall_hours"))),
    ("Cost", lambda r: _round(r.get("cost"))),
)


def _round(value, scale: float = 1.0):
    if value is None:
        return None
    return round(value / scale, 1)


def estimate_comparison(*, old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of (label, old, new, changed) for the two recommendations side by side."""
    old_rec = old.get("recommendation") or {}
    new_rec = new.get("recommendation") or {}
    rows = [
        {
            "label": "Engine version",
            "old": old.get("engine_version"),
            "new": new.get("engine_version"),
        },
        {"label": "Parameters", "old": old.get("params_total"), "new": new.get("params_total")},
    ]
    rows += [{"label": label, "old": get(old_rec), "new": get(new_rec)} for label, get in _ROWS]
    for row in rows:
        row["changed"] = row["old"] != row["new"]
    return rows
