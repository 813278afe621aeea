"""Trial runs that measure themselves: the helper on a real (tiny, CPU) PyTorch training loop,
the upload on the request and in the admin, the comparison beside the estimate, and an accepted
measurement changing the next estimate through the public API."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import sys
from pathlib import Path

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from allocations.models import MeasurementReview, Status, TrialMeasurement
from allocations.trial_runs import (
    HELPER_PATH,
    MAX_FILE_BYTES,
    TrialRunInvalid,
    accelerator_guess,
    measurement_compare,
    trial_run_parse,
)
from catalog.models import Benchmark, BenchmarkSourceKind, System
from catalog_schema import TASK_LABELS
from tests.allocations.factories import make_request, make_user

pytestmark = pytest.mark.django_db


def load_helper():
    spec = importlib.util.spec_from_file_location("trial_run_under_test", HELPER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cpu_run_json(tmp_path_factory) -> bytes:
    """Train a tiny language model on the CPU for a few steps with the helper; its JSON."""
    torch = pytest.importorskip("torch")
    helper = load_helper()
    torch.manual_seed(0)
    vocab, seq_len, batch = 64, 16, 4
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, vocab)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run = helper.TrialRun(
        task="full_finetune",
        precision="fp32",
        micro_batch_size=batch,
        seq_len=seq_len,
        model=model,
        optimizer=optimizer,
        model_name="tiny-test-lm",
        warmup_steps=2,
    )
    for _ in range(8):
        tokens = torch.randint(0, vocab, (batch, seq_len))
        with run.step(tokens=tokens.numel()):
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    path = tmp_path_factory.mktemp("trial") / "trial-run.json"
    run.write(str(path))
    return path.read_bytes()


def gpu_run(cpu_json: bytes, *, tokens_per_second: float, gpus: int = 1, **workload) -> bytes:
    """The CPU run's file as the same helper writes it on a GPU node (device and memory filled)."""
    data = json.loads(cpu_json)
    data["device"].update(
        kind="cuda",
        gpu_present=True,
        name="NVIDIA A100-SXM4-40GB",
        count=gpus,
        visible_count=gpus,
        memory_total_bytes=42_298_834_944,
        cuda_version="12.4",
    )
    data["memory"] = {
        "source": "torch.cuda.max_memory_allocated/reserved",
        "max_allocated_bytes": 21_400_000_000,
        "max_reserved_bytes": 23_100_000_000,
    }
    data["measurement"]["tokens_per_second"] = tokens_per_second
    data["measurement"]["tokens_per_second_per_process"] = tokens_per_second / gpus
    data["notes"] = []
    data["workload"].update(task="lora", precision="bf16", micro_batch_size=4, seq_len=2048)
    data["workload"].update(workload)
    return json.dumps(data).encode()


# --- The helper ---------------------------------------------------------------------------


def test_helper_imports_only_the_standard_library_at_module_level():
    tree = ast.parse(HELPER_PATH.read_text(encoding="utf-8"))
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_level |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top_level.add(node.module.split(".")[0])
    assert top_level - {"__future__"} <= set(sys.stdlib_module_names)
    # torch is imported inside a function, only when it is installed.
    assert "torch" not in top_level


def test_helper_records_a_cpu_training_run(cpu_run_json):
    data = json.loads(cpu_run_json)
    assert data["schema"] == "allocation-triage/trial-run"
    assert data["schema_version"] == 1
    assert data["device"]["kind"] == "cpu"
    assert data["device"]["gpu_present"] is False
    assert data["device"]["count"] == 0
    assert any("No GPU" in note for note in data["notes"])
    measured = data["measurement"]
    assert measured["steps_total"] == 8
    assert measured["warmup_steps"] == 2
    assert measured["steady_steps"] == 6
    assert measured["tokens_processed"] == 8 * 4 * 16
    assert measured["steady_tokens"] == 6 * 4 * 16
    assert measured["tokens_per_second"] > 0
    assert data["recipe"]["optimizer"] == "AdamW"
    assert data["recipe"]["params_total"] == 64 * 32 + (32 * 32 + 32) + (32 * 64 + 64)
    assert data["workload"]["params"] == data["recipe"]["params_total"]
    assert data["software"]["packages"]["torch"].startswith("2.13.0")
    assert data["memory"]["max_reserved_bytes"] is None
    # It reads nothing it was not handed: no paths, no host name.
    assert "hostname" not in json.dumps(data).lower()


def test_helper_without_enough_steps_says_so(tmp_path, capsys):
    helper = load_helper()
    run = helper.TrialRun(task="inference", precision="bf16", micro_batch_size=1, seq_len=8)
    run.record_step(tokens=8, seconds=0.1)
    path = run.write(str(tmp_path / "short.json"))
    data = json.loads(Path(path).read_text())
    assert data["measurement"]["tokens_per_second"] is None
    assert "Run more steps" in " ".join(data["notes"])
    assert "never uploads" in capsys.readouterr().err
    with pytest.raises(TrialRunInvalid) as caught:
        trial_run_parse(Path(path).read_bytes())
    assert caught.value.errors == [
        "measurement.tokens_per_second: no steady tokens per second: the run had too few steps "
        "after the warm-up; run more steps and write the file again"
    ]


def test_helper_refuses_an_unknown_task():
    helper = load_helper()
    with pytest.raises(ValueError, match="task must be one of"):
        helper.TrialRun(task="training", precision="bf16", micro_batch_size=1, seq_len=8)


def test_helper_download_is_the_file(client):
    response = client.get(reverse("allocations:trial-run-helper"))
    assert response.status_code == 200
    assert 'filename="trial_run.py"' in response["Content-Disposition"]
    assert b"".join(response.streaming_content) == HELPER_PATH.read_bytes()


# --- Parsing --------------------------------------------------------------------------------


def test_parse_lists_every_bad_field(cpu_run_json):
    data = json.loads(cpu_run_json)
    data["workload"]["precision"] = "fp64"
    data["workload"]["micro_batch_size"] = 0
    data["device"]["count"] = -1
    data["surprise"] = True
    with pytest.raises(TrialRunInvalid) as caught:
        trial_run_parse(json.dumps(data).encode())
    errors = caught.value.errors
    assert any(e.startswith("workload.precision: Input should be 'fp32'") for e in errors)
    assert any(e.startswith("workload.micro_batch_size: Input should be greater") for e in errors)
    assert any(e.startswith("device.count: Input should be greater") for e in errors)
    assert "surprise: Extra inputs are not permitted" in errors


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"{not json", "not valid JSON (line 1, column 2"),
        (b"[1, 2]", "one JSON object"),
        (b'{"schema": "other"}', "not a file written by the trial-run helper"),
        (
            b'{"schema": "allocation-triage/trial-run", "schema_version": 2}',
            "this site reads version 1",
        ),
        (b" " * (MAX_FILE_BYTES + 1), "a trial-run file is at most"),
        (b'{"schema": "\\u0000"}', "holds a NUL character"),
        (
            b'{"schema": "allocation-triage/trial-run", "schema_version": 1, "x": "\\ud800"}',
            "invalid Unicode escape",
        ),
    ],
)
def test_parse_refuses_what_is_not_a_report(raw, message):
    with pytest.raises(TrialRunInvalid, match=re.escape(message)):
        trial_run_parse(raw)


def test_accelerator_guess_matches_driver_names():
    catalog = [
        ("a100-40-sxm4", "NVIDIA A100 40GB SXM4"),
        ("a100-80-sxm4", "NVIDIA A100 80GB SXM4"),
        ("h100-80-sxm5", "NVIDIA H100 80GB SXM5"),
        ("mi210-64", "AMD Instinct MI210 64GB"),
    ]
    assert accelerator_guess("NVIDIA A100-SXM4-80GB", catalog) == "a100-80-sxm4"
    assert accelerator_guess("NVIDIA A100-SXM4-40GB", catalog) == "a100-40-sxm4"
    assert accelerator_guess("NVIDIA H100 80GB HBM3", catalog) == "h100-80-sxm5"
    assert accelerator_guess("AMD Instinct MI210", catalog) == "mi210-64"
    assert accelerator_guess("Tesla T4", catalog) == ""
    assert accelerator_guess(None, catalog) == ""


# --- Upload by the researcher ----------------------------------------------------------------


def upload(client, allocation_request, raw: bytes, name="trial-run.json"):
    return client.post(
        reverse("allocations:measurement-upload", args=[allocation_request.pk]),
        {"file": SimpleUploadedFile(name, raw, content_type="application/json")},
    )


def test_researcher_uploads_the_cpu_run_and_sees_it_beside_the_estimate(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    detail = reverse("allocations:request-detail", args=[allocation_request.pk])
    before = client.get(detail).content.decode()
    assert "No measurements yet." in before
    assert reverse("allocations:trial-run-helper") in before

    response = upload(client, allocation_request, cpu_run_json)
    assert response.status_code == 302
    measurement = TrialMeasurement.objects.get()
    assert measurement.gpu_present is False
    assert measurement.review == MeasurementReview.PENDING
    page = client.get(detail).content.decode()
    assert "No measurements yet." not in page
    assert "on the CPU: a CPU run says nothing about GPU hours" in page


def test_a_gpu_measurement_changes_the_displayed_comparison(client, cpu_run_json):
    # The estimate: 240 compute GPU hours for 600 million tokens on one A100 (factories).
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    # 600e6 tokens at 925.9 tokens/s on one GPU = 180 GPU hours: 25 % less than 240.
    assert upload(client, allocation_request, gpu_run(cpu_run_json, tokens_per_second=925.93))
    page = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    text = page.content.decode()
    assert (
        "At the measured 926 tokens/s the full run takes 180 GPU hours, 25 % less than "
        "estimated. With the estimate&#x27;s contingency that is 216 GPU hours against the 288 "
        "asked for."
    ) in text
    assert "21.4 / 23.1 GB" in text  # measured allocated / reserved beside the estimate
    assert "lora, bf16, global batch 4, sequence 2048 on 1 × a100-40-sxm4" in text


def test_a_run_is_compared_batch_for_batch_with_the_estimate(cpu_run_json):
    """The estimate's batch is the global batch of a step and its recipe says the micro-batch;
    a run that splits the same global batch differently differs only in its micro-batch."""
    snapshot = {
        "request": {"task": "lora", "precision": "bf16", "batch_size": 8, "seq_len": 2048},
        "result": {"recommendation": {"num_gpus": 1, "recipe": {"micro_batch": 2}}},
    }

    def differences(**workload) -> str:
        raw = gpu_run(cpu_run_json, tokens_per_second=1000.0, **workload)
        report = trial_run_parse(raw)
        compared = measurement_compare(report=report, snapshot=snapshot, requested_gpu_hours=None)
        return compared.estimated_workload + " | " + "; ".join(compared.same_setup)

    same_split = differences(micro_batch_size=2, gradient_accumulation_steps=4)
    assert "micro-batch 2, global batch 8" in same_split
    assert "(the estimate assumed" not in same_split
    other_split = differences(micro_batch_size=4, gradient_accumulation_steps=2)
    assert "micro-batch 4 (the estimate assumed 2)" in other_split
    assert "global batch" not in other_split.split(" | ")[1]
    smaller = differences(micro_batch_size=4, gradient_accumulation_steps=1)
    assert "global batch 4 (the estimate assumed 8)" in smaller


def test_a_precision_left_open_is_compared_with_the_type_the_recommended_gpu_runs(cpu_run_json):
    """Left open, the estimate assumed the recommended GPU's 16-bit type (fp16 on a V100): a
    run in fp16 matches it, a run in bf16 does not."""
    snapshot = {
        "request": {"task": "lora", "precision": None, "batch_size": 4, "seq_len": 2048},
        "result": {
            "recommendation": {
                "num_gpus": 1,
                "accelerator": "v100-32-sxm2",
                "compute_dtype": "fp16",
                "recipe": {"micro_batch": 4},
            }
        },
    }

    def compared(precision: str):
        raw = gpu_run(cpu_run_json, tokens_per_second=1000.0, gradient_accumulation_steps=1)
        data = json.loads(raw)
        data["workload"]["precision"] = precision
        report = trial_run_parse(json.dumps(data).encode())
        return measurement_compare(report=report, snapshot=snapshot, requested_gpu_hours=None)

    same = compared("fp16")
    assert same.estimated_workload.startswith("lora, fp16, micro-batch 4")
    assert not any(d.startswith("precision") for d in same.same_setup)
    assert "precision bf16 (the estimate assumed fp16)" in compared("bf16").same_setup


def test_a_bad_file_changes_nothing_and_says_what_is_wrong(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    data = json.loads(cpu_run_json)
    data["workload"]["seq_len"] = "long"
    data["workload"]["model_name"] = "<script>alert(1)</script>"
    response = upload(client, allocation_request, json.dumps(data).encode())
    assert response.status_code == 400
    assert "workload.seq_len: Input should be a valid integer" in response.content.decode()
    assert TrialMeasurement.objects.count() == 0


def test_uploaded_text_is_escaped(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    data = json.loads(gpu_run(cpu_run_json, tokens_per_second=1000.0))
    data["device"]["name"] = "<img src=x onerror=alert(1)>"
    data["notes"] = ["<script>alert(2)</script>"]
    assert upload(client, allocation_request, json.dumps(data).encode()).status_code == 302
    text = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    body = text.content.decode()
    assert "<script>alert(2)</script>" not in body
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in body
    assert "<img src=x" not in body


def test_only_the_owner_can_upload(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(make_user())
    assert upload(client, allocation_request, cpu_run_json).status_code == 404
    assert TrialMeasurement.objects.count() == 0


def test_a_closed_request_takes_no_measurements(client, cpu_run_json):
    allocation_request = make_request(status=Status.WITHDRAWN)
    client.force_login(allocation_request.researcher)
    response = upload(client, allocation_request, cpu_run_json)
    assert response.status_code == 400
    assert "takes no measurements" in response.content.decode()
    assert TrialMeasurement.objects.count() == 0


# --- Staff: upload, accept, re-run, and the next estimate ----------------------------------


def estimate_hours(client, accelerator: str) -> tuple[float, list[str]]:
    body = {
        "params": 124_000_000,
        "task": "full_finetune",
        "precision": "bf16",
        "batch_size": 8,
        "seq_len": 1024,
        "tokens": 2_000_000_000,
        "accelerator": accelerator,
        "num_gpus": 1,
    }
    response = client.post(
        reverse("advisor:api-estimate"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    result = response.json()
    option = next(
        o for o in result["options"] if o["accelerator"] == accelerator and o["num_gpus"] == 1
    )
    return option["gpu_hours"], option["reasons"]


def test_an_accepted_measurement_changes_the_next_estimate_for_that_gpu(
    client, admin_client, default_catalog, cpu_run_json
):
    allocation_request = make_request(status=Status.SUBMITTED, facility="baskerville")
    allocation_request.estimate_snapshot["request"] = {
        "params": 124_000_000,
        "task": "full_finetune",
        "precision": "bf16",
        "batch_size": 8,
        "seq_len": 1024,
        "tokens": 2_000_000_000,
    }
    allocation_request.system = System.objects.get(name="baskerville")
    allocation_request.save()
    before, _ = estimate_hours(client, "a100-40-sxm4")
    other_before, _ = estimate_hours(client, "h100-80-sxm5")

    # Staff upload in the admin: a full fine-tune of a 124M model at 50,000 tokens/s on one
    # A100 40GB, an MFU of 6 x 124e6 x 50,000 / 312e12 = 12 % (far below the 50-60 % default).
    raw = gpu_run(
        cpu_run_json,
        tokens_per_second=50_000.0,
        task="full_finetune",
        params=124_000_000,
        micro_batch_size=8,
        seq_len=1024,
    )
    response = admin_client.post(
        reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk]),
        {"file": SimpleUploadedFile("run.json", raw, content_type="application/json")},
    )
    assert response.status_code == 302
    measurement = TrialMeasurement.objects.get()

    # Re-run with the measurement applied: previewed, nothing stored.
    rerun = admin_client.get(
        reverse("admin:allocations_trialmeasurement_rerun", args=[measurement.pk])
    )
    assert rerun.status_code == 200
    assert b"estimate-comparison" in rerun.content
    assert not Benchmark.objects.filter(source_kind=BenchmarkSourceKind.INSTITUTE_RUN).exists()
    assert estimate_hours(client, "a100-40-sxm4")[0] == before

    accept_url = reverse("admin:allocations_trialmeasurement_accept", args=[measurement.pk])
    form = admin_client.get(accept_url)
    assert b'value="a100-40-sxm4" selected' in form.content  # guessed from the driver's name
    response = admin_client.post(accept_url, {"accelerator": "a100-40-sxm4", "note": "ok"})
    assert response.status_code == 302
    measurement.refresh_from_db()
    assert measurement.review == MeasurementReview.ACCEPTED
    benchmark = Benchmark.objects.get(name=measurement.benchmark_name)
    assert benchmark.source_kind == BenchmarkSourceKind.INSTITUTE_RUN
    assert benchmark.source_reference == (
        f"allocation-request:{allocation_request.pk}/measurement:{measurement.pk}"
    )
    assert benchmark.system.name == "baskerville"
    # The estimate assumed the Transformers Trainer ("not sure"): its loss was not fused, so
    # the run's speed already holds the logits' traffic and is not charged it twice.
    assert benchmark.fused_loss is False
    assert benchmark.vocab_size

    after, reasons = estimate_hours(client, "a100-40-sxm4")
    # 12 % measured instead of the 50-60 % default (or a published benchmark's): far slower.
    assert after > before * 1.5
    # The option says where its utilisation came from: the institute's own run.
    assert any(measurement.benchmark_name in reason for reason in reasons)
    assert estimate_hours(client, "h100-80-sxm5")[0] == other_before  # other GPUs unchanged

    # A catalog reload keeps the institute's own runs.
    call_command("load_catalog", "default", stdout=io.StringIO())
    assert Benchmark.objects.filter(name=measurement.benchmark_name).exists()

    # Rejecting it afterwards takes it out of the catalog again.
    reject_url = reverse("admin:allocations_trialmeasurement_reject", args=[measurement.pk])
    admin_client.post(reject_url, {"note": "ran with a debugger attached"})
    assert not Benchmark.objects.filter(name=measurement.benchmark_name).exists()
    assert estimate_hours(client, "a100-40-sxm4")[0] == before


def test_a_cpu_measurement_cannot_be_accepted(admin_client, default_catalog, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    admin_client.post(
        reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk]),
        {"file": SimpleUploadedFile("cpu.json", cpu_run_json)},
    )
    measurement = TrialMeasurement.objects.get()
    response = admin_client.post(
        reverse("admin:allocations_trialmeasurement_accept", args=[measurement.pk]),
        {"accelerator": "a100-40-sxm4"},
    )
    assert response.status_code == 200
    assert "Measured on the CPU" in response.content.decode()
    assert not Benchmark.objects.filter(source_kind=BenchmarkSourceKind.INSTITUTE_RUN).exists()


def test_measurement_pages_are_staff_only(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    client.force_login(allocation_request.researcher)
    url = reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk])
    response = client.get(url)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_approval_sets_the_slurm_account_and_the_email_names_it(
    admin_client, django_capture_on_commit_callbacks
):
    allocation_request = make_request(status=Status.SUBMITTED)
    url = reverse(
        "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            url, {"granted_gpu_hours": 250, "slurm_account": "Turing-LLM-01", "message": ""}
        )
    assert response.status_code == 302
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.APPROVED
    assert allocation_request.slurm_account == "turing-llm-01"
    researcher_mail = [m for m in mail.outbox if allocation_request.researcher.email in m.to]
    assert researcher_mail
    assert "--account=turing-llm-01" in researcher_mail[-1].body


def test_approval_refuses_a_malformed_slurm_account(admin_client):
    allocation_request = make_request(status=Status.SUBMITTED)
    url = reverse(
        "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
    )
    response = admin_client.post(url, {"granted_gpu_hours": 250, "slurm_account": "a b;rm"})
    assert response.status_code == 200
    assert "A Slurm account is letters" in response.content.decode()
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED


def test_a_measurement_on_more_gpus_says_how_many_in_words(client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)  # estimated on one GPU
    client.force_login(allocation_request.researcher)
    assert upload(
        client, allocation_request, gpu_run(cpu_run_json, tokens_per_second=1851.86, gpus=2)
    )
    page = client.get(reverse("allocations:request-detail", args=[allocation_request.pk]))
    text = page.content.decode()
    assert "2 GPUs (the estimate assumed 1)" in text
    assert "GPU(s)" not in text


def test_the_measurement_list_names_the_work_and_precision(admin_client, cpu_run_json):
    allocation_request = make_request(status=Status.SUBMITTED)
    admin_client.post(
        reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk]),
        {"file": SimpleUploadedFile("cpu.json", cpu_run_json)},
    )
    measurement = TrialMeasurement.objects.get()
    page = admin_client.get(reverse("admin:allocations_trialmeasurement_changelist"))
    label = TASK_LABELS[measurement.task]
    assert f'<td class="field-task">{label}</td>' in page.content.decode()
    assert f'<td class="field-task">{measurement.task}</td>' not in page.content.decode()


def test_a_dpo_run_with_its_reference_in_every_step_cannot_calibrate_the_catalog(
    admin_client, default_catalog, cpu_run_json
):
    """Its tokens per second carry the reference model's forward pass: counted as a training
    benchmark it would understate the GPU for every later job. Nothing enters the catalog, the
    preview says why, and a run that precomputed the reference is accepted."""
    allocation_request = make_request(status=Status.SUBMITTED)
    allocation_request.estimate_snapshot["request"] = {
        "params": 124_000_000,
        "task": "full_finetune",
        "training_objective": "dpo",
        "seq_len": 1024,
    }
    allocation_request.save()
    raw = gpu_run(cpu_run_json, tokens_per_second=50_000.0, task="full_finetune")
    admin_client.post(
        reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk]),
        {"file": SimpleUploadedFile("run.json", raw, content_type="application/json")},
    )
    measurement = TrialMeasurement.objects.get()
    accept_url = reverse("admin:allocations_trialmeasurement_accept", args=[measurement.pk])
    response = admin_client.post(accept_url, {"accelerator": "a100-40-sxm4"})
    assert response.status_code == 200
    assert "whose reference model runs a forward pass in every step" in response.content.decode()
    assert not Benchmark.objects.filter(source_kind=BenchmarkSourceKind.INSTITUTE_RUN).exists()
    rerun = admin_client.get(
        reverse("admin:allocations_trialmeasurement_rerun", args=[measurement.pk])
    )
    assert "precompute_ref_log_probs=True" in rerun.content.decode()

    allocation_request.estimate_snapshot["request"]["precompute_reference"] = True
    allocation_request.save()
    response = admin_client.post(accept_url, {"accelerator": "a100-40-sxm4"})
    assert response.status_code == 302
    assert Benchmark.objects.filter(source_kind=BenchmarkSourceKind.INSTITUTE_RUN).exists()


def test_a_run_that_says_it_trained_with_dpo_is_kept_out_whatever_its_request_said(
    admin_client, default_catalog, cpu_run_json
):
    """Helper 1.1 records the objective: a DPO run uploaded against a supervised request is
    refused all the same, and a precomputed reference lets it in. KTO and GRPO runs never
    calibrate (helper 1.2): a KL pass, or generation, runs in every step."""
    allocation_request = make_request(status=Status.SUBMITTED)
    for objective, precomputed, accepted in (
        ("dpo", None, False),
        ("kto", True, False),
        ("grpo", None, False),
        ("dpo", True, True),
    ):
        raw = gpu_run(
            cpu_run_json,
            tokens_per_second=50_000.0,
            training_objective=objective,
            precompute_reference=precomputed,
        )
        admin_client.post(
            reverse("admin:allocations_trialmeasurement_upload", args=[allocation_request.pk]),
            {"file": SimpleUploadedFile("run.json", raw, content_type="application/json")},
        )
        measurement = TrialMeasurement.objects.latest("uploaded_at")
        accept_url = reverse("admin:allocations_trialmeasurement_accept", args=[measurement.pk])
        response = admin_client.post(accept_url, {"accelerator": "a100-40-sxm4"})
        assert (response.status_code == 302) is accepted
    assert Benchmark.objects.filter(source_kind=BenchmarkSourceKind.INSTITUTE_RUN).count() == 1


def test_helper_refuses_an_unknown_objective():
    helper = load_helper()
    with pytest.raises(ValueError, match="training_objective must be one of"):
        helper.TrialRun(
            task="lora", precision="bf16", micro_batch_size=1, seq_len=8, training_objective="ppo"
        )
