"""Full-catalog rankings per second on one core: `python bench/engine_rankings.py`.

Each ranking is one `advisor.engine.estimate()` call: every system / accelerator / strategy
sized, ranked, with the justification and the Slurm script. Two catalogs: the test fixture
(tests/engine/data/engine_catalog.json) and the real default catalog (catalog/data/default.json,
both read by the real path: catalog.data_schema checks the file and CatalogFile.to_spec() builds
the CatalogSpec engine_catalog() would build after loading it, without a database; retired
systems and node types are left out of the default catalog). `--catalog fixture|default|both`
(default both). Pinned to one CPU where the OS allows it; reports rankings per CPU second
(process time, so other load on a shared machine does not count) and per wall second.
Goal: >= 1,000 per second for every request.

`--rounds N` times each request N times and reports the median (steadier on a busy machine).
`--against REV` also times the engine (`advisor/`) of git revision REV, e.g. `main`, with the
same requests and catalogs, alternating the two round by round in fresh processes, and prints
before, after and the speed-up side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# --engine-root DIR (used by --against): that tree's `advisor` package is the one timed; the
# requests, the configs and the catalogs still come from this checkout.
if "--engine-root" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--engine-root") + 1])

from advisor.engine import estimate  # noqa: E402
from advisor.engine.models import (  # noqa: E402
    CatalogSpec,
    EstimateRequest,
)
from catalog.benchmark_file import benchmark_file_read  # noqa: E402
from catalog.data_file import validate_catalog_file  # noqa: E402
from tests.engine.catalog_fixture import catalog  # noqa: E402

DEFAULT_CATALOG = ROOT / "catalog" / "data" / "default.json"
SHARED_BENCHMARKS = ROOT / "catalog" / "data" / "shared" / "benchmarks.json"

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
    shared = [bench for _, bench in benchmark_file_read(SHARED_BENCHMARKS)]
    return validate_catalog_file(path).to_spec(shared_benchmarks=shared)


GOAL = 1_000  # full rankings per CPU second, every request (issue 3, section 9)


def measure(cat: CatalogSpec, seconds: float = 1.0) -> dict[str, tuple[int, float, float]]:
    """request -> (options, rankings per CPU second, rankings per wall second)."""
    out = {}
    for name, request in requests().items():
        estimate(request, cat)  # warm up
        calls = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.process_time() - cpu0 < seconds:
            result = estimate(request, cat)
            calls += 1
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        out[name] = (len(result.options), calls / cpu, calls / wall)
    return out


def catalogs(which: str) -> dict[str, tuple[str, CatalogSpec]]:
    out = {}
    if which in ("fixture", "both"):
        out["fixture"] = ("Test fixture catalog", catalog())
    if which in ("default", "both"):
        label = f"Default catalog ({DEFAULT_CATALOG.relative_to(ROOT)})"
        out["default"] = (label, catalog_from_file())
    return out


def report(label: str, cat: CatalogSpec, rounds: list[dict]) -> float:
    """Print the median of the rounds; return the slowest request's rankings per CPU second."""
    nodes = sum(len(s.node_types) for s in cat.systems)
    print(f"\n{label}: {len(cat.systems)} systems, {nodes} node types")
    print(f"{'request':28} {'options':>7} {'per CPU s':>10} {'per wall s':>11}")
    cpus, walls = [], []
    for name in rounds[0]:
        options = rounds[0][name][0]
        cpus.append(statistics.median(r[name][1] for r in rounds))
        walls.append(statistics.median(r[name][2] for r in rounds))
        print(f"{name:28} {options:>7} {cpus[-1]:>10,.0f} {walls[-1]:>11,.0f}")
    # All: each request once, one after the other (the harmonic mean of the rates).
    cpu_all, wall_all = statistics.harmonic_mean(cpus), statistics.harmonic_mean(walls)
    print(f"{'all':28} {'':>7} {cpu_all:>10,.0f} {wall_all:>11,.0f}")
    slowest = min(cpus)
    verdict = "met" if slowest >= GOAL else "NOT met"
    print(f"{'slowest':28} {'':>7} {slowest:>10,.0f}   goal >= {GOAL:,}/s: {verdict}")
    return slowest


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def compare(rev: str, which: str, rounds: int) -> None:
    """This checkout's engine against REV's, round by round in fresh processes.

    Only REV's `advisor/` is taken: the requests, the configs, the catalogs and the code that
    reads them (catalog/, catalog_schema/) are this checkout's, so both engines rank the same
    catalog. That works for every revision since this bench exists (c3579a6, before
    catalog_schema/ existed: its engine defined the specs itself and takes these duck-typed);
    a revision whose engine cannot take today's catalog stops with what failed, not a trace.
    """
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "advisor"],
            capture_output=True,
        )
        if archive.returncode != 0:
            sys.exit(f"--against {rev}: git cannot read it ({_last_line(archive.stderr.decode())})")
        tar_path = Path(tmp) / "engine.tar"
        tar_path.write_bytes(archive.stdout)
        with tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
        runs: dict[str, list[dict]] = {rev: [], "this": []}
        for _ in range(rounds):
            for who, extra in ((rev, ["--engine-root", tmp]), ("this", [])):
                done = subprocess.run(
                    [sys.executable, __file__, "--json", "--catalog", which, *extra],
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0:
                    engine = f"{rev}'s engine" if who == rev else "this checkout's engine"
                    sys.exit(
                        f"--against {rev}: {engine} could not rank this checkout's requests "
                        f"and catalogs: {_last_line(done.stderr)}"
                    )
                runs[who].append(json.loads(done.stdout))
    print(f"Rankings per CPU second, median of {rounds} round(s): {rev} vs this checkout")
    print(f"{'catalog: request':40} {rev:>10} {'this':>8} {'speed-up':>9}")
    for key in runs[rev][0]:
        before = statistics.median(r[key][1] for r in runs[rev])
        after = statistics.median(r[key][1] for r in runs["this"])
        print(f"{key:40} {before:>10,.0f} {after:>8,.0f} {after / before:>8.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", choices=("fixture", "default", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=1, help="report the median of N runs")
    parser.add_argument("--against", metavar="REV", help="also time git revision REV's engine")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --against
    parser.add_argument("--engine-root", help=argparse.SUPPRESS)  # read at import time
    args = parser.parse_args(argv)
    if args.against:
        compare(args.against, args.catalog, args.rounds)
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    chosen = catalogs(args.catalog)
    if args.json:
        figures = {
            f"{key}: {name}": row
            for key, (_, cat) in chosen.items()
            for name, row in measure(cat).items()
        }
        print(json.dumps(figures))
        return
    for label, cat in chosen.values():
        report(label, cat, [measure(cat) for _ in range(args.rounds)])


if __name__ == "__main__":
    main()
