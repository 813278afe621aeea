"""A database connection the server dropped (a restart, an idle timeout) costs a visitor
nothing: the page's own read finds it, reconnects and answers. Django's per-request health
check (CONN_HEALTH_CHECKS) would have sent a `SELECT 1` first; a cached page's one read
doubles as that check instead (advisor.view_helpers._read_checking_connection).

Real PostgreSQL: the connection is ended by the server (pg_terminate_backend)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from advisor.models import AdvisorSession
from tests.support.walks import LORA_7B
from tests.support.worker import database_url

pytestmark = pytest.mark.integration

STEP = "dataset_tokens"


def _halfway(client: Client) -> str:
    """A session answered up to the dataset-size question; the question's address."""
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.order_by("-created_at").first()
    answers = LORA_7B[: [name for name, _ in LORA_7B].index(STEP)]
    for step, value in [("azure", "no"), *answers]:
        url = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step})
        assert client.post(url, {"answer": value}).status_code == 302, step
    return reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": STEP})


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _next_request() -> None:
    """What Django does as a server starts each request (request_started ->
    close_old_connections): the test client leaves it out."""
    connection.close_if_unusable_or_obsolete()


@pytest.mark.django_db(transaction=True)
def test_a_page_answers_after_the_server_dropped_its_connection(default_catalog):
    client = Client()
    url = _halfway(client)
    assert client.get(url).status_code == 200  # rendered and kept
    before = _backend_pid()
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [before])
    _next_request()
    page = client.get(url)
    assert page.status_code == 200
    assert b"dataset" in page.content.lower()
    assert _backend_pid() != before  # a new connection, opened by the page's read


@pytest.mark.django_db(transaction=True)
def test_a_cached_page_sends_no_separate_health_check(default_catalog, monkeypatch):
    client = Client()
    url = _halfway(client)
    client.get(url)
    checks = []
    usable = connection.is_usable
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) or usable())
    _next_request()
    assert client.get(url).status_code == 200
    assert checks == []
    # A page without that read keeps Django's own check (so this test can tell them apart).
    _next_request()
    assert client.get(reverse("catalog:systems")).status_code == 200
    assert checks == [1]
