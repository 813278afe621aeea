"""Pages per second under load: the advisor's pages against a bare Django view, in one run.

Run (PostgreSQL on 127.0.0.1, wrk installed: `apt-get install wrk`, which bin/dev does as root):

    .venv/bin/python bench/page_throughput.py            # 10 s per page, 4 workers, 32 clients
    .venv/bin/python bench/page_throughput.py --cache-url redis://127.0.0.1:6379/15  # as deployed

It creates (or reuses) the database `allocation_triage_bench`, migrates it, loads the default
catalog and walks two advisor sessions (one halfway, one to its result) with Django's test
client. Then it starts gunicorn with 4 sync workers on 127.0.0.1, serving the project's own
URLs plus one bare view (`/bench/bare/`: a plain HttpResponse behind the same middleware), and
drives each page with wrk (32 connections, the cookies a returning browser sends: session and
CSRF) after a short warm-up (which also fills each worker's page cache: the step and result
pages are then answered from it, as a reload or a back button is; the CPU table also gives
their cost with the cache emptied). It prints requests/s and the 99th-percentile latency per
page, and each page's share of the bare view's throughput and its p99 as a multiple of the
bare view's p99. Loopback only; the whole run is bounded (about 4 x (warm-up + duration) plus
setup, every step under a timeout).

Targets (issue 10): a flowchart step and the result page at least 30 % of the bare view's
throughput, with a p99 within 3x of the bare view's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/allocation_triage_bench"
TARGET_SHARE = 0.30
# Pages the advisor keeps in its page cache (web/page_cache.py): their uncached cost is shown too.
CACHED_PAGES = ("flowchart step", "result page")
TARGET_P99_MULTIPLE = 3.0

sys.path.insert(0, str(ROOT))  # the walk is the tests' own (tests/support/walks.py)
from tests.support.walks import LORA_7B as LORA  # noqa: E402

# The flowchart step measured: the dataset-size question, with every earlier one answered.
MEASURED = [name for name, _value in LORA].index("dataset_tokens")


# The cookies the bench's visitors send (a Cookie header's value in Page.cookie).
COOKIES = ("sessionid", "csrftoken")


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    cookie: str = ""

    def cookies(self) -> dict[str, str]:
        pairs = (pair.split("=", 1) for pair in self.cookie.split("; ") if pair)
        return dict(pairs)


@dataclass(frozen=True)
class CpuFigures:
    ms_per_request: float
    queries_per_request: float
    # The same with the page cache emptied before each request (a first visit, or a changed
    # answer or catalog); None for pages that are not cached.
    uncached_ms_per_request: float | None = None


@dataclass(frozen=True)
class Figures:
    requests_per_second: float
    p99_ms: float
    errors: int
    # CPU ms per request of each process serving it (gunicorn, PostgreSQL, Redis, wrk).
    cpu_ms: dict[str, float] = field(default_factory=dict)


def _environment(database_url: str, cache_url: str = "") -> dict[str, str]:
    """Production settings (DEBUG off) over plain HTTP on the loopback; the cache is Redis at
    `cache_url` as in production (pages and anonymous sessions shared by the workers), else
    each worker's own memory (sessions then read from the database)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CELERY_BROKER_URL", "CACHE_URL")
    }
    if cache_url:
        env["CACHE_URL"] = cache_url
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_SESSION_COOKIE_SECURE": "false",
            "DJANGO_CSRF_COOKIE_SECURE": "false",
            # 32 clients from one address would be a flood to the per-client limits.
            "RATELIMIT_ENABLE": "false",
        }
    )
    return env


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    server = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def _prepare(env: dict[str, str]) -> list[Page]:
    """Migrate, load the catalog, and walk the sessions whose pages are measured."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from advisor.models import AdvisorSession

    call_command("migrate", verbosity=0, interactive=False)
    # DEBUG off serves static files from the manifest, as production does (staticfiles/).
    call_command("collectstatic", verbosity=0, interactive=False)
    call_command("load_catalog", "default", verbosity=0)

    def walk(answers) -> tuple[str, str]:
        client = Client()
        client.get("/")  # the start page, as a browser arrives: it sets the CSRF cookie
        client.post("/")
        session = AdvisorSession.objects.order_by("-created_at").first()
        for step, value in [("azure", "no"), *answers]:  # the chart asks about Azure first
            response = client.post(f"/a/{session.id}/step/{step}/", {"answer": value})
            if response.status_code != 302:
                raise SystemExit(f"the bench's walk stopped at {step!r}: {response.status_code}")
        # The cookies a browser sends on a reload: the session's and the CSRF token's.
        cookies = "; ".join(f"{name}={client.cookies[name].value}" for name in COOKIES)
        return str(session.id), cookies

    halfway, halfway_cookie = walk(LORA[:MEASURED])
    done, done_cookie = walk(LORA)
    return [
        Page("bare view", "/bench/bare/"),
        Page("flowchart step", f"/a/{halfway}/step/{LORA[MEASURED][0]}/", halfway_cookie),
        Page("result page", f"/a/{done}/result/", done_cookie),
        Page("/catalog/", "/catalog/"),
    ]


def _cpu_per_request(pages: list[Page], *, requests: int) -> dict[str, CpuFigures]:
    """Each page's CPU time per request in this process (Django's test client, no HTTP server,
    the database's own work not counted) and its queries: figures a loaded machine disturbs
    far less than requests/s, since CPU time counts only this process's work."""
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from web.page_cache import local_pages

    sys.path.insert(0, str(BENCH))
    settings.ROOT_URLCONF = "page_urls"
    queries = [0]

    def count(execute, sql, params, many, context):
        queries[0] += 1
        return execute(sql, params, many, context)

    figures = {}
    for page in pages:
        client = Client()
        for name, value in page.cookies().items():
            client.cookies[name] = value
        first = client.get(page.path)  # warm: templates compiled, catalog built
        if first.status_code != 200:
            raise SystemExit(f"{page.path} answered {first.status_code} in process")
        queries[0] = 0
        with connection.execute_wrapper(count):
            started = time.process_time()
            for _ in range(requests):
                client.get(page.path)
            spent = time.process_time() - started
        uncached = None
        if page.name in CACHED_PAGES:
            started = time.process_time()
            for _ in range(requests):
                cache.clear()
                local_pages.clear()  # the process's own copies too (web.page_cache)
                client.get(page.path)
            uncached = (time.process_time() - started) / requests * 1000
        figures[page.name] = CpuFigures(spent / requests * 1000, queries[0] / requests, uncached)
    return figures


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(url: str, *, timeout: float) -> None:
    """Until a worker answers (workers boot after the port opens, slowly on a busy machine)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"gunicorn did not answer {url} within {timeout:g} s")


def _process_cpu(server_pid: int, database_url: str) -> dict[str, float]:
    """CPU seconds so far of what serves the pages: gunicorn's processes, the bench database's
    PostgreSQL backends, the Redis server (shared with anything else using it) and wrk (a
    finished child). Counted from /proc, so Linux only ({} elsewhere); unlike requests/s,
    CPU per request is little changed by other work on the machine."""
    import resource

    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = {"gunicorn": 0.0, "postgres": 0.0, "redis": 0.0}
    spent["wrk"] = children.ru_utime + children.ru_stime
    database = database_url.rsplit("/", 1)[1]
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        seconds = (int(stat[11]) + int(stat[12])) / tick  # utime + stime
        if int(entry.name) == server_pid or int(stat[1]) == server_pid:
            spent["gunicorn"] += seconds
        elif command.startswith("postgres") and f" {database} " in command:
            spent["postgres"] += seconds
        elif command.startswith("redis-server"):
            spent["redis"] += seconds
    return spent


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk(url: str, *, cookie: str, connections: int, threads: int, seconds: int) -> Figures:
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    command += ["--timeout", "10s"]  # a slow answer counts in p99, not as a socket error
    if cookie:
        command += ["-H", f"Cookie: {cookie}"]
    out = subprocess.run(
        [*command, url], capture_output=True, text=True, check=True, timeout=seconds + 30
    ).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
    if os.environ.get("BENCH_VERBOSE"):
        print(out, file=sys.stderr)
    if rate is None or p99 is None:
        raise SystemExit(f"could not read wrk's output for {url}:\n{out}")
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failures = int(bad.group(1)) if bad else 0
    failures += sum(int(n) for n in errors.groups()) if errors else 0
    return Figures(
        requests_per_second=float(rate.group(1)),
        p99_ms=float(p99.group(1)) * _UNITS_MS[p99.group(2)],
        errors=failures,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument(
        "--cache-url",
        default=os.environ.get("BENCH_CACHE_URL", ""),
        help="a Redis cache, as production has (redis://127.0.0.1:6379/N; emptied by the run)",
    )
    parser.add_argument("--seconds", type=int, default=10, help="measured seconds per page")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured seconds per page")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument(
        "--cpu-requests", type=int, default=100, help="in-process requests per page for CPU time"
    )
    args = parser.parse_args(argv)
    for tool in ("wrk",):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    gunicorn = Path(sys.executable).with_name("gunicorn")
    database_url = args.database_url or DEFAULT_DATABASE
    _ensure_database(database_url)
    env = _environment(database_url, args.cache_url)
    pages = _prepare(env)
    cpu = _cpu_per_request(pages, requests=args.cpu_requests)

    port = _free_port()
    server = subprocess.Popen(
        [
            str(gunicorn),
            "page_wsgi:application",
            f"--pythonpath={BENCH},{ROOT}",
            f"--bind=127.0.0.1:{port}",
            f"--workers={args.workers}",
            "--worker-class=sync",
            "--log-level=warning",
        ],
        cwd=ROOT,
        env=env,
    )
    figures: dict[str, Figures] = {}
    try:
        _wait_for(f"http://127.0.0.1:{port}/bench/bare/", timeout=90)
        for page in pages:
            url = f"http://127.0.0.1:{port}{page.path}"
            kwargs = {"cookie": page.cookie, "connections": args.connections}
            _wrk(url, threads=args.threads, seconds=args.warmup, **kwargs)
            before = _process_cpu(server.pid, database_url)
            measured = _wrk(url, threads=args.threads, seconds=args.seconds, **kwargs)
            requests = measured.requests_per_second * args.seconds
            spent = {
                name: (seconds - before.get(name, 0.0)) / requests * 1000
                for name, seconds in _process_cpu(server.pid, database_url).items()
            }
            figures[page.name] = replace(measured, cpu_ms=spent)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
    _report_cpu(cpu, args)
    return _report(figures, args)


def _report_cpu(cpu: dict[str, CpuFigures], args) -> None:
    bare = cpu["bare view"]
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    print(
        f"in process ({args.cpu_requests} requests per page, Django's test client, "
        f"machine load {load}):"
    )
    print(f"{'page':<16} {'CPU ms':>9} {'x bare':>8} {'queries':>8} {'uncached CPU ms':>16}")
    for name, fig in cpu.items():
        uncached = f"{fig.uncached_ms_per_request:>16.2f}" if fig.uncached_ms_per_request else ""
        print(
            f"{name:<16} {fig.ms_per_request:>9.2f} "
            f"{fig.ms_per_request / bare.ms_per_request:>7.1f}x {fig.queries_per_request:>8.1f}"
            f" {uncached}"
        )
    print()


def _report(figures: dict[str, Figures], args) -> int:
    bare = figures["bare view"]
    if not bare.requests_per_second:
        raise SystemExit(f"the bare view failed under load: {bare}")
    print(
        f"gunicorn {args.workers} sync workers, wrk {args.connections} connections, "
        f"{args.seconds} s per page after {args.warmup} s warm-up, PostgreSQL, DEBUG off, "
        f"cache {'Redis' if args.cache_url else 'per worker (memory)'}, "
        f"machine load {', '.join(f'{n:.1f}' for n in os.getloadavg())}"
    )
    print(f"{'page':<16} {'req/s':>9} {'p99 ms':>9} {'of bare':>8} {'p99 x':>7} {'errors':>7}")
    failed = False
    cpu_lines = []
    for name, fig in figures.items():
        share = fig.requests_per_second / bare.requests_per_second
        multiple = fig.p99_ms / bare.p99_ms
        mark = ""
        if name in ("flowchart step", "result page"):
            ok = share >= TARGET_SHARE and multiple <= TARGET_P99_MULTIPLE and not fig.errors
            mark = "  meets target" if ok else "  MISSES target"
            failed |= not ok
        print(
            f"{name:<16} {fig.requests_per_second:>9,.0f} {fig.p99_ms:>9.1f} {share:>8.0%} "
            f"{multiple:>6.1f}x {fig.errors:>7}{mark}"
        )
        if fig.cpu_ms and bare.cpu_ms:
            total, bare_total = sum(fig.cpu_ms.values()), sum(bare.cpu_ms.values())
            parts = "  ".join(f"{part} {ms:.2f}" for part, ms in fig.cpu_ms.items())
            cpu_lines.append(f"{name:<16} {total:>6.2f} {bare_total / total:>8.0%}   {parts}")
    if cpu_lines:
        # Where CPU is the limit, requests/s go as 1 / CPU per request: the share estimates the
        # throughput share on a machine doing nothing else (other work moves it less than it
        # moves requests/s).
        print("\nCPU ms per request, every process serving it (share: bare view's / page's)")
        print(f"{'page':<16} {'CPU ms':>6} {'share':>8}   by process")
        print("\n".join(cpu_lines))
    print(
        f"targets: flowchart step and result page >= {TARGET_SHARE:.0%} of the bare view's "
        f"requests/s, p99 <= {TARGET_P99_MULTIPLE:g}x the bare view's"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
