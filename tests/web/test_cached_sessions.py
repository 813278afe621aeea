"""Sessions read from the shared cache (config/sessions.py): anonymous visitors' pages skip the
session query, and signing out takes effect whatever the cache does."""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.cached_db import KEY_PREFIX
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from advisor.models import AdvisorSession
from tests.allocations.factories import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"


@pytest.fixture(autouse=True)
def cached_sessions(settings):
    settings.SESSION_ENGINE = "config.sessions"
    cache.clear()
    yield
    cache.clear()


def _anonymous_walk(client: Client) -> AdvisorSession:
    from django.core.management import call_command

    call_command("load_catalog", "default", verbosity=0)
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()
    step = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": "azure"})
    client.post(step, {"answer": "no"})
    return advisor_session


def test_an_anonymous_visitors_session_is_read_from_the_cache(
    client, django_assert_max_num_queries
):
    advisor_session = _anonymous_walk(client)
    start = reverse("advisor:start")
    client.get(start)
    with django_assert_max_num_queries(2):  # the active chart and the advisor session offered
        page = client.get(start).content.decode()
    # "Continue where you left off" still comes from the visitor's session.
    assert reverse("advisor:resume", kwargs={"session_id": advisor_session.id}) in page


def test_a_cached_copy_lives_at_most_session_cache_seconds(client, settings, monkeypatch):
    settings.SESSION_CACHE_SECONDS = 42
    timeouts = []
    real_set = cache.set

    def recording_set(key, value, timeout=None, **kwargs):
        if key.startswith(KEY_PREFIX):
            timeouts.append(timeout)
        return real_set(key, value, timeout, **kwargs)

    monkeypatch.setattr(cache, "set", recording_set)
    _anonymous_walk(client)
    assert timeouts
    assert max(timeouts) <= 42


def test_signing_out_works_even_when_the_cache_loses_every_write(client, monkeypatch):
    user = make_user()
    assert client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    assert client.get("/requests/").status_code == 200
    # A cache that answers reads but drops every write and delete (a timeout under load).
    monkeypatch.setattr(cache, "set", lambda *args, **kwargs: None)
    monkeypatch.setattr(cache, "delete", lambda *args, **kwargs: False)
    client.post(reverse("logout"))
    assert client.get("/requests/").status_code == 302  # to the sign-in page


def test_a_stale_copy_naming_a_signed_in_user_is_ignored(client):
    user = make_user()
    client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    key = client.cookies["sessionid"].value
    data = {**client.session.load()}
    client.post(reverse("logout"))
    # As if dropping the signed-in copy had failed: the old cookie finds it in the cache.
    cache.set(KEY_PREFIX + key, data)
    stale = Client()
    stale.cookies["sessionid"] = key
    assert stale.get("/requests/").status_code == 302
