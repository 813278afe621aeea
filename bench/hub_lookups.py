"""Hub lookup figures: Hub requests for 50 concurrent lookups of one model, and cached latency.

    .venv/bin/python bench/hub_lookups.py [--database-url postgres://...] [--hub-latency-ms 0]

Starts the fake Hub (tests/support/fake_hub.py) on 127.0.0.1 and runs the lookup service the
web flow uses, with Celery in-process (no broker), so the thread that creates the lookup also
performs it while the other 49 find it in flight. Uses a throw-away SQLite file unless a
database URL is given (its advisor tables are migrated and the bench model's rows replaced).

Goals (issue 4): exactly 1 model-info request for the 50 lookups; a cached lookup at least 20x
faster than asking the Hub directly.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "acme/bench-model"


def _prepare_environment(args) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    os.environ.pop("CELERY_BROKER_URL", None)  # tasks in-process: this measures the service
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(tmp / "bench.sqlite3")
    hf_home = tmp / "hf-home"
    hf_home.mkdir()
    (hf_home / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}')
    os.environ["HF_HOME"] = str(hf_home)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["DJANGO_LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    return tmp


def _timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"median {statistics.median(ordered) * 1000:8.3f} ms   p95 {p95 * 1000:8.3f} ms"


def _concurrent_lookups(fake_hub, concurrency: int) -> tuple[int, list[BaseException]]:
    """N concurrent lookups of one uncached model: (Hub model-info requests, errors)."""
    from django.db import connection

    from advisor.models import HfModelLookup
    from advisor.services import hf_model_lookup_request

    barrier = threading.Barrier(concurrency)
    ids: list[int] = []
    errors: list[BaseException] = []

    def ask():
        try:
            barrier.wait()
            ids.append(hf_model_lookup_request(repo_id=MODEL).pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    lookup = HfModelLookup.objects.get(requested_id=MODEL)
    info_calls = fake_hub.model_info_requests(MODEL)
    all_calls = fake_hub.requests_for(f"/api/models/{MODEL}") + fake_hub.requests_for(
        f"/{MODEL}/resolve/"
    )
    print(f"\n{concurrency} concurrent lookups of {MODEL} (uncached), {elapsed:.2f} s:")
    print(f"  lookup rows: {len(set(ids))}   status: {lookup.status}   errors: {len(errors)}")
    print(f"  Hub model-info requests: {info_calls}   (goal: exactly 1)")
    print(f"  Hub requests of any kind for the model: {all_calls}   (model info + config.json)")
    if errors:
        print(f"  first error: {errors[0]!r}")
    return info_calls, errors


def _cached_against_direct(repeat: int) -> float:
    """A cached lookup against asking the Hub directly: the median speed-up."""
    from django.core.cache import cache

    from advisor import hub
    from advisor.services import hf_model_lookup_request

    hf_model_lookup_request(repo_id=MODEL)  # warm the connection
    cached = _timed(lambda: hf_model_lookup_request(repo_id=MODEL), repeat)

    def from_database():
        cache.clear()
        hf_model_lookup_request(repo_id=MODEL)

    database = _timed(from_database, repeat)
    direct_repeat = max(20, repeat // 4)
    hub.fetch_model(MODEL)
    direct = _timed(lambda: hub.fetch_model(MODEL), direct_repeat)
    ratio = statistics.median(direct) / statistics.median(cached)
    print(f"\ncached lookup (service, {repeat}x):      {_ms(cached)}")
    print(f"  same, cache emptied each time (DB read):  {_ms(database)}")
    print(f"direct Hub fetch (model info + config, {direct_repeat}x): {_ms(direct)}")
    print(
        f"cached is {ratio:.1f}x faster (median)   (goal: at least 20x); from the database "
        f"alone {statistics.median(direct) / statistics.median(database):.1f}x"
    )
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--hub-latency-ms",
        type=float,
        default=0.0,
        help="added to every fake Hub answer, as a distant Hub would",
    )
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    _prepare_environment(args)
    sys.path.insert(0, str(ROOT))
    from tests.support.fake_hub import FakeHub

    fake_hub = FakeHub().start()
    os.environ["HF_ENDPOINT"] = fake_hub.url

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from advisor.models import HfModelLookup

    HfModelLookup.objects.filter(requested_id=MODEL).delete()
    fake_hub.latency = args.hub_latency_ms / 1000
    engine = connection.vendor
    print(
        f"fake Hub {fake_hub.url}  database {engine}  added Hub latency {args.hub_latency_ms:g} ms"
    )

    info_calls, errors = _concurrent_lookups(fake_hub, args.concurrency)
    ratio = _cached_against_direct(args.repeat)

    fake_hub.stop()
    ok = info_calls == 1 and not errors and ratio >= 20
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
