"""Deployment files: every variable documented, compose valid, production entry points real."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def variables_read_by(path: Path) -> set[str]:
    source = path.read_text()
    pattern = r'(?:env_bool|env_int|env_list|os\.environ\.get|_required)\(\s*"([A-Z_]+)"'
    return set(re.findall(pattern, source))


def documented_variables() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^([A-Z_]+)=", text, flags=re.MULTILINE))


def test_env_example_documents_every_variable_the_settings_read():
    missing = variables_read_by(ROOT / "config" / "settings.py") - documented_variables()
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_compose_runs_web_worker_and_beat_from_one_image_and_environment():
    # Issue 11 added beat (the outbox sweep) and the nginx proxy in front of gunicorn.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "redis", "web", "worker", "beat", "proxy"}
    assert services["web"]["command"] == ["bin/start-web"]
    assert services["worker"]["command"] == ["bin/start-worker"]
    assert services["beat"]["command"] == ["bin/start-beat"]
    for name in ("web", "worker", "beat"):
        assert services[name]["image"] == "allocation-triage:latest"
        assert services[name]["env_file"] == ".env"
    for name in services:
        assert "healthcheck" in services[name], f"{name} has no healthcheck"
    assert set(compose["volumes"]) == {"postgres-data", "redis-data"}


def test_only_the_buffering_proxy_is_published_with_timeouts_for_slow_clients():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert "ports" not in services["web"], "gunicorn must not be reachable past the proxy"
    assert services["proxy"]["image"].startswith("nginx:")
    assert services["proxy"]["ports"] == ["8000:80"]
    mount = services["proxy"]["volumes"][0].split(":")
    conf = (ROOT / mount[0]).read_text()
    assert mount[1] == "/etc/nginx/conf.d/default.conf"
    for directive in (
        "proxy_pass http://triage_web;",
        "server web:8000;",
        "proxy_request_buffering on;",
        "proxy_buffering on;",
        "client_header_timeout 10s;",
        "client_body_timeout 10s;",
        "proxy_set_header X-Real-IP $remote_addr;",
    ):
        assert directive in conf
    assert services["web"]["environment"]["DJANGO_CLIENT_IP_HEADER"] == "HTTP_X_REAL_IP"


def test_compose_file_parses_with_docker_compose(tmp_path):
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        command = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        command = ["docker-compose"]
    else:
        if os.environ.get("CI") == "true":
            pytest.fail("neither `docker compose` nor `docker-compose` is installed")
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    env_file = ROOT / ".env"
    created = not env_file.exists()
    if created:
        shutil.copy(ROOT / ".env.example", env_file)
    try:
        result = subprocess.run(
            [*command, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if created:
            env_file.unlink()
    assert result.returncode == 0, result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_web(env: dict, log_path: Path) -> subprocess.Popen:
    """bin/start-web until its healthcheck passes."""
    log = log_path.open("a")
    process = subprocess.Popen(
        [str(ROOT / "bin" / "start-web")],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, log_path.read_text()
        try:
            result = subprocess.run(
                [str(ROOT / "bin" / "healthcheck")], env=env, capture_output=True, timeout=10
            )
        except subprocess.TimeoutExpired:
            result = None
        if result is not None and result.returncode == 0:
            return process
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.5)


def stop_web(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        process.wait(timeout=20)


@pytest.mark.integration
def test_a_staff_edit_survives_a_restart_of_the_web_start_script(transactional_db, tmp_path):
    """Issue 11: bin/start-web loads the catalog into a fresh database only; a restart keeps
    an admin edit (a trial limit of 400 changed to 123) and a system staff added."""
    from django.db import connection

    from catalog.models import System
    from tests.support.worker import database_url

    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "entry-point-test-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DJANGO_ALLOWED_HOSTS": "triage.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "PORT": str(free_port()),
        "WEB_CONCURRENCY": "1",
    }
    log_path = tmp_path / "web.log"
    stop_web(start_web(env, log_path))  # the first start: a fresh database gets the catalog
    trial = System.objects.get(trial_gpu_hours=400, name="baskerville")
    trial.trial_gpu_hours = 123
    trial.save()
    System.objects.create(
        **{
            f.name: getattr(trial, f.name)
            for f in System._meta.concrete_fields
            if f.name not in ("id", "name")
        },
        name="staff-added",
    )

    stop_web(start_web(env, log_path))

    trial.refresh_from_db()
    assert trial.trial_gpu_hours == 123
    assert System.objects.filter(name="staff-added").exists()
    assert "The catalog is already loaded; staff edits are kept." in log_path.read_text()


@pytest.mark.integration
def test_production_web_entry_point_serves_healthz(transactional_db, tmp_path):
    """bin/start-web (docker-compose "web") migrates, loads the catalog and serves with gunicorn."""
    from django.db import connection

    from tests.support.worker import database_url

    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "entry-point-test-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DJANGO_ALLOWED_HOSTS": "triage.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
    }
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen(
        [str(ROOT / "bin" / "start-web")],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, (tmp_path / "web.log").read_text()
            try:
                result = subprocess.run(
                    [str(ROOT / "bin" / "healthcheck")], env=env, capture_output=True, timeout=10
                )
            except subprocess.TimeoutExpired:
                result = None
            if result is not None and result.returncode == 0:
                break
            assert time.monotonic() < deadline, (tmp_path / "web.log").read_text()
            time.sleep(0.5)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/healthz", headers={"Host": "triage.test"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read().decode()
        assert '"database": {"status": "ok", "engine": "postgresql"}' in body
        assert '"transport": "redis"' in body
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 15)
            process.wait(timeout=20)
