"""Send hostile requests to a running server and print how many got each status.

    .venv/bin/python bench/hostile_requests.py --url http://127.0.0.1:8000 --requests 10000

Start the server as production runs it (DJANGO_DEBUG=false, gunicorn); README, "Benchmarks",
has the command used for the figure there. Every request is one a careless or hostile client
could send: bodies with 5,000-digit numbers, NaN, 1e999, absurd config.json values, deep
nesting and junk bytes to the API; form posts declaring latin-1 or UTF-16 to every
CSRF-protected page, with and without a valid token; junk answers to every question of the
flowchart; junk model ids and suggestion queries; tampered and enumerated addresses; odd
methods and content types. The target is no 5xx at all. Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, urlsplit

STEPS = [
    "work_kind", "model", "model_params", "precision", "batch_size", "seq_len",
    "inference_tokens", "dataset_tokens", "epochs", "num_gpus", "timeline", "data_sensitivity",
    "hpc_experience", "azure", "who_pays", "notebooks", "cpu_data_size", "training_objective",
    "completion_tokens", "generations_per_prompt", "no_such_step",
]  # fmt: skip
FIELDS = [
    "model_id", "config", "params", "task", "precision", "batch_size", "seq_len", "tokens",
    "epochs", "gradient_checkpointing", "flash_attention", "mixed_precision", "optimizer",
    "lora_rank", "strategy", "num_gpus", "system", "accelerator", "training_objective",
    "precompute_reference", "generations_per_prompt", "new_tokens", "generation_tensor_parallel",
]  # fmt: skip
CONFIG_KEYS = [
    "model_type", "architectures", "vocab_size", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "intermediate_size", "num_local_experts",
]  # fmt: skip
NUMBER_TEXTS = [
    "9" * 5000, "-" + "9" * 4301, "1e999", "-1e999", "NaN", "Infinity", "1e308", "1e40",
    "0", "-1", "0.0000001", "4294967296", "18446744073709551616", "1" * 30, "1" * 31,
]  # fmt: skip
STRINGS = [
    "", "\u0000", "<script>alert(1)</script>", "'; DROP TABLE x;--", "../../etc/passwd",
    "meta-llama/Llama-2-7b-hf", "a" * 5000, "\ud800", "é", "🙂", "bf16", "lora", "ddp",
]  # fmt: skip


def json_value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(6 if depth < 3 else 3)
    if kind == 0:
        return rng.choice(NUMBER_TEXTS)
    if kind == 1:
        return json.dumps(rng.choice(STRINGS))
    if kind == 2:
        return rng.choice(["null", "true", "false", "[]", "{}"])
    if kind == 3:
        return "[" + ",".join(json_value(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    if kind == 4:
        keys = rng.sample(CONFIG_KEYS, rng.randrange(1, 5))
        return "{" + ",".join(f'"{k}": {json_value(rng, depth + 1)}' for k in keys) + "}"
    return str(rng.randrange(-(10**6), 10**12))


def api_body(rng: random.Random) -> bytes:
    choice = rng.randrange(5)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if choice == 1:
        return ("[" * rng.choice([10, 1000, 100000])).encode()
    fields = rng.sample(FIELDS, rng.randrange(1, 7))
    body = "{" + ",".join(f'"{f}": {json_value(rng)}' for f in fields) + "}"
    return body.encode("utf-8", errors="surrogatepass")


class Target:
    def __init__(self, url: str, host: str):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.host_header = host or parts.netloc
        self.csrf = ""
        self.session_paths: list[str] = []

    def send(
        self, method: str, path: str, body: bytes = b"", headers=None
    ) -> tuple[int, dict, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            all_headers = {"Host": self.host_header, **(headers or {})}
            if self.csrf:
                all_headers.setdefault("Cookie", f"csrftoken={self.csrf}")
            connection.request(method, path, body=body or None, headers=all_headers)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def prepare(self) -> None:
        """A CSRF cookie and a few real advisor sessions to aim answers at."""
        status, headers, _ = self.send("GET", "/")
        match = re.search(r"csrftoken=([A-Za-z0-9]+)", headers.get("Set-Cookie", ""))
        self.csrf = match.group(1) if match else "a" * 32
        for _ in range(5):
            status, headers, _ = self.send(
                "POST", "/", f"csrfmiddlewaretoken={self.csrf}".encode(),
                {"Content-Type": "application/x-www-form-urlencoded"},
            )  # fmt: skip
            location = headers.get("Location", "")
            if status == 302 and "/step/" in location:
                self.session_paths.append(urlsplit(location).path.split("/step/")[0])
        if not self.session_paths:
            sys.exit(f"could not start an advisor session (status {status}); is the server up?")


def hostile_request(target: Target, rng: random.Random) -> tuple[str, str, bytes, dict]:
    form = "application/x-www-form-urlencoded"
    charset = rng.choice(
        ["", "; charset=utf-8", "; charset=latin-1", "; charset=utf-16", "; charset=x"]
    )
    token = rng.choice([target.csrf, "", "a" * 32])
    kind = rng.randrange(10)
    if kind <= 2:
        ctype = rng.choice(
            ["application/json", "application/json; charset=latin-1", "text/plain", form]
        )
        return "POST", "/api/estimate", api_body(rng), {"Content-Type": ctype}
    if kind <= 5:
        session = rng.choice(target.session_paths)
        step = rng.choice(STEPS)
        answer = rng.choice(STRINGS + NUMBER_TEXTS[:6] + ["lora", "7", "2030-02-30", "1e308"])
        body = f"answer={quote(answer, safe='', errors='replace')}&csrfmiddlewaretoken={token}"
        encoding = "utf-16" if "16" in charset else "latin-1" if "latin" in charset else "utf-8"
        headers = {"Content-Type": form + charset}
        if rng.random() < 0.3:
            headers["HX-Request"] = "true"
        prefix = "/embed" if rng.random() < 0.3 else ""
        path = f"{prefix}{session}/step/{quote(step)}/"
        return "POST", path, body.encode(encoding, errors="replace"), headers
    if kind == 6:
        repo = quote(
            rng.choice(STRINGS + ["acme/" + "x" * 300, "a/b", "gpt2"]), safe="", errors="replace"
        )
        body = f"repo_id={repo}&csrfmiddlewaretoken={token}".encode()
        return "POST", "/lookups/", body, {"Content-Type": form + charset}
    if kind == 7:
        query = quote(rng.choice(STRINGS + ["mistral", "ll", "%%%"]), safe="", errors="replace")
        return "GET", f"/models/suggest?q={query}", b"", {"HX-Request": "true"}
    if kind == 8:
        path = rng.choice([
            f"/lookups/{rng.randrange(1, 50)}/", f"/lookups/{uuid.uuid4()}/", f"/a/{uuid.uuid4()}/",
            f"/a/{uuid.uuid4()}/result/", "/embed/a/not-a-uuid/", "/requests/999999/",
            f"{rng.choice(target.session_paths)}/result/", "/chart/", "/catalog/?sort=%00",
            "/admin/allocations/allocationrequest/?q=%00", "/accounts/login/?next=//evil.example",
        ])  # fmt: skip
        return rng.choice(["GET", "HEAD"]), path, b"", {}
    path = rng.choice(
        ["/", "/embed/", "/accounts/login/", "/admin/login/", "/catalog/", "/lookups/"]
    )
    body = f"csrfmiddlewaretoken={token}&username=%E9&password=%00".encode()
    method = rng.choice(["POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
    return method, path, body, {"Content-Type": form + charset}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--host", default="", help="Host header (default: from --url)")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    target = Target(args.url, args.host)
    target.prepare()
    plans = []
    rng = random.Random(args.seed)
    for _ in range(args.requests):
        plans.append(hostile_request(target, rng))

    counts: Counter[int] = Counter()
    errors: list[str] = []

    def run(plan):
        method, path, body, headers = plan
        try:
            status, _, content = target.send(method, path, body, headers)
        except (OSError, http.client.HTTPException) as exc:
            return 0, f"{method} {path}: {type(exc).__name__}: {exc}"
        detail = f"{method} {path} [{headers.get('Content-Type', '')}]: {content[:120]!r}"
        return status, detail if status >= 500 else ""

    started = time.monotonic()
    with ThreadPoolExecutor(args.concurrency) as pool:
        for status, detail in pool.map(run, plans):
            counts[status] += 1
            if detail:
                errors.append(detail)
    elapsed = time.monotonic() - started

    print(f"{sum(counts.values())} hostile requests in {elapsed:.0f} s against {args.url}")
    for status in sorted(counts):
        label = "no response" if status == 0 else str(status)
        print(f"  {label:>11}: {counts[status]}")
    server_errors = sum(n for status, n in counts.items() if status >= 500 or status == 0)
    print(f"server errors (5xx or no response): {server_errors}")
    for line in errors[:20]:
        print("  " + line)
    sys.exit(1 if server_errors else 0)


if __name__ == "__main__":
    main()
