"""Issue 11, section 1 and 7: bad input at every entry point is a clear 4xx, never a 500; lookup
pages cannot be enumerated; a visitor who answered nothing leaves no session row."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from advisor.flowchart import load_chart
from advisor.models import AdvisorSession, HfModelLookup

pytestmark = pytest.mark.django_db

CONFIGS = Path(__file__).resolve().parents[1] / "engine" / "configs"
FORM_LATIN1 = "application/x-www-form-urlencoded; charset=latin-1"


@pytest.fixture
def production_client(settings):
    """DEBUG off and exceptions answered as the server would, not raised into the test."""
    settings.DEBUG = False
    return Client(raise_request_exception=False)


@pytest.fixture
def default_catalog():
    call_command("load_catalog", "default", stdout=io.StringIO())


def post_json(client, body: str | bytes):
    return client.post("/api/estimate", data=body, content_type="application/json")


def test_a_number_longer_than_python_converts_is_a_json_400(production_client):
    response = post_json(production_client, '{"params": ' + "9" * 5000 + "}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    message = response.json()["errors"][0]["message"]
    assert "a whole number in the body has 5000 digits" in message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"params": 1e999}', "too large to be a real value"),
        ('{"params": NaN}', "NaN is not a number JSON allows"),
        ('{"params": -Infinity}', "-Infinity is not a number JSON allows"),
    ],
)
def test_numbers_json_does_not_allow_are_400s(production_client, body, words):
    response = post_json(production_client, body)
    assert response.status_code == 400
    assert words in response.json()["errors"][0]["message"]


def test_the_estimate_command_refuses_a_huge_number(tmp_path):
    path = tmp_path / "request.json"
    path.write_text('{"params": ' + "9" * 5000 + "}")
    with pytest.raises(CommandError, match="has 5000 digits"):
        call_command("estimate", "--input", str(path), stdout=io.StringIO())


@pytest.mark.parametrize(
    ("field", "value"),
    [("vocab_size", 1e308), ("num_hidden_layers", 1e40), ("hidden_size", 10**25)],
)
def test_absurd_config_values_are_field_errors_through_the_api(
    production_client, default_catalog, field, value
):
    # The bound itself lives in the engine (advisor/engine/architecture: counts beyond any real
    # model are refused); this proves it reaches the API's caller as a field message.
    config = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf" / "config.json").read_text())
    config[field] = value
    body = {"config": config, "task": "inference", "precision": "bf16"}
    response = post_json(production_client, json.dumps(body))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["field"] == f"config.{field}"
    assert "beyond any real model" in errors[0]["message"]


def test_an_unexpected_api_failure_is_json_too(production_client, monkeypatch):
    from advisor import api

    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(api, "estimate_run", broken)
    response = post_json(production_client, '{"params": 1000}')
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert "Something went wrong on our side" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    "url", ["/", "/embed/", "/lookups/", "/accounts/login/", "/admin/login/", "/catalog/"]
)
@pytest.mark.parametrize("charset", ["latin-1", "utf-16", "no-such-charset"])
def test_a_form_post_in_another_charset_is_a_400_page_on_every_csrf_protected_url(
    settings, url, charset
):
    settings.DEBUG = False
    client = Client(raise_request_exception=False, enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "a" * 32
    response = client.generic(
        "POST",
        url,
        b"answer=caf%E9&csrfmiddlewaretoken=" + b"a" * 32,
        content_type=f"application/x-www-form-urlencoded; charset={charset}",
    )
    # Django refuses non-UTF-8 form bodies (BadRequest); a charset Python does not know is
    # read as UTF-8. Either way an answer, never a 500.
    assert response.status_code < 500, response.content[:300]
    if charset != "no-such-charset":
        assert response.status_code == 400
        assert b"could not be understood" in response.content


def test_error_pages_inside_the_embed_show_in_the_frame(settings):
    settings.DEBUG = False
    settings.EMBED_ALLOWED_ORIGINS = ["https://intranet.example.ac.uk"]
    client = Client(raise_request_exception=False, enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "a" * 32
    response = client.generic(
        "POST", "/embed/", b"csrfmiddlewaretoken=" + b"a" * 32, content_type=FORM_LATIN1
    )
    assert response.status_code == 400
    assert "X-Frame-Options" not in response
    assert "https://intranet.example.ac.uk" in response["Content-Security-Policy"]
    assert b'class="embed"' in response.content
    missing = client.get("/embed/no-such-page/")
    assert missing.status_code == 404
    assert "X-Frame-Options" not in missing
    assert "frame-ancestors" in missing["Content-Security-Policy"]
    assert client.get("/no-such-page/")["X-Frame-Options"] == "DENY"


def test_lookup_pages_have_unguessable_addresses():
    lookup = HfModelLookup.objects.create(
        repo_id="acme/private-model", requested_id="acme/private-model"
    )
    client = Client()
    assert client.get(f"/lookups/{lookup.pk}/").status_code == 404
    assert client.get(f"/lookups/{uuid.uuid4()}/").status_code == 404
    page = client.get(lookup.get_absolute_url())
    assert page.status_code == 200
    assert str(lookup.token) in lookup.get_absolute_url()
    other = HfModelLookup.objects.create(repo_id="acme/other", requested_id="acme/other")
    assert other.token != lookup.token


def test_a_visitor_who_answered_nothing_leaves_no_session_row():
    client = Client()
    assert client.get("/").status_code == 200
    response = client.post(reverse("advisor:start"))
    assert response.status_code == 302
    assert client.get(response["Location"]).status_code == 200
    advisor_session = AdvisorSession.objects.get()
    assert client.get(reverse("advisor:resume", args=[advisor_session.id])).status_code == 302
    assert Session.objects.count() == 0

    first = load_chart(advisor_session.chart).node(advisor_session.current_step)
    step = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": first.id})
    assert client.post(step, {"answer": first.choices[0].value}).status_code == 302
    assert Session.objects.count() == 1
    # The start page now offers to continue where they left off.
    assert str(advisor_session.id) in client.get("/").content.decode()


def test_expired_sessions_are_cleared_by_the_scheduled_task(settings):
    from datetime import timedelta

    from django.utils import timezone

    from config.tasks import sessions_clear_task

    Session.objects.create(
        session_key="x" * 32, session_data="", expire_date=timezone.now() - timedelta(days=1)
    )
    Session.objects.create(
        session_key="y" * 32, session_data="", expire_date=timezone.now() + timedelta(days=1)
    )
    sessions_clear_task.delay()
    assert list(Session.objects.values_list("session_key", flat=True)) == ["y" * 32]
    assert "sessions-clear" in settings.CELERY_BEAT_SCHEDULE
