"""Fits scale_cost.SYNC_SPREAD, the wait for the slowest rank, on llm-foundry's own scaling.

    python scripts/fit_scale_sync.py

Calibration data only: llm-foundry's throughput rows in catalog/data/shared/benchmarks.json
that measure one model on few and on many GPUs. Each pair's small run is moved to the large
run's model width and card by the engine's roofline transfer (speed._transfer, MFU: 6N per
token, so rows with and without recomputation compare), then multiplied by the synchronisation
ratio (1 + s sqrt(2 ln n_small)) / (1 + s sqrt(2 ln n_large)). Four of the five pairs also move
from the A100 80GB to the 40GB card, which the roofline covers only for its bandwidth, so a
factor for that card change is fitted with s (least squares on log MFU, grid search); without
it the card change would be read as scale. No run-total point and no test point is used.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import accuracy_report  # noqa: E402

from advisor.engine import scale_cost, speed  # noqa: E402

PAIRS = (  # (few GPUs, many GPUs): the same model in llm-foundry's tables
    ("llmfoundry-mpt-3b-8xa100-80-sxm4", "llmfoundry-mpt-3b-64xa100-40-sxm4"),
    ("llmfoundry-mpt-7b-8xa100-40-sxm4", "llmfoundry-mpt-7b-128xa100-40-sxm4"),
    ("llmfoundry-mpt-13b-8xa100-80-sxm4", "llmfoundry-mpt-13b-64xa100-40-sxm4"),
    ("llmfoundry-mpt-30b-8xa100-80-sxm4", "llmfoundry-mpt-30b-128xa100-40-sxm4"),
    ("llmfoundry-mpt-70b-64xa100-80-sxm4", "llmfoundry-mpt-70b-128xa100-40-sxm4"),
)


def wait(spread: float, n: int) -> float:
    return spread * math.sqrt(2 * math.log(n)) if n > 1 else 0.0


def pairs() -> list[tuple[str, float, float, int, int, bool]]:
    """(large row, transferred MFU, measured MFU, small n, large n, card changes)."""
    accelerators = accuracy_report.load_accelerators()
    index = speed.measured(accuracy_report.calibration_benchmarks(), accelerators)
    by_name = {m.bench.name: m for m in index}
    out = []
    for small_name, large_name in PAIRS:
        small, large = by_name[small_name], by_name[large_name]
        acc = accelerators[large.bench.accelerator]
        job = speed._roofline(large.width, large.layer_params, acc)
        moved = speed._transfer(small, job, acc, recompute=False)
        card = small.bench.accelerator != large.bench.accelerator
        out.append((large_name, moved, large.mfu, small.bench.num_gpus, large.bench.num_gpus, card))
    return out


def residuals(data, spread: float, card: float) -> list[float]:
    return [
        math.log(measured / (moved * (1 + wait(spread, a)) / (1 + wait(spread, b))
                             * (card if changes else 1.0)))
        for _, moved, measured, a, b, changes in data
    ]  # fmt: skip


def fit(data, with_card: bool) -> tuple[float, float]:
    best = (0.0, 1.0, math.inf)
    cards = [j / 1000 for j in range(850, 1101)] if with_card else [1.0]
    for i in range(2001):
        spread = i / 10000
        for card in cards:
            err = sum(r * r for r in residuals(data, spread, card))
            if err < best[2]:
                best = (spread, card, err)
    return best[0], best[1]


def main() -> None:
    data = pairs()
    spread, card = fit(data, with_card=True)
    alone, _ = fit(data, with_card=False)
    same_card = [row for row in data if not row[5]]
    only, _ = fit(same_card, with_card=False)
    print(f"joint fit: spread {spread:.4f}, A100 80GB -> 40GB factor {card:.3f}")
    for (name, *_), r in zip(data, residuals(data, spread, card), strict=True):
        print(f"  {name}: residual {math.exp(r) - 1:+.1%}")
    print(f"spread alone (card change read as scale): {alone:.4f}")
    print(f"same-card pair alone: {only:.4f}")
    print(f"scale_cost.SYNC_SPREAD = {scale_cost.SYNC_SPREAD}")
    for n in (64, 512, 2048, 16384):
        print(f"  {n} GPUs against 8: {scale_cost.scale_efficiency(n, 8):.4f} of the speed kept")


if __name__ == "__main__":
    main()
