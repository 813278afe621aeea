"""Fits QLORA_DEQUANT_BANDWIDTH_FRACTION, the speed of QLoRA's dequantisation, on LitGPT's
resource tables.

    python scripts/fit_qlora_dequant.py

Calibration data only: LitGPT's tutorials/resource-tables.md (2023-10-20, A100-SXM4-40GB,
PyTorch 2.1, bitsandbytes 0.41.1) times 1,000 iterations of finetune/lora.py on Alpaca at
micro-batch 1 with bf16 base weights and with bnb.nf4 ones. The examples and recipe are the
same in each pair, so the difference is the dequantisation: two passes (forward, and backward
for the input gradient; the script does not recompute) of every quantised linear weight. The
fraction of the 1,555 GB/s each pair implies is compared on a log scale; their geometric mean
is the constant. The same source's memory rows are calibration points in
docs/accuracy/measurements.json; no test point is used.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.engine import constants as c  # noqa: E402
from advisor.engine.models import EstimateRequest  # noqa: E402
from advisor.engine.workload import resolve_shape  # noqa: E402

CONFIGS = ROOT / "docs" / "accuracy" / "configs"
A100_40GB_BANDWIDTH_GB_S = 1555
PASSES = 2  # finetune/lora.py of that commit trains without activation checkpointing
# (config, minutes per 1,000 iterations with bf16 weights, with bnb.nf4 weights)
PAIRS = (
    ("microsoft__phi-1_5.json", 1.62, 1.77),
    ("stabilityai__stablelm-base-alpha-3b.json", 1.24, 1.82),
    ("meta-llama__Llama-2-7b-hf.json", 2.36, 3.68),
    ("meta-llama__Llama-2-13b-hf.json", 3.19, 6.38),
)


def implied_fractions() -> list[tuple[str, float]]:
    out = []
    for name, bf16_min, nf4_min in PAIRS:
        config = json.loads((CONFIGS / name).read_text())
        shape = resolve_shape(EstimateRequest(config=config, task="lora"))
        extra_s = (nf4_min - bf16_min) * 60 / 1000  # per iteration
        moved = PASSES * shape.params_linear * c.QLORA_DEQUANT_BYTES_PER_PARAM.value
        out.append((name, moved / (A100_40GB_BANDWIDTH_GB_S * 1e9 * extra_s)))
    return out


def main() -> int:
    fractions = implied_fractions()
    fitted = math.exp(sum(math.log(f) for _, f in fractions) / len(fractions))
    for name, f in fractions:
        print(f"{name:45} implies {f:.2f} of the bandwidth (model/measured time {f / fitted:.2f})")
    print(f"fitted fraction {fitted:.2f}; constant {c.QLORA_DEQUANT_BANDWIDTH_FRACTION.value:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
