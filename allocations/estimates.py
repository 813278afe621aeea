"""Re-running a frozen estimate with one assumption changed, and comparing the two results.

The engine's refusals of the changed inputs become EstimateUnavailable, said in words staff can
act on, rather than failing the admin page.
"""

from __future__ import annotations

from typing import Any

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.engine_catalog import engine_catalog


class EstimateUnavailable(Exception):
    """The estimate could not be re-run; the message says why, in words staff can act on."""


def estimate_rerun(
    *, snapshot: dict[str, Any], changes: dict[str, Any], extra_benchmarks: tuple = ()
) -> dict[str, Any]:
    """The frozen request with `changes` applied, estimated against today's catalog.

    `extra_benchmarks` (engine BenchmarkSpecs) join the catalog's benchmarks for this run only:
    a trial-run measurement applied before staff accept it into the catalog.
    """
    inputs = dict((snapshot or {}).get("request") or {})
    if not inputs:
        raise EstimateUnavailable("This request has no frozen estimate inputs to re-run.")
    inputs.update(changes)
    if "accelerator" in changes:
        inputs["system"] = None  # another GPU may live on another system: let the engine choose
    try:
        request = EstimateRequest.model_validate(inputs)
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


def _names(model, keys: set) -> dict[str, str]:
    keys = {k for k in keys if k}
    if not keys:
        return {}
    return dict(model.objects.filter(name__in=keys).values_list("name", "display_name"))


def _in_words(rows: list[dict[str, Any]]) -> None:
    """Catalog keys and raw counts as a reviewer reads them ("Dawn (Cambridge, ...)",
    "1.3 billion parameters", "tensor parallel", "yes"); `changed` was decided on the values."""
    from advisor.engine.words import STRATEGY_NAMES, parameters
    from catalog.models import Accelerator, System

    def keys(label: str) -> set:
        return {row[side] for row in rows if row["label"] == label for side in ("old", "new")}

    systems = _names(System, keys("System"))
    accelerators = _names(Accelerator, keys("GPU"))
    shown = {
        "System": lambda v: systems.get(v, v),
        "GPU": lambda v: accelerators.get(v, v),
        "Parameters": lambda v: parameters(int(v)),
        "Strategy": lambda v: STRATEGY_NAMES.get(str(v), str(v).replace("_", " ")),
        "Fits in memory": lambda v: "yes" if v else "no",
    }
    for row in rows:
        show = shown.get(row["label"])
        if show is None:
            continue
        for side in ("old", "new"):
            if row[side] is not None:
                row[side] = show(row[side])


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
    _in_words(rows)
    return rows
