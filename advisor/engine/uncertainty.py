"""What a result states about its own accuracy: the memory error per task family from the
held-out test points (uncertainty.json, written by scripts/accuracy_report.py), else the
calibration margin, and the GPU-hour error per task family the same way."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.engine import constants as c
from advisor.engine.models import Assumption, built


def _load_test_uncertainty(quantity: str) -> dict[str, dict]:
    """Per task family, the `quantity` ("memory", "gpu_hours") error covering 80 % of the
    test points (uncertainty.json, written by scripts/accuracy_report.py)."""
    path = Path(__file__).with_name("uncertainty.json")
    try:
        return json.loads(path.read_text())[quantity]
    except (OSError, ValueError, KeyError):
        return {}


TEST_UNCERTAINTY = _load_test_uncertainty("memory")
TEST_GPU_HOURS_UNCERTAINTY = _load_test_uncertainty("gpu_hours")
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
    return _uncertainty(TEST_UNCERTAINTY, task, c.MEMORY_MARGIN.value)


def gpu_hours_uncertainty(task: str) -> tuple[float, int]:
    """(relative GPU-hour error, test points behind it; 0 = the calibration margin)."""
    return _uncertainty(TEST_GPU_HOURS_UNCERTAINTY, task, c.GPU_HOURS_MARGIN.value)


def _uncertainty(by_family: dict[str, dict], task: str, margin: float) -> tuple[float, int]:
    found = by_family.get(FAMILY_OF_TASK.get(task, ""), {})
    if found.get("relative") is None:
        return margin, 0
    # Below 100 %: error = (estimate - measured) / measured bounds the measurement by
    # estimate / (1 - m), which a 100 % error leaves unbounded.
    return min(max(found["relative"], 0.01), 0.9), int(found.get("points") or 0)


def memory_range(task: str) -> tuple[float, float]:
    """(under, over) of the memory estimate (`error_range`)."""
    return error_range(TEST_UNCERTAINTY, task, c.MEMORY_MARGIN.value)


def gpu_hours_range(task: str) -> tuple[float, float]:
    """(under, over) of the compute GPU hours (`error_range`)."""
    return error_range(TEST_GPU_HOURS_UNCERTAINTY, task, c.GPU_HOURS_MARGIN.value)


def error_range(by_family: dict[str, dict], task: str, margin: float) -> tuple[float, float]:
    """(under, over): the signed errors between which 80 % of the family's test points lie
    (uncertainty.json), else -+ the relative error `_uncertainty` states. Clamped to -90 % ..
    -1 % and +1 % up: error = (estimate - measured) / measured puts the measurement between
    estimate / (1 + over) and estimate / (1 + under), which an error of -100 % leaves
    unbounded."""
    found = by_family.get(FAMILY_OF_TASK.get(task, ""), {})
    under, over = found.get("under"), found.get("over")
    if under is None or over is None:
        m, _ = _uncertainty(by_family, task, margin)
        under, over = -m, m
    return min(max(under, -0.9), -0.01), max(over, 0.01)


def stated_uncertainty(total_bytes: int, gpu_hours: float | None, task: str) -> dict[str, float]:
    m, points = memory_uncertainty(task)
    under, over = memory_range(task)
    out = {
        "memory_relative": m,
        "memory_low_bytes": float(int(total_bytes / (1 + over))),
        "memory_high_bytes": float(int(total_bytes / (1 + under))),
        "memory_test_points": float(points),
    }
    h, hour_points = gpu_hours_uncertainty(task)
    out["gpu_hours_relative"] = h
    out["gpu_hours_test_points"] = float(hour_points)
    if gpu_hours is not None:
        under, over = gpu_hours_range(task)
        out["gpu_hours_low"] = round(gpu_hours / (1 + over), 2)
        out["gpu_hours_high"] = round(gpu_hours / (1 + under), 2)
    return out


def _measured_range(under: float, over: float) -> str:
    """Where the measurement lay around the estimate for 80 % of the test points, in words."""
    return f"measured {1 / (1 + over) - 1:+.0%} to {1 / (1 + under) - 1:+.0%} of the estimate"


def memory_uncertainty_assumption(task: str) -> Assumption:
    m, points = memory_uncertainty(task)
    if not points:
        return c.MEMORY_MARGIN.assumption(f"+-{m:.0%} (no test points for this kind of work)")
    if points < MIN_TEST_POINTS:
        return built(
            Assumption,
            name="Memory uncertainty",
            value=f"+-{m:.0%}: the calibration margin, widened to cover the {points} published "
            "measurement(s) of this kind of work that the engine was never tuned on (too few "
            "to read an 80% figure from)",
            source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
        )
    said = _measured_range(*memory_range(task))
    return built(
        Assumption,
        name="Memory uncertainty",
        value=f"{said}: covers 80% of the {points} published measurements of this kind of "
        f"work that the engine was never tuned on (+-{m:.0%} as an absolute error)",
        source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
    )


def gpu_hours_uncertainty_assumption(task: str) -> Assumption:
    h, points = gpu_hours_uncertainty(task)
    if points < MIN_TEST_POINTS:
        return c.GPU_HOURS_MARGIN.assumption(f"+-{h:.0%}")
    said = _measured_range(*gpu_hours_range(task))
    return built(
        Assumption,
        name="GPU-hours uncertainty",
        value=f"{said}: covers 80% of the {points} published speed and run-time measurements "
        f"of this kind of work that the engine was never tuned on (+-{h:.0%} as an absolute "
        "error; the engine more often runs fast than slow, most where a library's kernels "
        "differ from what it models: docs/accuracy.md)",
        source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
    )
