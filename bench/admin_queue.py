"""How fast is the staff review queue with 10,000 allocation requests?

Creates the requests in a throwaway SQLite database (or in DATABASE_URL's database when set:
use a scratch one, the rows are left there), then times the admin changelist as a logged-in
superuser would load it and prints the median of several runs and the number of SQL queries.

    .venv/bin/python bench/admin_queue.py [--requests 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.bench_django import bench_staff, django_ready  # noqa: E402


def _bench_requests(have: int, wanted: int) -> list:
    """Unsaved allocation requests from `have` up to `wanted`, spread over researchers,
    statuses and facilities as a busy queue is."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from allocations.models import AllocationRequest, Status
    from tests.allocations.factories import estimate_request, estimate_result

    users = get_user_model().objects
    researchers = [
        users.get_or_create(
            username=f"bench-researcher-{i}",
            defaults={"email": f"r{i}@example.ac.uk", "last_name": f"R{i}"},
        )[0]
        for i in range(200)
    ]
    snapshot = {"request": estimate_request(), "result": estimate_result(), "engine_version": "1"}
    statuses = [
        Status.SUBMITTED,
        Status.RESUBMITTED,
        Status.APPROVED,
        Status.REJECTED,
        Status.CHANGES_REQUESTED,
        Status.DRAFT,
        Status.WITHDRAWN,
    ]
    now = timezone.now()
    return [
        AllocationRequest(
            researcher=researchers[i % len(researchers)],
            status=statuses[i % len(statuses)],
            project_title=f"Benchmark project {i}",
            project_code=f"BEN-{i:05d}",
            service="hpc",
            facility=("baskerville", "stanage", "dawn")[i % 3],
            gpu_hours=100 + i % 900,
            data_sensitivity=("public", "internal")[i % 2],
            trial=i % 5 == 0,
            estimate_snapshot=snapshot,
            submitted_at=now - timedelta(hours=i),
        )
        for i in range(have, wanted)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    django_ready()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    from allocations.models import AllocationRequest

    have = AllocationRequest.objects.count()
    start = time.perf_counter()
    batch = _bench_requests(have, args.requests)
    AllocationRequest.objects.bulk_create(batch, batch_size=1000)
    created = time.perf_counter() - start

    client = Client()
    client.force_login(bench_staff())
    url = "/admin/allocations/allocationrequest/"
    client.get(url)  # warm caches and connections
    timings = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        response = client.get(url)
        timings.append(time.perf_counter() - t0)
        assert response.status_code == 200, response.status_code
    with override_settings(DEBUG=True), CaptureQueriesContext(connection) as queries:
        client.get(url)
    query_count = len(queries.captured_queries)  # read now: the next request resets the log
    filtered = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        client.get(url + "?status__exact=submitted&q=project")
        filtered.append(time.perf_counter() - t0)

    engine = connection.vendor
    print(
        f"database: {engine}; requests: {AllocationRequest.objects.count():,} "
        f"({len(batch):,} created in {created:.1f} s)"
    )
    print(
        f"queue page:            median {statistics.median(timings) * 1000:.0f} ms "
        f"(min {min(timings) * 1000:.0f}, max {max(timings) * 1000:.0f}) over {args.runs} runs, "
        f"{query_count} SQL queries, {len(response.content) / 1024:.0f} KiB"
    )
    print(f"filtered and searched: median {statistics.median(filtered) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
