"""Where an estimate spends its time, and a count that a busy machine does not disturb.

`python bench/engine_profile.py [REQUEST ...]` samples the Python stack every 1 ms of CPU time
or the kernel's tick if coarser (4 ms here; SIGPROF: no package needed, py-spy is not
installed) while the ranking bench's requests
(bench/engine_rankings.py) run on the default catalog, and prints each function's share of the
samples, inclusive and self, and the hottest lines.

`--instructions` counts the CPU instructions one estimate executes instead, under valgrind's
callgrind: (instructions of 11 estimates - of 1) / 10, so start-up cancels. Unlike timings on
the shared 2-core machine (+-30 % between runs at load 2), the count is the same run after run,
so a change of 1 % shows. `--engine-root DIR` counts another tree's `advisor` (e.g. from
`git archive main advisor | tar -x -C DIR`), as bench/engine_rankings.py --against does.
Instructions are not time (cache misses and branch prediction count too), so confirm a
change with bench/engine_rankings.py --against on a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--engine-root" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--engine-root") + 1])

from advisor.engine import estimate  # noqa: E402
from bench.engine_rankings import catalog_from_file, requests  # noqa: E402

INTERVAL = 0.001  # seconds of CPU time between samples (the kernel may round up to its tick)


def sample(name: str, seconds: float, top: int) -> None:
    """Run `name` for `seconds` and print the sampled profile."""
    request, cat = requests()[name], catalog_from_file()
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    lines: collections.Counter = collections.Counter()
    count = 0

    def on_sample(_signum, frame) -> None:
        nonlocal count
        count += 1
        own[_where(frame)] += 1
        lines[f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"] += 1
        seen = set()
        while frame is not None:
            key = _where(frame)
            if key not in seen:  # recursion counts once
                seen.add(key)
                inclusive[key] += 1
            frame = frame.f_back

    estimate(request, cat)  # warm up: imports and module-level caches are not the estimate
    signal.signal(signal.SIGPROF, on_sample)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
    calls, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        estimate(request, cat)
        calls += 1
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    per = (time.process_time() - start) / calls * 1e6
    print(f"\n{name}: {calls} estimates, {per:,.0f} us each (CPU, with sampling), {count} samples")
    for title, counter in (("inclusive", inclusive), ("self", own), ("lines", lines)):
        print(f"--- {title}")
        for key, hits in counter.most_common(top):
            print(f"{hits / max(count, 1):6.1%}  {key}")


def _where(frame) -> str:
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"


def run_estimates(name: str, times: int) -> None:
    """The body callgrind counts: `times` estimates of `name` (0: only the start-up)."""
    request, cat = requests()[name], catalog_from_file()
    for _ in range(times):
        estimate(request, cat)


def instructions(name: str, engine_root: str | None) -> int:
    """Instructions per estimate of `name`, from two callgrind runs."""
    counts = []
    for times in (1, 11):
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--run",
            str(times),
            name,
        ]
        if engine_root:
            command += ["--engine-root", engine_root]
        # A fixed hash seed: string hashing otherwise varies the count a little run to run.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            sys.exit(f"callgrind failed for {name!r}: {done.stderr.strip()[-500:]}")
        counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) // 10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="REQUEST", help="default: every request")
    parser.add_argument("--seconds", type=float, default=10.0, help="sampling time per request")
    parser.add_argument("--top", type=int, default=30, help="rows per table")
    parser.add_argument("--instructions", action="store_true", help="count under callgrind")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # callgrind's child
    parser.add_argument("--engine-root", help="time this tree's advisor package")
    args = parser.parse_args(argv)
    known = list(requests())
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown request {unknown[0]!r}; known: {', '.join(known)}")
    names = args.names or known
    if args.run is not None:
        run_estimates(names[0], args.run)
    elif args.instructions:
        if shutil.which("valgrind") is None:
            sys.exit("--instructions needs valgrind (apt-get install valgrind)")
        engine = args.engine_root or "this checkout"
        for name in names:
            print(f"{name:28} {instructions(name, args.engine_root):>14,} instructions ({engine})")
    else:
        for name in names:
            sample(name, args.seconds, args.top)


if __name__ == "__main__":
    main()
