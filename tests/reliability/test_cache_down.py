"""Redis as the cache goes away: pages that use the cache answer as if nothing were cached."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.urls import reverse
from pytest_django.asserts import assertContains

from advisor.models import AdvisorSession, HfModelLookup
from tests.support.redis_server import RedisServer, free_port

pytestmark = pytest.mark.django_db


def _redis_cache(url: str) -> dict:
    return {
        "default": {
            "BACKEND": "config.cache.ResilientRedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }


@pytest.fixture
def cache_down(settings):
    settings.CACHES = _redis_cache(f"redis://127.0.0.1:{free_port()}/0")


def test_the_model_question_and_suggestions_answer_with_the_cache_down(
    client, fake_hub, cache_down, django_capture_on_commit_callbacks
):
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()
    step = lambda name: reverse(  # noqa: E731
        "advisor:step", kwargs={"session_id": advisor_session.id, "step": name}
    )
    client.post(step("azure"), {"answer": "no"})
    client.post(step("work_kind"), {"answer": "lora"})

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(step("model"), {"answer": "mistralai/Mistral-7B-v0.1"})
    assert response.status_code == 302
    response = client.get(response["Location"])

    assert response.status_code == 200
    assert HfModelLookup.objects.get().status == HfModelLookup.Status.DONE
    response = client.get(reverse("advisor:model-suggest"), {"q": "mistral"})
    assertContains(response, "mistralai/Mistral-7B-v0.1")
    assert client.get(reverse("advisor:lookup-start")).status_code == 200


def test_every_cache_operation_is_a_miss_and_fast(cache_down):
    started = time.monotonic()
    cache.set("k", 1, 30)
    assert cache.get("k") is None
    assert cache.get("k", "fallback") == "fallback"
    assert cache.add("k", 1) is False
    assert cache.get_many(["k"]) == {}
    assert cache.has_key("k") is False
    cache.delete("k")
    cache.delete_many(["k"])
    with pytest.raises(ValueError):
        cache.incr("k")
    assert time.monotonic() - started < 5


def test_the_cache_works_again_when_redis_comes_back(settings, tmp_path):
    server = RedisServer(tmp_path / "redis")
    settings.CACHES = _redis_cache(server.url())
    assert cache.get("k") is None  # down: a miss
    server.start()
    try:
        cache.set("k", "v", 30)
        assert cache.get("k") == "v"
        server.stop()
        assert cache.get("k") is None
        server.start()
        assert cache.get("k") == "v"  # kept in the append-only file across the restart
    finally:
        server.stop()


def test_one_redis_client_serves_every_call_and_outlives_a_restart(settings, tmp_path):
    """The cache keeps one redis.Redis per server (Django builds one per call, ~0.15 ms each):
    reads and writes share it, and it reconnects after Redis restarts as a new one would."""
    server = RedisServer(tmp_path / "redis").start()
    try:
        settings.CACHES = _redis_cache(server.url())
        client = cache._cache.get_client("k", write=True)
        cache.set("k", "v", 30)
        assert cache.get("k") == "v"
        assert cache._cache.get_client("k") is client
        server.stop()
        assert cache.get("k") is None  # down: a miss
        server.start()
        assert cache.get("k") == "v"
        assert cache._cache.get_client("k") is client
    finally:
        server.stop()
