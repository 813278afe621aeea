"""What a result states about its own accuracy: the memory error per task family from the
held-out test points (uncertainty.json, written by scripts/accuracy_report.py), else the
calibration margin, and the GPU-hours margin."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.engine import constants as c
from advisor.engine.models import Assumption, trusted


def _built(cls, **fields):
    """A result model from fields the engine computed, every one given (models.trusted)."""
    return trusted(cls, fields)


def _load_test_uncertainty() -> dict[str, dict]:
    """Per task family, the memory error covering 80 % of the test points
    (uncertainty.json, written by scripts/accuracy_report.py)."""
    path = Path(__file__).with_name("uncertainty.json")
    try:
        return json.loads(path.read_text())["memory"]
    except (OSError, ValueError, KeyError):
        return {}


TEST_UNCERTAINTY = _load_test_uncertainty()
FAMILY_OF_TASK = {
    "inference": "inference",
    "lora": "adapters",
    "qlora": "adapters",
    "full_finetune": "full",
    "pretrain": "full",
}


# Fewer test points than this: uncertainty.json widens the calibration margin to cover them
# (scripts/accuracy_report.py, UNCERTAINTY_MIN_POINTS) instead of reading an 80% figure.
MIN_TEST_POINTS = 3


def memory_uncertainty(task: str) -> tuple[float, int]:
    """(relative memory error, test points behind it; 0 = the calibration margin)."""
    found = TEST_UNCERTAINTY.get(FAMILY_OF_TASK.get(task, ""), {})
    if found.get("relative") is None:
        return c.MEMORY_MARGIN.value, 0
    return max(found["relative"], 0.01), int(found.get("points") or 0)


def stated_uncertainty(total_bytes: int, gpu_hours: float | None, task: str) -> dict[str, float]:
    m, points = memory_uncertainty(task)
    # error = (estimate - measured) / measured, so |error| <= m puts the measurement between
    # estimate / (1 + m) and estimate / (1 - m).
    out = {
        "memory_relative": m,
        "memory_low_bytes": float(int(total_bytes / (1 + m))),
        "memory_high_bytes": float(int(total_bytes / (1 - m))),
        "memory_test_points": float(points),
        "gpu_hours_relative": c.GPU_HOURS_MARGIN.value,
    }
    if gpu_hours is not None:
        out["gpu_hours_low"] = round(gpu_hours * (1 - c.GPU_HOURS_MARGIN.value), 2)
        out["gpu_hours_high"] = round(gpu_hours * (1 + c.GPU_HOURS_MARGIN.value), 2)
    return out


def memory_uncertainty_assumption(task: str) -> Assumption:
    m, points = memory_uncertainty(task)
    if not points:
        return c.MEMORY_MARGIN.assumption(f"+-{m:.0%} (no test points for this kind of work)")
    if points < MIN_TEST_POINTS:
        return _built(
            Assumption,
            name="Memory uncertainty",
            value=f"+-{m:.0%}: the calibration margin, widened to cover the {points} published "
            "measurement(s) of this kind of work that the engine was never tuned on (too few "
            "to read an 80% figure from)",
            source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
        )
    return _built(
        Assumption,
        name="Memory uncertainty",
        value=f"+-{m:.0%}: covers 80% of the {points} published measurements of this kind of "
        "work that the engine was never tuned on",
        source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
    )
