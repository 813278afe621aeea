"""What a staff member is told about a sacct export that cannot be used, in both formats."""

import json

import pytest

from allocations.sacct import SacctError, sacct_parse

PIPE_HEADER = "JobID|Account|State|Start|End|ElapsedRaw|AllocTRES\n"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"jobs": [', "line 1, column 11: not valid JSON (Expecting value)"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply to be a sacct export"),
        (b"JobID|Account\n1|a\n", "line 1: the header lacks Start, AllocTRES, ElapsedRaw"),
        (b"Account|Start\n", "line 1: no header line with JobID"),
    ],
)
def test_an_unusable_export_says_where_and_why(raw, message):
    with pytest.raises(SacctError) as caught:
        sacct_parse(raw)
    assert any(message in error for error in caught.value.errors), caught.value.errors


def test_both_formats_leave_out_jobs_that_never_started_or_name_no_account():
    pipe = sacct_parse(
        (
            PIPE_HEADER
            + "101|proj|PENDING|Unknown|Unknown|0|\n"
            + "102||COMPLETED|2024-03-01T10:00:00|2024-03-01T11:00:00|3600|gres/gpu=1\n"
            + "103|proj|COMPLETED|2024-03-01T10:00:00|2024-03-01T11:00:00|3600|gres/gpu=2\n"
        ).encode()
    )
    assert pipe.skipped == [
        "line 2 (job 101): never started (PENDING)",
        "line 3 (job 102): no account",
    ]
    assert [(job.job_id, job.gpu_hours) for job in pipe.jobs] == [("103", 2.0)]

    started = {"start": 1_700_000_000, "end": 1_700_003_600, "elapsed": 3600}
    jobs = [
        {
            "job_id": 201,
            "account": "proj",
            "state": {"current": ["PENDING"]},
            "time": {"start": 0, "end": 0, "elapsed": 0},
        },
        {"job_id": 202, "state": {"current": ["COMPLETED"]}, "time": started},
    ]
    parsed = sacct_parse(json.dumps({"jobs": jobs}).encode())
    assert parsed.skipped == [
        "jobs[0] (job 201): never started (PENDING)",
        "jobs[1] (job 202): no account",
    ]
    assert parsed.jobs == []
