"""How long the advisor takes per step: walks the default chart with Django's test client.

Run: DATABASE_URL=... .venv/bin/python bench/flow_walk.py
Prints the median and worst time per answer POST and per result page, for a CPU path (no
engine) and a GPU path (the V100 decision and the result each call the engine).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from advisor.models import AdvisorSession  # noqa: E402
from tests.support.walks import CPU_SCRAPING, LORA_7B, changed  # noqa: E402

# The bench walks the LoRA path without the library and plan questions, as it always has.
LORA = changed(LORA_7B, framework_training=None, project_plan=None)
CPU = CPU_SCRAPING


def run(name: str, answers, rounds: int = 5) -> None:
    posts, results = [], []
    for _ in range(rounds):
        client = Client()
        client.post("/")
        session = AdvisorSession.objects.order_by("-created_at").first()
        for step, value in answers:
            start = time.perf_counter()
            response = client.post(f"/a/{session.id}/step/{step}/", {"answer": value})
            posts.append(time.perf_counter() - start)
            assert response.status_code == 302, (step, response.status_code)
        start = time.perf_counter()
        assert client.get(response["Location"]).status_code == 200
        results.append(time.perf_counter() - start)
    print(
        f"{name}: {len(posts)} answer posts, median {statistics.median(posts) * 1000:.1f} ms, "
        f"worst {max(posts) * 1000:.1f} ms; result page median "
        f"{statistics.median(results) * 1000:.1f} ms, worst {max(results) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    setup_test_environment()
    call_command("migrate", verbosity=0)
    call_command("load_catalog", "default", verbosity=0)
    run("CPU path (web scraping)", CPU)
    run("GPU path (LoRA 7B, V100 decision + engine)", LORA)
