"""How fast does Slurm accounting import, and the granted / used / estimated page render?

Writes a `sacct -P` export of N jobs (with their .batch and .extern steps, as sacct prints
them) spread over 50 accounts, imports it into a throwaway SQLite database (or DATABASE_URL's:
use a scratch one), imports it again (nothing changes: the idempotent path), then times the
admin's usage overview for 50 approved requests and prints the figures.

    .venv/bin/python bench/usage_import.py [--jobs 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.bench_django import bench_staff, django_ready  # noqa: E402

ACCOUNTS = 50


def export(jobs: int) -> bytes:
    lines = ["JobID|Cluster|Account|User|Partition|State|Start|End|ElapsedRaw|AllocTRES"]
    start = datetime(2026, 1, 5, 8, 0)
    for n in range(jobs):
        begin = start + timedelta(minutes=17 * n)
        elapsed = 600 + (n * 37) % 36_000
        end = begin + timedelta(seconds=elapsed)
        gpus = 1 + n % 4
        tres = (
            f"billing={8 * gpus},cpu={8 * gpus},gres/gpu:a100={gpus},gres/gpu={gpus},mem=64G,node=1"
        )
        row = (
            f"{5_000_000 + n}|bench|acct-{n % ACCOUNTS:02d}|user{n % 200}|gpu|COMPLETED|"
            f"{begin:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|{elapsed}|{tres}"
        )
        lines.append(row)
        for step in ("batch", "extern"):
            lines.append(
                f"{5_000_000 + n}.{step}|bench|acct-{n % ACCOUNTS:02d}|||COMPLETED|"
                f"{begin:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|{elapsed}|{tres}"
            )
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    django_ready()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from allocations.models import AllocationRequest, Status
    from allocations.usage_services import usage_import
    from tests.allocations.factories import estimate_request, estimate_result

    users = get_user_model().objects
    staff = bench_staff()
    researcher = users.filter(username="bench-researcher").first() or users.create_user(
        "bench-researcher", "r@example.ac.uk", "bench-only"
    )
    if not AllocationRequest.objects.filter(slurm_account__startswith="acct-").exists():
        snapshot = {"request": estimate_request(), "result": estimate_result()}
        AllocationRequest.objects.bulk_create(
            AllocationRequest(
                researcher=researcher,
                status=Status.APPROVED,
                project_title=f"Bench project {i}",
                facility="baskerville",
                gpu_hours=5000,
                granted_gpu_hours=4000 + 100 * i,
                start_date=date(2026, 1, 1),
                end_date=date(2026, 12, 31),
                slurm_account=f"acct-{i:02d}",
                estimate_snapshot=snapshot,
            )
            for i in range(ACCOUNTS)
        )
    raw = export(args.jobs)
    print(
        f"export: {args.jobs:,} jobs ({3 * args.jobs:,} rows with steps), {len(raw) / 1e6:.1f} MB"
    )

    began = time.perf_counter()
    first = usage_import(raw=raw, file_name="bench.txt", cluster="bench", time_zone="UTC")
    print(f"first import: {time.perf_counter() - began:.2f} s ({first})")
    began = time.perf_counter()
    again = usage_import(raw=raw, file_name="bench.txt", cluster="bench", time_zone="UTC")
    print(f"re-import (nothing changes): {time.perf_counter() - began:.2f} s ({again})")

    client = Client()
    client.force_login(staff)
    url = reverse("admin:allocations_usagerecord_overview")
    times = []
    for _ in range(args.runs):
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - began)
        assert response.status_code == 200
    print(
        f"usage overview ({ACCOUNTS} requests, charts for 40): median "
        f"{statistics.median(times) * 1000:.0f} ms over {args.runs} runs, "
        f"{len(queries)} SQL queries"
    )


if __name__ == "__main__":
    main()
