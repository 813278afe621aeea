"""Reading Slurm accounting exports: `sacct --json` and `sacct -P --format=...`.

Pure parsing (no database): a file becomes a list of `SacctJob` (one per job, steps left out)
or a `SacctError` listing every malformed row with its line (or jobs[i]) and field.

GPU hours = GPUs allocated (the job's `gres/gpu` TRES) x elapsed seconds / 3600, as Open
XDMoD counts them from AllocTRES (https://open.xdmod.org/gpu.html, "Slurm").

JSON shapes, from SchedMD's data_parser plugins (github.com/SchedMD/slurm,
src/plugins/data_parser/v0.0.4x/parsers.c, PARSER_ARRAY(JOB)): `jobs[]` with `job_id`,
`account`, `user`, `cluster`, `partition`, `state.current` (a list of flags from v0.0.40 on,
a string in v0.0.39), `time.start` / `time.end` (TIMESTAMP: a plain integer; some fields are
`{"set", "infinite", "number"}` objects, accepted too), `time.elapsed` (seconds),
`tres.allocated` (a list of `{"type", "name", "id", "count"}`), `array.job_id` +
`array.task_id`, `het.job_id` + `het.job_offset`; `meta.plugin.data_parser` names the version
and `meta.slurm.release` the release.

Pipe-separated: `sacct -P` (--parsable2) prints a header line of field names and `|` between
fields (https://slurm.schedmd.com/sacct.html, "--parsable2"); JobID shows steps as `123.batch`,
`123.0`, array tasks as `123_4`, het components as `123+0`; AllocTRES is
`billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from allocations.json_upload import load_json_upload

MAX_FILE_BYTES = 50 * 1024 * 1024  # a year of a busy cluster's jobs in JSON is tens of MB
REQUIRED_PIPE = ("JobID", "Account", "Start", "AllocTRES")
# Rows whose JobID names a step (123.batch, 123.extern, 123.0): their time is the job's.
_STEP = re.compile(r"^\d+(?:[_+][\d\[\]\-,%]+)?\.")
_JOB_ID = re.compile(r"^\d+(?:_\d+|_\[[\d\-,%]+\]|\+\d+)?$")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d{1,2}):)?(\d{1,2}):(\d{2})$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class SacctJob:
    job_id: str
    cluster: str
    account: str
    user: str
    partition: str
    state: str
    start: datetime
    end: datetime | None
    elapsed_seconds: int
    gpus: int
    gpu_type: str

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.elapsed_seconds / 3600


@dataclass
class SacctFile:
    file_format: str  # "sacct_json" | "sacct_pipe"
    jobs: list[SacctJob] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # rows left out on purpose, with why
    slurm_release: str = ""


class SacctError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors[:5]))
        self.errors = errors


def sacct_parse(raw: bytes, *, cluster: str = "", tz: tzinfo = UTC) -> SacctFile:
    """Parse either format (told apart by the first character); `tz` is the cluster's local
    time, in which `sacct -P` prints Start/End; `cluster` fills files that have no cluster."""
    if len(raw) > MAX_FILE_BYTES:
        raise SacctError([f"The file is {len(raw):,} bytes; at most {MAX_FILE_BYTES:,}."])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SacctError(["The file is not UTF-8 text: export it with sacct again."]) from None
    if "\x00" in text:
        raise SacctError(["The file holds a NUL character: it is not a sacct export."])
    stripped = text.lstrip()
    if not stripped:
        raise SacctError(["The file is empty."])
    if stripped.startswith("{"):
        return _parse_json(stripped, cluster=cluster)
    return _parse_pipe(text, cluster=cluster, tz=tz)


def _started_with_account(
    parsed: SacctFile, where: str, *, start: object, account: str, state: str
) -> bool:
    """Whether a row is a job to count; a job that never started (no start time) or names no
    account used no allocation, so it is noted in `parsed.skipped` with why."""
    if not start:
        parsed.skipped.append(f"{where}: never started ({state or 'no state'})")
        return False
    if not account:
        parsed.skipped.append(f"{where}: no account")
        return False
    return True


# --- sacct --json -------------------------------------------------------------------------------


def _number(value, where: str, errors: list[str], *, required: bool = True) -> int | None:
    """An integer, or a data_parser NO_VAL object {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None:
        if required:
            errors.append(f"{where}: missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"{where}: expected a whole number, got {json.dumps(value)[:40]}")
        return None
    if value < 0:
        errors.append(f"{where}: cannot be negative ({value})")
        return None
    return value


def _text(value, where: str, errors: list[str], *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            errors.append(f"{where}: missing")
        return ""
    if not isinstance(value, str):
        errors.append(f"{where}: expected text, got {json.dumps(value)[:40]}")
        return ""
    if not _storable(value):
        errors.append(f"{where}: holds a NUL or an invalid Unicode escape")
        return ""
    return value[:200]


def _storable(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _gpus_from_tres_list(tres, where: str, errors: list[str]) -> tuple[int, str]:
    if tres is None:
        return 0, ""
    if not isinstance(tres, list):
        errors.append(f"{where}: expected a list of TRES")
        return 0, ""
    untyped, typed, gpu_type = None, 0, ""
    for i, item in enumerate(tres):
        if not isinstance(item, dict):
            errors.append(f"{where}[{i}]: expected an object with type, name and count")
            continue
        if item.get("type") != "gres":
            continue
        name = item.get("name") or ""
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        if not _storable(name):
            errors.append(f"{where}[{i}].name: holds a NUL or an invalid Unicode escape")
            continue
        count = _number(item.get("count"), f"{where}[{i}].count", errors)
        if count is None:
            continue
        if name == "gpu":
            untyped = count
        else:
            typed += count
            gpu_type = gpu_type or name.split(":", 1)[1]
    return (untyped if untyped is not None else typed), gpu_type


def _timestamp(value: int | None) -> datetime | None:
    if not value:  # 0 = unknown / not started
        return None
    return datetime.fromtimestamp(value, tz=UTC)


def _parse_json(text: str, *, cluster: str) -> SacctFile:
    doc = load_json_upload(
        text,
        error=SacctError,
        not_json="line {line}, column {column}: not valid JSON ({msg})",
        too_deep="The JSON is nested too deeply to be a sacct export.",
    )
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise SacctError(["jobs: missing; this is not the output of sacct --json."])
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    release = slurm.get("release", "") if isinstance(slurm, dict) else ""
    parsed = SacctFile(file_format="sacct_json", slurm_release=str(release)[:40])
    errors: list[str] = []
    for i, job in enumerate(doc["jobs"]):
        where = f"jobs[{i}]"
        if not isinstance(job, dict):
            errors.append(f"{where}: expected an object")
            continue
        row_errors: list[str] = []
        job_id = _number(job.get("job_id"), f"{where}.job_id", row_errors)
        if job_id is not None:
            where = f"jobs[{i}] (job {job_id})"
            row_errors = [e.replace(f"jobs[{i}]", where, 1) for e in row_errors]
        display_id = _json_display_id(job, job_id)
        time = job.get("time") if isinstance(job.get("time"), dict) else None
        if time is None:
            row_errors.append(f"{where}.time: missing")
            errors.extend(row_errors)
            continue
        start = _number(time.get("start"), f"{where}.time.start", row_errors, required=False)
        end = _number(time.get("end"), f"{where}.time.end", row_errors, required=False)
        elapsed = _number(time.get("elapsed"), f"{where}.time.elapsed", row_errors)
        tres = job.get("tres") if isinstance(job.get("tres"), dict) else {}
        gpus, gpu_type = _gpus_from_tres_list(
            tres.get("allocated"), f"{where}.tres.allocated", row_errors
        )
        account = _text(job.get("account"), f"{where}.account", row_errors)
        if account and not _ACCOUNT.match(account):
            row_errors.append(f"{where}.account: {account!r} is not a Slurm account name")
        state = job.get("state")
        current = state.get("current") if isinstance(state, dict) else state
        if isinstance(current, list):
            current = current[0] if current else ""
        state_text = _text(current, f"{where}.state.current", row_errors)
        user = job.get("user")
        if isinstance(user, dict):  # some releases nest the name
            user = user.get("name")
        if row_errors:
            errors.extend(row_errors)
            continue
        if not _started_with_account(parsed, where, start=start, account=account, state=state_text):
            continue
        parsed.jobs.append(
            SacctJob(
                job_id=display_id,
                cluster=_text(job.get("cluster"), f"{where}.cluster", errors) or cluster,
                account=account.lower(),
                user=_text(user, f"{where}.user", errors),
                partition=_text(job.get("partition"), f"{where}.partition", errors),
                state=state_text.split()[0] if state_text else "",
                start=_timestamp(start),
                end=_timestamp(end),
                elapsed_seconds=elapsed or 0,
                gpus=gpus,
                gpu_type=gpu_type[:100],
            )
        )
    if errors:
        raise SacctError(errors)
    return parsed


def _json_display_id(job: dict, job_id: int | None) -> str:
    """The JobID sacct prints: 123_4 for an array task, 123+1 for a het component."""
    array = job.get("array") if isinstance(job.get("array"), dict) else {}
    het = job.get("het") if isinstance(job.get("het"), dict) else {}
    sink: list[str] = []
    parent = _number(array.get("job_id"), "", sink, required=False)
    task = _number(array.get("task_id"), "", sink, required=False)
    if parent and task is not None:
        return f"{parent}_{task}"
    het_id = _number(het.get("job_id"), "", sink, required=False)
    offset = _number(het.get("job_offset"), "", sink, required=False)
    if het_id and offset is not None:
        return f"{het_id}+{offset}"
    return str(job_id)


# --- sacct -P --format=... -------------------------------------------------------------------


def _elapsed(value: str) -> int | None:
    match = _ELAPSED.match(value.strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    if minutes > 59 or seconds > 59:
        return None
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _gpus_from_tres_string(value: str) -> tuple[int, str] | None:
    """gres/gpu count from 'billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1'."""
    untyped, typed, gpu_type = None, 0, ""
    if not value.strip():
        return 0, ""
    for part in value.split(","):
        if "=" not in part:
            return None
        key, _, raw = part.partition("=")
        if not (key == "gres/gpu" or key.startswith("gres/gpu:")):
            continue
        if not raw.isdigit():
            return None
        if key == "gres/gpu":
            untyped = int(raw)
        else:
            typed += int(raw)
            gpu_type = gpu_type or key.split(":", 1)[1]
    return (untyped if untyped is not None else typed), gpu_type


def _local_datetime(value: str, tz: tzinfo) -> datetime | None:
    value = value.strip()
    if value in ("", "Unknown", "None", "N/A"):
        return None
    parsed = datetime.fromisoformat(value)  # sacct prints 2024-03-01T10:00:00
    return parsed.replace(tzinfo=tz) if parsed.tzinfo is None else parsed


def _pipe_header(lines: list[str]) -> tuple[int, list[str]]:
    """(index of the header line, its field names), or the SacctError saying what to add."""
    header_index = next((i for i, line in enumerate(lines) if line.strip()), None)
    header = [h.strip() for h in lines[header_index].split("|")]
    if "JobID" not in header:
        raise SacctError(
            [
                f"line {header_index + 1}: no header line with JobID: export with "
                "sacct -P --format=JobID,Account,State,Start,End,ElapsedRaw,AllocTRES "
                "(and without -n / --noheader)"
            ]
        )
    missing = [name for name in REQUIRED_PIPE if name not in header]
    if "ElapsedRaw" not in header and "Elapsed" not in header:
        missing.append("ElapsedRaw")
    if missing:
        raise SacctError(
            [f"line {header_index + 1}: the header lacks {', '.join(missing)}: add to --format"]
        )
    return header_index, header


def _parse_pipe(text: str, *, cluster: str, tz: tzinfo) -> SacctFile:
    lines = text.splitlines()
    header_index, header = _pipe_header(lines)
    column = {name: header.index(name) for name in header}
    parsed = SacctFile(file_format="sacct_pipe")
    errors: list[str] = []
    for number, line in enumerate(lines[header_index + 1 :], start=header_index + 2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(header):
            errors.append(
                f"line {number}: {len(cells)} fields where the header has {len(header)} "
                "(export with -P, which never pads or truncates)"
            )
            continue

        def get(name: str, cells=cells) -> str:
            return cells[column[name]].strip() if name in column else ""

        job_id = get("JobID")
        if _STEP.match(job_id):
            continue  # a step: its job's own row carries the allocation
        where = f"line {number} (job {job_id or '?'})"
        row_errors = []
        if not _JOB_ID.match(job_id):
            row_errors.append(f"{where}: JobID {job_id!r} is not a Slurm job id")
        account = get("Account")
        if account and not _ACCOUNT.match(account):
            row_errors.append(f"{where}: Account {account!r} is not a Slurm account name")
        if "ElapsedRaw" in column:
            raw = get("ElapsedRaw")
            elapsed = int(raw) if raw.isdigit() else None
            if elapsed is None:
                row_errors.append(f"{where}: ElapsedRaw {raw!r} is not a number of seconds")
        else:
            elapsed = _elapsed(get("Elapsed"))
            if elapsed is None:
                row_errors.append(f"{where}: Elapsed {get('Elapsed')!r} is not [D-]HH:MM:SS")
        gpus = _gpus_from_tres_string(get("AllocTRES"))
        if gpus is None:
            row_errors.append(
                f"{where}: AllocTRES {get('AllocTRES')[:80]!r} is not name=count pairs"
            )
        start = end = None
        for name in ("Start", "End"):
            try:
                value = _local_datetime(get(name), tz)
            except ValueError:
                row_errors.append(f"{where}: {name} {get(name)!r} is not a date and time")
                continue
            if name == "Start":
                start = value
            else:
                end = value
        if row_errors:
            errors.extend(row_errors)
            continue
        state = get("State").split()[0] if get("State") else ""
        if not _started_with_account(parsed, where, start=start, account=account, state=state):
            continue
        parsed.jobs.append(
            SacctJob(
                job_id=job_id,
                cluster=get("Cluster")[:100] or cluster,
                account=account.lower(),
                user=get("User")[:100],
                partition=get("Partition")[:200],
                state=state[:40],
                start=start,
                end=end,
                elapsed_seconds=elapsed,
                gpus=gpus[0],
                gpu_type=gpus[1][:100],
            )
        )
    if errors:
        raise SacctError(errors)
    return parsed
