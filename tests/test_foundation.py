"""The foundation: settings from the environment, /healthz, the local staff account."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "k3y-for-the-deploy-check-0123456789-abcdefghijklmnopqrstuvwxyz-XYZ",
    "DJANGO_ALLOWED_HOSTS": "triage.example.ac.uk",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://triage.example.ac.uk",
}


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_mode_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false" in result.stderr


def test_deploy_check_passes_with_the_documented_production_environment():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_malformed_boolean_variable_is_named_in_the_error():
    result = run_manage("check", env={"DJANGO_DEBUG": "perhaps"})
    assert result.returncode != 0
    assert "DJANGO_DEBUG must be true or false" in result.stderr


@pytest.mark.django_db
def test_healthz_reports_database_and_broker(client):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["database"]["status"] == "ok"
    assert body["broker"]["status"] == "ok"


@pytest.mark.django_db
def test_healthz_is_503_when_the_broker_does_not_answer(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:9/0"  # discard port: nothing listens
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"]["status"] == "down"


@pytest.mark.django_db
def test_local_staff_account_is_created_once(settings, django_user_model):
    settings.DEBUG = True
    call_command("create_local_staff")
    call_command("create_local_staff")
    user = django_user_model.objects.get(username="admin")
    assert user.is_staff
    assert user.is_superuser
    assert user.check_password("admin")


@pytest.mark.django_db
def test_local_staff_account_is_refused_in_production(settings, django_user_model):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="Refusing to create the local admin/admin"):
        call_command("create_local_staff")
    assert not django_user_model.objects.exists()


@pytest.mark.django_db
def test_the_header_sign_in_link_returns_to_the_page_it_was_clicked_on(client):
    # A researcher who signs in from a result page should land back on that result.
    response = client.get("/?ref=intranet")
    assert response.status_code == 200
    assert '<a href="/accounts/login/?next=/%3Fref%3Dintranet">Sign in</a>' in (
        response.content.decode()
    )
    response = client.get("/accounts/login/?next=/requests/")
    assert '<a href="/accounts/login/">Sign in</a>' in response.content.decode()
