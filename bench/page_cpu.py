"""CPU time and queries per request of the advisor's pages, in process: the figures a shared,
loaded machine disturbs least (bench/page_throughput.py gives requests/s under gunicorn).

    .venv/bin/python bench/page_cpu.py                    # 5 rounds of 200 requests per page
    .venv/bin/python bench/page_cpu.py --profile "result page"   # where one page's time goes

Same database, catalog, sessions and settings as page_throughput.py (production settings, DEBUG
off; `--cache-url` measures a Redis cache, as deployed). Each page is requested
through Django's test client in rounds, the pages interleaved; the fastest round counts (other
processes only ever add time). The page cache is filled by a first request, so the step and
result are hits, as a reload or a back button is; "uncached" empties the cache before each
request. Queries are counted per request, and each middleware's own CPU time on a hit is
measured by removing it (the bare view shows what the remaining stack costs).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import page_throughput  # noqa: E402


def _client(page):
    from django.test import Client

    client = Client()
    for name, value in page.cookies().items():
        client.cookies[name] = value
    return client


def _round(page, client, requests: int, *, empty_cache: bool) -> float:
    from django.core.cache import cache

    from web.page_cache import local_pages

    started = time.process_time()
    for _ in range(requests):
        if empty_cache:
            cache.clear()
            local_pages.clear()  # the worker's own copies too
        client.get(page.path)
    return (time.process_time() - started) / requests * 1000


def _queries(page, client) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get(page.path)
    return len(captured.captured_queries)


def measure(pages, *, requests: int, rounds: int) -> None:
    clients = {page.name: _client(page) for page in pages}
    for page in pages:
        first = clients[page.name].get(page.path)
        if first.status_code != 200:
            raise SystemExit(f"{page.path} answered {first.status_code} in process")
    best: dict[str, float] = {}
    uncached: dict[str, float] = {}
    for _ in range(rounds):
        for page in pages:
            spent = _round(page, clients[page.name], requests, empty_cache=False)
            best[page.name] = min(best.get(page.name, spent), spent)
    # Counted on hits, before the uncached rounds empty the cache.
    queries = {page.name: _queries(page, clients[page.name]) for page in pages}
    for page in pages:
        if page.name in page_throughput.CACHED_PAGES:
            client = clients[page.name]
            spent = min(
                _round(page, client, max(requests // 10, 5), empty_cache=True)
                for _ in range(rounds)
            )
            uncached[page.name] = spent
            client.get(page.path)  # fill the cache again
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    cache = "Redis" if os.environ.get("CACHE_URL") else "memory"
    print(
        f"in process, fastest of {rounds} rounds of {requests} requests, {cache} cache, load {load}"
    )
    print(f"{'page':<16} {'CPU ms':>8} {'x bare':>7} {'queries':>8} {'uncached CPU ms':>16}")
    bare = best["bare view"]
    for page in pages:
        ms = best[page.name]
        extra = f"{uncached[page.name]:>16.2f}" if page.name in uncached else ""
        print(f"{page.name:<16} {ms:>8.2f} {ms / bare:>6.1f}x {queries[page.name]:>8} {extra}")


def middleware_costs(pages, *, requests: int, rounds: int) -> None:
    """Each middleware's share of a hit: the page's time with it removed, against with it."""
    from django.conf import settings

    page = next(p for p in pages if p.name == "flowchart step")
    full = list(settings.MIDDLEWARE)

    def timed(middleware: list[str]) -> float:
        settings.MIDDLEWARE = middleware
        client = _client(page)
        client.handler.load_middleware()
        client.get(page.path)
        return min(_round(page, client, requests, empty_cache=False) for _ in range(rounds))

    try:
        with_all = timed(full)
        print(f"\nmiddleware on the flowchart step (hit: {with_all:.2f} ms with all):")
        for name in full:
            if name.endswith(
                ("SessionMiddleware", "AuthenticationMiddleware", "CsrfViewMiddleware")
            ):
                continue  # the page needs these to work at all
            without = timed([m for m in full if m != name])
            print(f"  {name:<60} {with_all - without:>6.2f} ms")
    finally:
        settings.MIDDLEWARE = full


def profile(pages, name: str, *, requests: int) -> None:
    page = next(p for p in pages if p.name == name)
    client = _client(page)
    client.get(page.path)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(requests):
        client.get(page.path)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--cache-url", default=os.environ.get("BENCH_CACHE_URL", ""))
    parser.add_argument("--requests", type=int, default=200, help="requests per page per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--middleware", action="store_true", help="each middleware's cost")
    parser.add_argument("--profile", metavar="PAGE", help="profile one page's hits instead")
    args = parser.parse_args(argv)
    database_url = args.database_url or page_throughput.DEFAULT_DATABASE
    page_throughput._ensure_database(database_url)
    env = page_throughput._environment(database_url, args.cache_url)
    pages = page_throughput._prepare(env)
    from django.conf import settings

    settings.ROOT_URLCONF = "page_urls"
    if args.profile:
        profile(pages, args.profile, requests=args.requests)
        return 0
    measure(pages, requests=args.requests, rounds=args.rounds)
    if args.middleware:
        middleware_costs(pages, requests=args.requests, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
