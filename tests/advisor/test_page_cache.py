"""The advisor's pages are kept in the cache (web.page_cache) only where that cannot show one
visitor another's token, answers or account, and never outlive what they were rendered from."""

from __future__ import annotations

import re

import pytest
from django.contrib import messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.cache import cache
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import reverse

from advisor.models import AdvisorSession
from catalog.models import System
from tests.support.walks import LORA_7B
from tests.support.walks import walk_to_result as walk_answers
from web.page_cache import CSRF_PLACEHOLDER

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
STEP = "dataset_tokens"
FORM_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
HEADER_TOKEN = re.compile(r'"X-CSRFToken": "([^"]+)"')


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def _walk(client: Client, answers) -> AdvisorSession:
    """A session answered up to the dataset-size question (which it then shows)."""
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.order_by("-created_at").first()
    for step, value in [("azure", "no"), *answers]:
        response = client.post(_step_url(advisor_session, step), {"answer": value})
        assert response.status_code == 302, (step, response.content[:300])
    return advisor_session


def _step_url(advisor_session: AdvisorSession, step: str = STEP) -> str:
    return reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step})


def walk_to_result(client: Client):
    return walk_answers(client, LORA_7B, azure_first=True)


def _without_tokens(response) -> str:
    """The page less its CSRF tokens (masked afresh in every response)."""
    html = response.content.decode()
    return HEADER_TOKEN.sub("", FORM_TOKEN.sub("", html))


def _halfway(answers=None):
    index = [name for name, _ in LORA_7B].index(STEP)
    return (answers or LORA_7B)[:index]


def test_two_visitors_each_get_their_own_csrf_token_from_a_kept_page(default_catalog):
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    advisor_session = _walk(Client(), _halfway())
    url = _step_url(advisor_session)
    first_page = first.get(url).content.decode()  # rendered and kept
    second_page = second.get(url).content.decode()  # the kept page
    assert CSRF_PLACEHOLDER not in first_page + second_page
    first_token = FORM_TOKEN.search(first_page).group(1)
    second_token = FORM_TOKEN.search(second_page).group(1)
    assert HEADER_TOKEN.search(second_page).group(1)
    # Each visitor's token is good for their own cookie only.
    refused = second.post(url, {"answer": "20", "csrfmiddlewaretoken": first_token})
    assert refused.status_code == 403
    accepted = second.post(url, {"answer": "20", "csrfmiddlewaretoken": second_token})
    assert accepted.status_code == 302


def test_two_sessions_never_see_each_others_answers(default_catalog):
    mine, theirs = Client(), Client()
    halfway = _halfway()
    other = [(step, "1024" if step == "seq_len" else value) for step, value in halfway]
    my_session, their_session = _walk(mine, halfway), _walk(theirs, other)
    for _ in range(2):  # rendered, then kept
        my_page = mine.get(_step_url(my_session)).content.decode()
        their_page = theirs.get(_step_url(their_session)).content.decode()
        assert "2,048" in my_page
        assert "1,024" not in my_page
        assert "1,024" in their_page
        assert "2,048" not in their_page
        assert str(their_session.id) not in my_page


def test_a_changed_answer_changes_the_kept_page(client, default_catalog):
    advisor_session = _walk(client, _halfway())
    client.get(_step_url(advisor_session, "seq_len"))
    client.post(_step_url(advisor_session, "seq_len"), {"answer": "1024"})
    page = client.get(_step_url(advisor_session, "seq_len")).content.decode()
    assert 'value="1024"' in page


def test_a_kept_page_shows_who_is_signed_in_not_who_saw_it_first(
    default_catalog, django_user_model
):
    advisor_session = _walk(Client(), _halfway())
    anonymous = Client()
    assert "Sign in" in anonymous.get(_step_url(advisor_session)).content.decode()
    # The session is anyone's with the link until an account claims it: the visitor's own
    # header, not the first viewer's.
    alice = Client()
    alice.force_login(django_user_model.objects.create_user("alice", password="x"))
    page = alice.get(_step_url(advisor_session)).content.decode()
    assert "Sign out (alice)" in page
    assert "Sign in" not in page


def test_a_catalog_edit_changes_the_result_page(client, default_catalog):
    advisor_session, first = walk_to_result(client)
    url = reverse("advisor:result", kwargs={"session_id": advisor_session.id})
    assert _without_tokens(client.get(url)) == _without_tokens(first)  # kept, as rendered
    system = System.objects.get(name=advisor_session.estimate_result["recommendation"]["system"])
    system.display_name = "Renamed Cluster <b>"
    system.save()
    page = client.get(url).content.decode()
    assert "Renamed Cluster &lt;b&gt;" in page


def test_a_sort_is_its_own_page(client, default_catalog):
    advisor_session, _ = walk_to_result(client)
    url = reverse("advisor:result", kwargs={"session_id": advisor_session.id})
    by_rank = _without_tokens(client.get(url))
    by_hours = _without_tokens(client.get(url, {"sort": "gpu_hours"}))
    assert by_rank != by_hours
    assert _without_tokens(client.get(url, {"sort": "gpu_hours"})) == by_hours


def test_htmx_swap_and_whole_page_are_kept_apart(client, default_catalog):
    advisor_session = _walk(client, _halfway())
    url = _step_url(advisor_session)
    for _ in range(2):  # rendered, then kept
        whole = client.get(url)
        swap = client.get(url, headers=HX)
        restore = client.get(url, headers={**HX, "HX-History-Restore-Request": "true"})
        assert b"<html" in whole.content
        assert b"<html" in restore.content
        assert b"<html" not in swap.content
        assert swap.content.lstrip().startswith(b'<section id="advisor-step"')
        for response in (whole, swap, restore):
            assert "HX-Request" in response["Vary"]


def test_a_waiting_message_is_shown_once_and_the_page_not_kept(client, default_catalog):
    advisor_session = _walk(client, _halfway())
    url = _step_url(advisor_session)
    client.get(url)  # kept without the message
    storage = CookieStorage(RequestFactory().get("/"))
    storage.add(messages.INFO, "Saved for later.")
    carrier = HttpResponse()
    storage.update(carrier)
    client.cookies[storage.cookie_name] = carrier.cookies[storage.cookie_name].value
    assert "Saved for later." in client.get(url).content.decode()
    assert "Saved for later." not in client.get(url).content.decode()


@pytest.mark.parametrize("backend", ["dead-redis", "broken"])
def test_pages_render_when_the_cache_is_down(client, default_catalog, settings, backend):
    advisor_session, _ = walk_to_result(client)
    if backend == "dead-redis":
        settings.CACHES = {
            "default": {
                "BACKEND": "config.cache.ResilientRedisCache",
                "LOCATION": "redis://127.0.0.1:1/0",
                "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
            }
        }
    else:
        settings.CACHES = {"default": {"BACKEND": "tests.advisor.test_page_cache.BrokenCache"}}
    result = client.get(reverse("advisor:result", kwargs={"session_id": advisor_session.id}))
    assert result.status_code == 200
    assert b"GPU hours to request" in result.content
    step = client.get(_step_url(advisor_session, "epochs"))
    assert step.status_code == 200
    assert FORM_TOKEN.search(step.content.decode())


class BrokenCache:
    """A cache backend whose every call fails (an outage the Redis client does not name)."""

    def __init__(self, *args, **kwargs):
        pass

    def close(self, **kwargs):  # called when every request ends
        pass

    def clear(self):
        pass

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise RuntimeError("cache unavailable")

        return fail


def test_a_page_is_rendered_once_then_kept_until_the_next_release(
    client, default_catalog, monkeypatch
):
    from advisor import view_helpers
    from web import page_cache

    advisor_session = _walk(client, _halfway())
    rendered = []
    render = view_helpers.page
    monkeypatch.setattr(
        view_helpers, "page", lambda *args, **kwargs: rendered.append(1) or render(*args, **kwargs)
    )
    for _ in range(3):
        assert client.get(_step_url(advisor_session)).status_code == 200
    assert len(rendered) == 1
    # Redis outlives a deploy: another release's code or templates render the page afresh.
    monkeypatch.setattr(page_cache, "code_version", lambda: "the next release")
    assert client.get(_step_url(advisor_session)).status_code == 200
    assert len(rendered) == 2


def test_a_failed_estimate_is_tried_again_on_every_visit_never_kept(
    client, default_catalog, monkeypatch
):
    from advisor import flow_services

    advisor_session, _ = walk_to_result(client)
    url = reverse("advisor:result", kwargs={"session_id": advisor_session.id})

    def refuse(*args, **kwargs):
        raise ValueError("the engine cannot size this")

    monkeypatch.setattr(flow_services, "estimate", refuse)
    AdvisorSession.objects.filter(pk=advisor_session.pk).update(
        estimate_result={"error": "the engine cannot size this"}
    )
    for _ in range(2):
        assert "We could not estimate this workload" in client.get(url).content.decode()
    monkeypatch.undo()
    page = client.get(url).content.decode()
    assert "We could not estimate this workload" not in page
    assert "GPU hours to request" in page


def test_a_page_reads_its_session_as_the_orm_does(client, default_catalog, django_user_model):
    """load_page_session reads the row with a precompiled query and converts it itself: each
    field, the estimate's error and the catalog's stamp are what the ORM gives, the rest is
    read on demand, and an unknown id is a 404."""
    import uuid

    from django.db import connection
    from django.http import Http404

    from advisor import view_helpers
    from advisor.view_helpers import complete_session, load_page_session
    from catalog.selectors import catalog_version

    advisor_session, _ = walk_to_result(client)
    owner = django_user_model.objects.create_user("owner", password="not-used-here")
    AdvisorSession.objects.filter(pk=advisor_session.pk).update(
        user=owner, estimate_result={"error": "the engine cannot size this"}
    )
    request = RequestFactory().get("/")
    request.user = owner
    request.session = client.session

    read = load_page_session(request, advisor_session.pk)

    stored = AdvisorSession.objects.get(pk=advisor_session.pk)
    for field in ("id", "user_id", "chart", "answers", "current_step", "updated_at"):
        assert getattr(read, field) == getattr(stored, field), field
    assert read.updated_at.tzinfo is not None
    assert read.estimate_error == "the engine cannot size this"
    assert read.catalog_stamp_now == catalog_version()
    assert {"estimate_result", "project_plan"} <= read.get_deferred_fields()
    # The error has its own column: PostgreSQL would decompress the whole estimate to read it.
    query = view_helpers._page_session_query(connection.vendor)
    assert "estimate_result" not in query.sql
    complete_session(read)
    assert read.estimate_result == stored.estimate_result
    assert read.project_plan == stored.project_plan
    with pytest.raises(Http404):
        load_page_session(request, uuid.uuid4())


def test_a_reload_is_answered_from_the_workers_own_copy(client, default_catalog, monkeypatch):
    """A worker keeps the pages it served last: a reload needs no cache round trip, and an
    entry under a key never changes, so the copy is the page the shared cache would give."""
    from advisor import view_helpers
    from web.page_cache import local_pages

    advisor_session = _walk(client, _halfway())
    rendered = []
    render = view_helpers.page
    monkeypatch.setattr(
        view_helpers, "page", lambda *args, **kwargs: rendered.append(1) or render(*args, **kwargs)
    )
    first = client.get(_step_url(advisor_session))
    cache.clear()  # the shared cache loses it (evicted, restarted): the worker still has it
    again = client.get(_step_url(advisor_session))
    assert len(rendered) == 1
    assert _without_tokens(again) == _without_tokens(first)
    local_pages.clear()
    cache.clear()
    assert client.get(_step_url(advisor_session)).status_code == 200
    assert len(rendered) == 2
    # An answer changes the session's row, so its key: never the old copy.
    client.post(_step_url(advisor_session), {"answer": "1000000"})
    assert client.get(_step_url(advisor_session)).status_code == 200
    assert len(rendered) == 3


def test_the_workers_copies_keep_within_their_budget_and_their_time(settings, monkeypatch):
    from web import page_cache

    settings.PAGE_CACHE_LOCAL_BYTES = 3_000
    settings.PAGE_CACHE_SECONDS = 60
    pages = page_cache._LocalPages()
    for name in "abc":
        pages.put(name, ("stamp", name.encode() * 1_000))
    assert pages.get("a") is None  # the oldest made room
    assert pages.get("c") == ("stamp", b"c" * 1_000)
    pages.put("huge", ("stamp", b"x" * 5_000))
    assert pages.get("huge") is None  # larger than the whole budget: never kept
    now = page_cache.time.monotonic()
    monkeypatch.setattr(page_cache.time, "monotonic", lambda: now + 61)
    assert pages.get("c") is None  # past PAGE_CACHE_SECONDS, as the shared cache forgets it
