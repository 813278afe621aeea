"""Slurm accounting: real-format exports (sacct --json of Slurm 24.11 and 23.02, sacct -P) import
idempotently, match approved requests by Slurm account and dates, and feed the granted / used /
estimated view and the calibration report."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from allocations.calibration import calibration_markdown, calibration_points, calibration_report
from allocations.models import Status, UsageImport, UsageRecord
from allocations.sacct import SacctError, sacct_parse
from tests.allocations.factories import make_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
JSON_24_11 = FIXTURES / "sacct-24.11-data_parser-v0.0.42.json"
JSON_23_02 = FIXTURES / "sacct-23.02-data_parser-v0.0.39.json"
PIPE = FIXTURES / "sacct-P-format.txt"
LONDON = timezone.get_default_timezone()

# The fixtures' jobs ran in October 2026; the tests look at them from a fixed day after.
AFTER_THE_JOBS = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _after_the_jobs():
    with time_machine.travel(AFTER_THE_JOBS, tick=False):
        yield


def by_id(jobs):
    return {job.job_id: job for job in jobs}


# --- Parsing ----------------------------------------------------------------------------------


def test_sacct_json_of_slurm_24_11():
    parsed = sacct_parse(JSON_24_11.read_bytes())
    assert parsed.file_format == "sacct_json"
    assert parsed.slurm_release == "24.11.5"
    jobs = by_id(parsed.jobs)
    assert set(jobs) == {"4242001", "4242010_3", "4242020", "4242031", "4242041"}
    assert parsed.skipped == ["jobs[4] (job 4242040): never started (PENDING)"]
    first = jobs["4242001"]
    assert (first.account, first.user, first.cluster) == ("turing-llm-01", "ada", "baskerville")
    assert (first.gpus, first.gpu_type, first.elapsed_seconds) == (4, "a100", 36000)
    assert first.gpu_hours == 40
    assert first.start == datetime(2026, 10, 5, 9, 0, tzinfo=UTC)
    assert first.state == "COMPLETED"
    assert jobs["4242010_3"].gpu_hours == 2  # an array task: 1 GPU for 2 hours
    assert jobs["4242020"].gpu_hours == 48
    assert jobs["4242041"].gpu_hours == 0  # a CPU job


def test_sacct_json_of_slurm_23_02():
    parsed = sacct_parse(JSON_23_02.read_bytes())
    assert parsed.slurm_release == "23.02.5"
    jobs = by_id(parsed.jobs)
    assert jobs["4242001"].state == "COMPLETED"
    assert jobs["4242010_3"].gpu_hours == 2


def test_sacct_pipe_matches_the_json_export_of_the_same_jobs():
    pipe = by_id(sacct_parse(PIPE.read_bytes(), tz=LONDON).jobs)
    json_jobs = by_id(sacct_parse(JSON_24_11.read_bytes()).jobs)
    assert pipe == json_jobs  # steps (.batch, .extern, .0) left out; local times read as London


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda doc: doc["jobs"][1]["time"].update(elapsed="two hours"),
            'jobs[1] (job 4242017).time.elapsed: expected a whole number, got "two hours"',
        ),
        (
            lambda doc: doc["jobs"][0]["tres"]["allocated"][4].update(count=-4),
            "jobs[0] (job 4242001).tres.allocated[4].count: cannot be negative (-4)",
        ),
        (
            lambda doc: doc["jobs"][2].update(account="a b"),
            "jobs[2] (job 4242020).account: 'a b' is not a Slurm account name",
        ),
        (lambda doc: doc.pop("jobs"), "jobs: missing; this is not the output of sacct --json."),
        (
            lambda doc: doc["jobs"][0].update(user="ada\u0000"),
            "jobs[0] (job 4242001).user: holds a NUL or an invalid Unicode escape",
        ),
        (
            lambda doc: doc["jobs"][0].update(partition="\ud800"),
            "jobs[0] (job 4242001).partition: holds a NUL or an invalid Unicode escape",
        ),
    ],
)
def test_malformed_json_rows_are_named(change, message):
    doc = json.loads(JSON_24_11.read_text())
    change(doc)
    with pytest.raises(SacctError) as caught:
        sacct_parse(json.dumps(doc).encode())  # ensure_ascii: NUL and surrogates as escapes
    assert message in caught.value.errors


def test_malformed_pipe_rows_are_named_with_their_line():
    lines = PIPE.read_text().splitlines()
    lines[1] = lines[1].replace("|36000|", "|ten hours|")
    lines[6] = lines[6].replace("gres/gpu=2", "gres/gpu=two")
    lines[7] = lines[7] + "|extra"
    with pytest.raises(SacctError) as caught:
        sacct_parse("\n".join(lines).encode(), tz=LONDON)
    assert caught.value.errors == [
        "line 2 (job 4242001): ElapsedRaw 'ten hours' is not a number of seconds",
        "line 7 (job 4242020): AllocTRES 'billing=16,cpu=16,gres/gpu:a100=2,gres/gpu=two,"
        "mem=128G,node=1' is not name=count pairs",
        "line 8: 12 fields where the header has 11 (export with -P, which never pads or truncates)",
    ]


def test_a_pipe_export_needs_its_header_and_the_fields():
    with pytest.raises(SacctError, match="no header line with JobID"):
        sacct_parse(b"4242001|turing|COMPLETED\n")
    with pytest.raises(SacctError, match="the header lacks AllocTRES"):
        sacct_parse(b"JobID|Account|Start|ElapsedRaw\n1|a|2026-10-01T00:00:00|10\n")


# --- Import -----------------------------------------------------------------------------------


@pytest.fixture
def approved(db):
    request = make_request(
        status=Status.APPROVED,
        start_date=date(2026, 10, 1),
        end_date=date(2026, 10, 31),
        gpu_hours=288,
    )
    request.granted_gpu_hours = 250
    request.slurm_account = "turing-llm-01"
    request.decided_at = timezone.now()
    request.save()
    return request


def run_import(path: Path, *args) -> str:
    out = io.StringIO()
    call_command("import_usage", str(path), *args, stdout=out)
    return out.getvalue()


def test_import_is_idempotent_across_files_and_formats(approved):
    out = run_import(JSON_24_11)
    assert "5 jobs read: 5 new, 0 updated, 0 unchanged; 4 matched to approved requests" in out
    assert "left out: jobs[4] (job 4242040): never started (PENDING)" in out
    snapshot = list(UsageRecord.objects.order_by("job_id").values())

    again = run_import(JSON_24_11)
    assert "5 jobs read: 0 new, 0 updated, 5 unchanged" in again
    pipe = run_import(PIPE, "--time-zone", "Europe/London")
    assert "5 jobs read: 0 new, 0 updated, 5 unchanged" in pipe
    assert list(UsageRecord.objects.order_by("job_id").values()) == snapshot

    matched = UsageRecord.objects.filter(allocation_request=approved)
    assert sorted(matched.values_list("job_id", flat=True)) == [
        "4242001",
        "4242010_3",
        "4242020",
        "4242041",
    ]
    assert sum(matched.values_list("gpu_hours", flat=True)) == 90
    assert UsageRecord.objects.get(job_id="4242031").allocation_request is None


def test_a_job_outside_the_grant_dates_is_not_counted(approved):
    approved.end_date = date(2026, 10, 10)
    approved.save()
    run_import(JSON_24_11)
    # 4242020 started on 12 October, after the grant ended.
    assert UsageRecord.objects.get(job_id="4242020").allocation_request is None


def test_a_bad_file_imports_nothing(approved, tmp_path):
    bad = tmp_path / "bad.txt"
    lines = PIPE.read_text().splitlines()
    lines[4] = lines[4].replace("2026-10-06T15:30:00", "yesterday")
    bad.write_text("\n".join(lines))
    with pytest.raises(CommandError) as caught:
        run_import(bad)
    assert "Nothing imported." in str(caught.value)
    assert "line 5 (job 4242010_3): Start 'yesterday' is not a date and time" in str(caught.value)
    assert UsageRecord.objects.count() == 0
    assert UsageImport.objects.count() == 0


def test_a_running_job_exported_again_is_updated(approved, tmp_path):
    doc = json.loads(JSON_24_11.read_text())
    doc["jobs"][2]["time"]["elapsed"] = 3600
    doc["jobs"][2]["time"]["end"] = 0
    doc["jobs"][2]["state"]["current"] = ["RUNNING"]
    running = tmp_path / "running.json"
    running.write_text(json.dumps(doc))
    run_import(running)
    assert UsageRecord.objects.get(job_id="4242020").gpu_hours == 2
    out = run_import(JSON_24_11)
    assert "0 new, 1 updated, 4 unchanged" in out
    record = UsageRecord.objects.get(job_id="4242020")
    assert (record.state, record.gpu_hours) == ("TIMEOUT", 48)


def test_jobs_imported_before_the_account_was_set_are_matched_when_it_is(admin_client, db):
    request = make_request(
        status=Status.APPROVED, start_date=date(2026, 10, 1), end_date=date(2026, 10, 31)
    )
    request.granted_gpu_hours = 100
    request.save()
    run_import(JSON_24_11)
    assert not UsageRecord.objects.filter(allocation_request=request).exists()
    response = admin_client.post(
        reverse("admin:allocations_usagerecord_account", args=[request.pk]),
        {"slurm_account": "Other-Proj"},
    )
    assert response.status_code == 302
    request.refresh_from_db()
    assert request.slurm_account == "other-proj"
    assert list(
        UsageRecord.objects.filter(allocation_request=request).values_list("job_id", flat=True)
    ) == ["4242031"]


# --- The admin: upload, overview, calibration --------------------------------------------------


def test_staff_upload_and_the_granted_used_estimated_view(admin_client, approved):
    on_track = make_request(
        status=Status.APPROVED,
        start_date=date(2026, 10, 1),
        end_date=date(2026, 12, 31),
        project_title="A project on track",
    )
    on_track.granted_gpu_hours = 2
    on_track.slurm_account = "other-proj"
    on_track.save()
    response = admin_client.post(
        reverse("admin:allocations_usageimport_upload"),
        {"file": SimpleUploadedFile("jobs.json", JSON_24_11.read_bytes())},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:allocations_usagerecord_overview")

    page = admin_client.get(response["Location"])
    body = page.content.decode()
    # 90 of 250 granted (under half) first, before the project that used 2 of its 2.
    assert body.index(str(approved)) < body.index("A project on track")
    assert "used under half of the grant" in body
    assert "<polyline" in body
    assert 'class="granted"' in body
    assert 'class="estimated"' in body
    assert "<script" not in body.split('<div id="content-main">')[1]
    assert "Per system" in body

    single = admin_client.get(
        reverse("admin:allocations_usagerecord_overview") + f"?request={approved.pk}"
    )
    assert "A project on track" not in single.content.decode()


def test_usage_upload_reports_bad_rows_and_stores_nothing(admin_client, approved):
    lines = PIPE.read_text().splitlines()
    lines[1] = lines[1].replace("|36000|", "|-|")
    response = admin_client.post(
        reverse("admin:allocations_usageimport_upload"),
        {"file": SimpleUploadedFile("jobs.txt", "\n".join(lines).encode())},
    )
    assert response.status_code == 400
    assert "line 2 (job 4242001): ElapsedRaw" in response.content.decode()
    assert UsageRecord.objects.count() == 0


def test_usage_pages_are_staff_only(client, approved):
    client.force_login(approved.researcher)
    for name in ("admin:allocations_usagerecord_overview", "admin:allocations_usageimport_upload"):
        response = client.get(reverse(name))
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]


def test_calibration_from_a_finished_allocation(admin_client, approved, tmp_path):
    run_import(JSON_24_11)
    points = calibration_points()
    assert len(points) == 1
    point = points[0]
    # The factory's estimate asked for 288 GPU hours; the jobs used 90.
    assert (point.kind, point.task, point.estimated, point.actual) == (
        "accounting",
        "lora",
        288,
        90,
    )
    report = calibration_report(points)
    assert "too few (under 5) to recompute the uncertainty" in report.verdict

    page = admin_client.get(reverse("admin:allocations_usagerecord_calibration"))
    assert "<td>+220 %</td>" in page.content.decode()

    markdown = calibration_markdown(report, generated_on=date(2026, 11, 20))
    assert "| lora | baskerville | 1 | +220 % |" in markdown

    from scripts import calibration_report as script

    out = tmp_path / "calibration.md"
    assert script.main(["--output", str(out)]) == 0
    assert "| accounting | lora |" in out.read_text()


def test_calibration_recomputes_the_uncertainty_with_enough_points():
    from allocations.calibration import CalibrationPoint

    points = [
        CalibrationPoint("accounting", "lora", "Baskerville", "a100", est, 100.0, "x")
        for est in (90, 105, 110, 120, 140)
    ]
    report = calibration_report(points)
    # Absolute errors 0.05, 0.10, 0.10, 0.20, 0.40: the 80th percentile (4th of 5) is 0.20.
    assert report.recomputed_margin == pytest.approx(0.20)
    assert report.within_stated == pytest.approx(4 / 5)
    assert "four estimates in five fall within ±20%" in report.verdict


def test_the_researcher_sees_the_account_and_the_hours_used(client, approved):
    run_import(JSON_24_11)
    client.force_login(approved.researcher)
    page = client.get(reverse("allocations:request-detail", args=[approved.pk]))
    text = page.content.decode()
    assert "<code>--account=turing-llm-01</code>" in text
    assert "Used so far: <strong>90 of 250 GPU hours</strong> (36 %) in 4 jobs" in text


def test_each_point_is_held_to_the_range_the_engine_states_for_its_kind_of_work():
    """The engine states a GPU-hour range per kind of work from published test points (it runs
    fast far more often than slow); a point inside it is as the engine said. An accounting
    point's estimate includes the 20 % contingency, so 20 % more than the jobs used is on
    target there, while a trial run (compute hours against compute hours) 20 % over is not."""
    from advisor.engine.uncertainty import TEST_GPU_HOURS_UNCERTAINTY, error_range
    from allocations.calibration import CalibrationPoint

    under, over = error_range(TEST_GPU_HOURS_UNCERTAINTY, "inference", 0.25)
    # engine 1.31: -27 % to +6 %; the engine runs fast far more often than slow
    assert under < -0.2
    assert over < 0.2
    assert -under > 2 * over

    def point(kind: str, estimated: float) -> CalibrationPoint:
        return CalibrationPoint(kind, "inference", "Baskerville", "a100", estimated, 100.0, "x")

    assert point("trial run", 100 * (1 + under / 2)).within_stated  # ran slower: as stated
    assert not point("trial run", 120).within_stated
    assert point("accounting", 120).within_stated
    report = calibration_report([point("trial run", 120), point("accounting", 120)])
    assert report.within_stated == 0.5
    assert "50% of the points fall inside the range the engine states" in report.verdict
