"""Full-catalog rankings per second on one core: `python bench/engine_rankings.py`.

Each ranking is one `advisor.engine.estimate()` call: every system / accelerator / strategy
sized, ranked, with the justification and the Slurm script. Two catalogs: the test fixture
(tests/engine/catalog_fixture.py) and the real default catalog (catalog/data/default.json,
validated by catalog.data_schema and turned into a CatalogSpec the way
catalog.selectors.engine_catalog does, without a database: retired systems and node types left
out). `--catalog fixture|default|both` (default both). Pinned to one CPU where the OS allows
it; reports rankings per CPU second (process time, so other load on a shared machine does not
count) and per wall second. Goal: >= 1,000 per second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.engine import estimate  # noqa: E402
from advisor.engine.models import (  # noqa: E402
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    EstimateRequest,
    NodeTypeSpec,
    PartitionSpec,
    SystemSpec,
)
from catalog.data_schema import validate_catalog_file  # noqa: E402
from tests.engine.catalog_fixture import catalog  # noqa: E402

DEFAULT_CATALOG = ROOT / "catalog" / "data" / "default.json"

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


def catalog_from_file(path: Path = DEFAULT_CATALOG) -> CatalogSpec:
    """The engine's catalog from a data file, as engine_catalog() builds it from the database
    after `manage.py load_catalog`: active and limited systems, non-retired node types."""
    doc = validate_catalog_file(path)
    systems = []
    for sys_in in doc.systems:
        if sys_in.status == "retired":
            continue
        nodes = [nt for nt in sys_in.node_types if nt.status != "retired"]
        kept = {nt.name for nt in nodes}
        partitions = []
        for part in sys_in.partitions:
            names = [n for n in part.node_types if n in kept]
            if names:
                partitions.append(
                    PartitionSpec(
                        name=part.name,
                        slurm_partition=part.slurm_partition or None,
                        node_types=names,
                        max_wall_hours=part.max_wall_hours,
                        max_gpus_per_job=part.max_gpus_per_job,
                        max_nodes_per_job=part.max_nodes_per_job,
                        gpu_request=part.gpu_request,
                        constraint=part.constraint or None,
                        qos=part.qos or None,
                        notes=part.notes,
                    )
                )
        systems.append(
            SystemSpec(
                **sys_in.model_dump(
                    include={
                        "name", "display_name", "operator", "kind", "scheduler", "status",
                        "status_note", "notebooks", "data_sensitivity", "trial_gpu_hours",
                        "price_per_gpu_hour", "currency", "typical_queue_wait_hours",
                        "access_route", "queue_guidance", "modules", "tooling",
                    }
                ),
                container=sys_in.container or None,
                node_types=[
                    NodeTypeSpec(
                        **nt.model_dump(
                            include={
                                "name", "count", "gpus_per_node", "accelerator", "cpu_cores",
                                "ram_gb", "intra_node_interconnect", "inter_node_interconnect",
                                "inter_node_gbit_s", "price_per_gpu_hour", "status",
                            }
                        )
                    )
                    for nt in nodes
                ],
                partitions=partitions,
            )
        )
    names = {s.name for s in systems}
    benchmarks = [
        BenchmarkSpec(
            **b.model_dump(exclude={"name", "strategy"}), strategy=b.strategy or None
        )
        for b in doc.benchmarks
        if b.system is None or b.system in names
    ]
    used = {nt.accelerator for s in systems for nt in s.node_types}
    used |= {b.accelerator for b in benchmarks}
    accelerators = [
        AcceleratorSpec(**a.model_dump(include=set(AcceleratorSpec.model_fields)))
        for a in sorted(doc.accelerators, key=lambda a: a.name)
        if a.name in used
    ]
    return CatalogSpec(accelerators=accelerators, systems=systems, benchmarks=benchmarks)


def run(label: str, cat: CatalogSpec) -> float:
    """Rankings per CPU second over all requests."""
    nodes = sum(len(s.node_types) for s in cat.systems)
    print(f"\n{label}: {len(cat.systems)} systems, {nodes} node types")
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
    return calls_all / cpu_all


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", choices=("fixture", "default", "both"), default="both")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if args.catalog in ("fixture", "both"):
        run("Test fixture catalog", catalog())
    if args.catalog in ("default", "both"):
        run(f"Default catalog ({DEFAULT_CATALOG.relative_to(ROOT)})", catalog_from_file())


if __name__ == "__main__":
    main()
