"""Rate limits on anonymous estimates, lookups and suggestions: a 429 with Retry-After."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from advisor.models import AdvisorSession
from tests.allocations.factories import make_user
from tests.support.redis_server import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits_on(settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_ESTIMATES = "3/m"
    settings.RATELIMIT_LOOKUPS = "2/m"
    settings.RATELIMIT_SUGGESTIONS = "2/m"
    cache.clear()
    yield
    cache.clear()


def test_api_estimates_past_the_limit_get_a_json_429():
    client = Client()
    statuses = [
        client.post("/api/estimate", "{}", content_type="application/json").status_code
        for _ in range(4)
    ]
    assert statuses == [400, 400, 400, 429]
    response = client.post("/api/estimate", "{}", content_type="application/json")
    assert response["Retry-After"] == "60"
    assert "Too many requests" in response.json()["errors"][0]["message"]


def test_limits_are_per_client_address():
    first = Client(REMOTE_ADDR="192.0.2.1")
    second = Client(REMOTE_ADDR="192.0.2.2")
    for _ in range(3):
        first.post("/api/estimate", "{}", content_type="application/json")
    assert first.post("/api/estimate", "{}", content_type="application/json").status_code == 429
    assert second.post("/api/estimate", "{}", content_type="application/json").status_code == 400


def test_behind_the_proxy_the_limit_keys_on_the_address_it_forwards(settings):
    settings.CLIENT_IP_HEADER = "HTTP_X_REAL_IP"
    proxy = Client(REMOTE_ADDR="10.0.0.5")

    def post(real_ip):
        headers = {"X-Real-IP": real_ip} if real_ip is not None else {}
        return proxy.post(
            "/api/estimate", "{}", content_type="application/json", headers=headers
        ).status_code

    for _ in range(3):
        post("192.0.2.9")
    assert (post("192.0.2.9"), post("192.0.2.10")) == (429, 400)
    # No header, or a forged one: the proxy's own address, never an error page.
    assert {post(None), post("not-an-address"), post("")} <= {400, 429}


def test_signed_in_users_are_limited_per_account_and_staff_not_at_all():
    researcher, colleague = Client(), Client()
    researcher.force_login(make_user())
    colleague.force_login(make_user())
    for _ in range(3):
        researcher.post("/api/estimate", "{}", content_type="application/json")
    assert (
        researcher.post("/api/estimate", "{}", content_type="application/json").status_code == 429
    )
    assert colleague.post("/api/estimate", "{}", content_type="application/json").status_code == 400
    staff = Client()
    staff.force_login(make_user(staff=True))
    statuses = {
        staff.post("/api/estimate", "{}", content_type="application/json").status_code
        for _ in range(6)
    }
    assert statuses == {400}


def test_lookups_past_the_limit_get_the_429_page(fake_hub):
    client = Client()
    for name in ("acme/one", "acme/two"):
        client.post(reverse("advisor:lookup-start"), {"repo_id": name})
    response = client.post(reverse("advisor:lookup-start"), {"repo_id": "acme/three"})
    assert response.status_code == 429
    assert b"Too many requests" in response.content
    assert b"<html" in response.content
    assert client.get(reverse("advisor:lookup-start")).status_code == 200  # reading is free


def test_suggestions_past_the_limit_get_a_429(fake_hub):
    client = Client()
    for _ in range(2):
        assert client.get(reverse("advisor:model-suggest"), {"q": "mistral"}).status_code == 200
    assert client.get(reverse("advisor:model-suggest"), {"q": "mistral"}).status_code == 429


def test_the_flows_answers_count_as_estimates_and_the_page_shows_in_the_embed(settings):
    settings.EMBED_ALLOWED_ORIGINS = ["https://intranet.example.ac.uk"]
    client = Client()
    client.post(reverse("advisor:embed-start"))
    advisor_session = AdvisorSession.objects.get()
    step = reverse("advisor:embed-step", kwargs={"session_id": advisor_session.id, "step": "azure"})
    statuses = [client.post(step, {"answer": "no"}).status_code for _ in range(4)]
    assert statuses[-1] == 429
    refused = client.post(step, {"answer": "lora"})
    assert "X-Frame-Options" not in refused
    assert "https://intranet.example.ac.uk" in refused["Content-Security-Policy"]


def test_with_the_cache_down_requests_pass_rather_than_fail(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "config.cache.ResilientRedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    client = Client()
    statuses = {
        client.post("/api/estimate", "{}", content_type="application/json").status_code
        for _ in range(5)
    }
    assert statuses == {400}
