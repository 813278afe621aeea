"""load_benchmarks: shared, cited measurements; bad rows refused with file, row and field."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from advisor.engine_catalog import engine_catalog
from catalog.models import Benchmark
from tests.catalog.conftest import DATA

pytestmark = pytest.mark.django_db

SHARED = DATA / "shared" / "benchmarks.json"


def load_benchmarks(path: Path | str) -> str:
    out = io.StringIO()
    call_command("load_benchmarks", str(path), stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def default_catalog():
    call_command("load_catalog", "default", stdout=io.StringIO())


def test_the_shared_file_loads_once_and_every_profile_sees_it(default_catalog):
    rows = json.loads(SHARED.read_text())["benchmarks"]
    assert len(rows) >= 30
    assert load_benchmarks(SHARED).startswith(
        f"shared benchmarks: {len(rows)} benchmarks ({len(rows)} created, 0 unchanged, 0 values "
        "differ"
    )
    assert f"(0 created, {len(rows)} unchanged, 0 values differ" in load_benchmarks(SHARED)
    shared = Benchmark.objects.filter(profile__isnull=True)
    assert shared.count() == len(rows)
    # Sources are stored as their citations, not as keys.
    flash = shared.get(name="flashattn-gpt3-1-3b-8xa100-80")
    assert flash.source.startswith("Dao-AILab/flash-attention, training/README.md")
    names = {b.name for b in engine_catalog().benchmarks}
    assert "llmfoundry-mpt-7b-8xa100-80-sxm4" in names
    # Reloading the profile keeps the shared rows.
    call_command("load_catalog", "default", stdout=io.StringIO())
    assert Benchmark.objects.filter(profile__isnull=True).count() == len(rows)


def test_a_bad_csv_row_is_refused_with_file_row_and_field_and_nothing_changes(
    default_catalog, tmp_path
):
    path = tmp_path / "mine.csv"
    path.write_text(
        "name,accelerator,model,params,task,num_gpus,mfu,source\n"
        "ok-row,a100-80-sxm4,MPT-7B,6658859008,pretrain,8,0.5,our cluster 2026-11\n"
        "bad-row,a100-80-sxm4,MPT-7B,6658859008,pretrain,8,1.7,our cluster 2026-11\n"
    )
    before = Benchmark.objects.count()
    with pytest.raises(CommandError) as caught:
        load_benchmarks(path)
    assert str(caught.value) == (
        f"{path}: row 3 (bad-row).mfu: Input should be less than or equal to 1"
    )
    assert Benchmark.objects.count() == before


def test_unknown_accelerators_and_source_keys_are_refused(default_catalog, tmp_path):
    path = tmp_path / "rows.json"
    row = {
        "name": "x",
        "accelerator": "no-such-gpu",
        "model": "M",
        "task": "pretrain",
        "mfu": 0.4,
        "source": "K",
    }
    path.write_text(json.dumps({"sources": {"K": "a paper"}, "benchmarks": [row]}))
    with pytest.raises(CommandError, match=r"benchmarks\[0\] \(x\)\.accelerator: unknown"):
        load_benchmarks(path)
    row["accelerator"] = "a100-80-sxm4"
    row["source"] = "MISSING"
    path.write_text(json.dumps({"sources": {"K": "a paper"}, "benchmarks": [row]}))
    with pytest.raises(CommandError, match="unknown source key 'MISSING'"):
        load_benchmarks(path)
    assert not Benchmark.objects.filter(name="x").exists()


def test_a_csv_row_loads_and_reaches_the_engine(default_catalog, tmp_path):
    path = tmp_path / "ours.csv"
    path.write_text(
        "name,accelerator,model,params,task,precision,num_gpus,seq_len,mfu,source\n"
        "ours-7b,mi210-64,Llama-2-7B,6738415616,pretrain,bf16,8,4096,0.31,"
        "institute benchmark run 2026-11-20\n"
    )
    assert "(1 created, 0 unchanged" in load_benchmarks(path)
    bench = next(b for b in engine_catalog().benchmarks if b.name == "ours-7b")
    assert bench.accelerator == "mi210-64"
    assert bench.source == "institute benchmark run 2026-11-20"


def test_a_runs_vocabulary_and_unfused_loss_load_and_bad_ones_are_refused(
    default_catalog, tmp_path
):
    """An institute's run under the Transformers Trainer moved its fp32 logits through an
    unfused loss: the row says so, and the engine reads it."""
    path = tmp_path / "ours.csv"
    header = "name,accelerator,model,params,task,num_gpus,mfu,vocab_size,fused_loss,source\n"
    path.write_text(
        header + "ours-gpt2,a100-80-sxm4,GPT-2,124439808,pretrain,1,0.3,50257,no,our run\n"
    )
    assert "(1 created, 0 unchanged" in load_benchmarks(path)
    bench = next(b for b in engine_catalog().benchmarks if b.name == "ours-gpt2")
    assert (bench.vocab_size, bench.fused_loss) == (50257, False)
    path.write_text(
        header + "ours-gpt2,a100-80-sxm4,GPT-2,124439808,pretrain,1,0.3,50257,maybe,our run\n"
    )
    with pytest.raises(CommandError) as caught:
        load_benchmarks(path)
    assert str(caught.value) == f"{path}: row 2 (ours-gpt2).fused_loss: expected true or false"
    path.write_text(header + "ours-gpt2,a100-80-sxm4,GPT-2,124439808,pretrain,1,0.3,0,no,our run\n")
    with pytest.raises(CommandError, match=r"row 2 \(ours-gpt2\)\.vocab_size: Input should be"):
        load_benchmarks(path)
    assert Benchmark.objects.get(name="ours-gpt2").fused_loss is False


def test_staff_edits_are_kept_and_reported_unless_reset(default_catalog):
    load_benchmarks(SHARED)
    Benchmark.objects.filter(name="llmfoundry-mpt-7b-8xa100-80-sxm4").update(mfu=0.5)
    report = load_benchmarks(SHARED)
    assert "differs: row " in report
    assert "(llmfoundry-mpt-7b-8xa100-80-sxm4).mfu: 0.5 here, 0.6423 in the file" in report
    assert Benchmark.objects.get(name="llmfoundry-mpt-7b-8xa100-80-sxm4").mfu == 0.5
    out = io.StringIO()
    call_command("load_benchmarks", str(SHARED), "--reset", stdout=out)
    assert Benchmark.objects.get(name="llmfoundry-mpt-7b-8xa100-80-sxm4").mfu == 0.6423
    out = io.StringIO()
    call_command("load_benchmarks", str(SHARED), "--if-empty", stdout=out)
    assert out.getvalue().startswith("Shared benchmarks are already loaded")
