"""Issue 11: a broken active chart on disk falls back to the last good one with a warning to
staff; researchers never see a 500 on / or /chart/."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.management import call_command
from django.test import Client

from advisor import flow_services, flowchart
from advisor.models import ActiveFlowchart, AdvisorSession
from tests.allocations.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def charts(tmp_path, monkeypatch):
    for path in flowchart.CHARTS_DIR.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(flowchart, "CHARTS_DIR", tmp_path)
    monkeypatch.setattr(flow_services, "_good_chart_keys", [])
    call_command("load_catalog", "default", stdout=io.StringIO())
    return tmp_path


def test_a_broken_active_chart_falls_back_to_the_last_good_one_and_staff_are_told(charts, settings):
    settings.DEBUG = False
    row = ActiveFlowchart.objects.create(chart="uva")
    researcher = Client(raise_request_exception=False)
    assert researcher.get("/").status_code == 200  # uva was active and loaded
    row.chart = "lancaster"
    row.save()
    assert researcher.get("/").status_code == 200  # then staff chose lancaster

    (charts / "lancaster.yaml").write_text("key: lancaster\nstart: [unclosed\n")

    for path in ("/", "/chart/"):
        response = researcher.get(path)
        assert response.status_code == 200, path
        assert b"For staff" not in response.content
    researcher.post("/")
    assert AdvisorSession.objects.get().chart == "uva"  # the chart active before it
    staff = Client()
    staff.force_login(make_user(staff=True))
    page = staff.get("/").content.decode()
    assert "For staff: The active flowchart “lancaster” does not load" in page
    assert "not valid YAML" in page


def test_with_no_good_chart_seen_in_this_process_the_bundled_default_serves(charts, settings):
    settings.DEBUG = False
    ActiveFlowchart.objects.create(chart="uva")
    (charts / "uva.yaml").write_text("nodes: 3\n")
    client = Client(raise_request_exception=False)
    assert client.get("/chart/").status_code == 200
    client.post("/")
    assert AdvisorSession.objects.get().chart == "default"
