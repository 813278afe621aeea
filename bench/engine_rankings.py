"""Full-catalog rankings per second on one core: `python bench/engine_rankings.py`.

Each ranking is one `advisor.engine.estimate()` call over the test catalog (8 systems, 13 node
types): every system / accelerator / strategy sized, ranked, with the justification and the
Slurm script. Pinned to one CPU where the OS allows it; reports rankings per CPU second
(process time, so other load on a shared machine does not count) and per wall second.
Goal: >= 1,000 per second.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.engine import estimate  # noqa: E402
from advisor.engine.models import EstimateRequest  # noqa: E402
from tests.engine.catalog_fixture import catalog  # noqa: E402

CONFIGS = ROOT / "tests" / "engine" / "configs"


def config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


def requests() -> dict[str, EstimateRequest]:
    llama7 = config("meta-llama__Llama-2-7b-hf")
    llama70 = config("meta-llama__Llama-2-70b-hf")
    mixtral = config("mistralai__Mixtral-8x7B-v0.1")
    return {
        "7B inference bf16": EstimateRequest(config=llama7, task="inference", tokens=10**7),
        "7B full fine-tune": EstimateRequest(config=llama7, task="full_finetune", tokens=10**9),
        "7B QLoRA": EstimateRequest(config=llama7, task="qlora", precision="int4", tokens=10**8),
        "70B LoRA ckpt": EstimateRequest(
            config=llama70, task="lora", tokens=10**8, gradient_checkpointing=True
        ),
        "Mixtral inference": EstimateRequest(config=mixtral, task="inference", tokens=10**7),
        "7B typed params pretrain": EstimateRequest(
            params=7_000_000_000, task="pretrain", tokens=10**10
        ),
    }


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    cat = catalog()
    calls_all = cpu_all = wall_all = 0.0
    print(f"{'request':28} {'options':>7} {'per CPU s':>10} {'per wall s':>11}")
    for name, request in requests().items():
        estimate(request, cat)  # warm up
        calls = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.process_time() - cpu0 < 1.0:
            result = estimate(request, cat)
            calls += 1
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        calls_all, cpu_all, wall_all = calls_all + calls, cpu_all + cpu, wall_all + wall
        print(f"{name:28} {len(result.options):>7} {calls / cpu:>10,.0f} {calls / wall:>11,.0f}")
    print(f"{'all':28} {'':>7} {calls_all / cpu_all:>10,.0f} {calls_all / wall_all:>11,.0f}")

if __name__ == "__main__":
    main()
