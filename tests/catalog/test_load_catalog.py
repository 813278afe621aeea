"""load_catalog: every profile loads, re-runs never duplicate, bad files change nothing."""

from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog.models import (
    Accelerator,
    Benchmark,
    ChargeRate,
    NodeType,
    Partition,
    Profile,
    System,
    ToolingSupport,
)
from tests.catalog.conftest import DATA

pytestmark = pytest.mark.django_db

MODELS = [Profile, Accelerator, System, NodeType, Partition, ToolingSupport, Benchmark, ChargeRate]


def load(target: str | None = None, *options: str) -> str:
    out = io.StringIO()
    args = [target] if target else []
    call_command("load_catalog", *args, *options, stdout=out)
    return out.getvalue().strip()


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def snapshot() -> dict:
    """Every catalog row's values, to prove a failed load changed nothing."""
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in MODELS}


def test_default_profile_loads_with_its_systems():
    summary = load("default")
    assert summary.startswith(
        "default: 7 systems, 13 accelerators, 22 node types, 12 partitions, 1 benchmark ("
    )
    assert set(System.objects.values_list("name", flat=True)) == {
        "jade2",
        "baskerville",
        "stanage",
        "cosma8",
        "dawn",
        "azure",
        "turing-tre",  # the Trusted Research Environment, for sensitive data (issue 15)
    }
    assert Profile.objects.get(is_active=True).name == "default"


def test_the_profile_comes_from_settings_when_not_given(settings):
    settings.CATALOG_PROFILE = "uva"
    assert load().startswith(
        "uva: 2 systems, 9 accelerators, 9 node types, 2 partitions, 0 benchmarks ("
    )
    assert list(System.objects.values_list("name", flat=True)) == ["uva-rio", "uva-hpc"]


@pytest.mark.parametrize(
    ("profile", "systems"),
    [
        ("default", {"jade2", "baskerville", "stanage", "cosma8", "dawn", "azure", "turing-tre"}),
        ("lancaster", {"hex", "hec", "bede"}),
        ("uva", {"uva-hpc", "uva-rio"}),
    ],
)
def test_each_profile_loads_and_becomes_active(profile, systems):
    load(profile)
    active = Profile.objects.get(is_active=True)
    assert active.name == profile
    assert set(active.systems.values_list("name", flat=True)) == systems


def test_loading_twice_gives_the_same_rows():
    first_summary = load("default")
    first = counts()
    second_summary = load("default")
    assert counts() == first
    assert "(0 created," in second_summary
    assert "0 values differ from the file" in second_summary
    assert "0 created" not in first_summary
    assert "(0 created, 0 updated," in load("default", "--reset")


def test_loading_another_profile_keeps_both_and_switches_the_active_one():
    load("default")
    load("lancaster")
    assert Profile.objects.get(is_active=True).name == "lancaster"
    assert System.objects.filter(profile__name="default").count() == 7
    load("default")
    assert Profile.objects.get(is_active=True).name == "default"
    # Accelerators are shared: the V100 SXM2 record appears once though both files list it.
    assert Accelerator.objects.filter(name="v100-32-sxm2").count() == 1


def test_a_changed_value_is_reported_and_kept_and_reset_applies_it(default_data, write_catalog):
    # Issue 11: a reload never overwrites what staff may have edited; --reset makes the file
    # win. (Before, a plain reload updated the row; the profile's source file no longer counts
    # as an update: it records the load, it is not catalog data.)
    load("default")
    doc = copy.deepcopy(default_data)
    stanage = next(s for s in doc["systems"] if s["name"] == "stanage")
    stanage["node_types"][0]["count"] = 16
    path = str(write_catalog(doc))
    node_type = NodeType.objects.get(system__name="stanage", name="A100 (Dell XE8545)")
    before = node_type.count

    summary = load(path)

    assert "1 values differ from the file and were kept" in summary
    assert f".node_types[0].count: {before} here, 16 in the file" in summary
    node_type.refresh_from_db()
    assert node_type.count == before
    summary = load(path, "--reset")
    assert "(0 created, 1 updated," in summary
    assert NodeType.objects.get(system__name="stanage", name="A100 (Dell XE8545)").count == 16
    assert NodeType.objects.count() == 22


def test_entries_dropped_from_the_file_are_kept_unless_reset(default_data, write_catalog):
    load("default")
    doc = copy.deepcopy(default_data)
    doc["systems"] = [s for s in doc["systems"] if s["name"] != "cosma8"]
    dawn = next(s for s in doc["systems"] if s["name"] == "dawn")
    dawn["partitions"] = []
    path = str(write_catalog(doc))

    summary = load(path)

    assert "not in the file: systems: " in summary
    assert System.objects.filter(name="cosma8").exists()
    assert Partition.objects.filter(system__name="dawn").exists()
    load(path, "--reset")
    assert not System.objects.filter(name="cosma8").exists()
    assert not Partition.objects.filter(system__name="dawn").exists()
    # Accelerators are shared between profiles and stay.
    assert Accelerator.objects.filter(name="mi100-32").exists()


def test_a_staff_edit_and_a_staff_added_row_survive_a_reload():
    load("default")
    trial = System.objects.exclude(trial_gpu_hours=None).first()
    trial.trial_gpu_hours = 123
    trial.save()
    added = System.objects.create(
        **{
            **{
                f.name: getattr(trial, f.name)
                for f in System._meta.concrete_fields
                if f.name not in ("id", "name")
            },
            "name": "staff-added",
        }
    )

    summary = load("default")

    trial.refresh_from_db()
    assert trial.trial_gpu_hours == 123
    assert System.objects.filter(pk=added.pk).exists()
    assert ".trial_gpu_hours: 123.0 here, 400.0 in the file" in summary
    assert "not in the file: systems: " in summary


def test_if_empty_loads_a_fresh_database_only():
    assert "default:" in load("default", "--if-empty")
    assert System.objects.exists()
    assert "already loaded" in load("lancaster", "--if-empty")
    assert not Profile.objects.filter(name="lancaster").exists()
    with pytest.raises(CommandError, match="contradict"):
        load("default", "--reset", "--if-empty")


def test_retired_systems_and_vm_sizes_are_flagged():
    load("default")
    jade2 = System.objects.get(name="jade2")
    assert jade2.status == "retired"
    assert jade2.is_retired
    assert str(jade2.closed_to_new_users_on) == "2024-09-01"
    assert str(jade2.compute_ends_on) == "2024-11-15"
    assert str(jade2.access_ends_on) == "2025-01-06"
    ncv3 = NodeType.objects.get(system__name="azure", name="Standard_NC6s_v3")
    assert (ncv3.status, str(ncv3.retired_on)) == ("retired", "2025-09-30")
    baskerville = System.objects.get(name="baskerville")
    assert baskerville.status == "limited"
    assert "April 2026" in baskerville.status_note


def test_turing_trial_and_tooling_are_loaded():
    load("default")
    assert System.objects.get(name="baskerville").trial_gpu_hours == 400
    assert "£300" in System.objects.get(name="azure").trial_note
    cells = {
        (t.system.name, t.tool.name): t.supported
        for t in ToolingSupport.objects.select_related("system", "tool")
    }
    assert cells[("baskerville", "PyTorch")] is True
    assert cells[("baskerville", "AzureML")] is False
    assert cells[("baskerville", "Accelerate")] is None  # empty cell: unknown, not unsupported
    assert cells[("azure", "AzureML")] is True
    assert cells[("azure", "PyTorch")] is None


def test_seed_peaks_are_kept_beside_the_dense_peaks():
    load("default")
    h100 = Accelerator.objects.get(name="h100-80-pcie")
    assert h100.bf16_tflops == 756
    [seed] = h100.seed_values
    assert (seed["source"], seed["bf16_tflops"]) == ("SEED-TURING", 1513)
    assert "SPARSITY" in seed["disagreement"]
    v100 = Accelerator.objects.get(name="v100-32-sxm2")
    assert (v100.fp16_tflops, v100.seed_values[0]["fp16_tflops"]) == (125, 31.33)


# --- Malformed files: a message naming file, entry and field; nothing written ---------------


def _break(doc: dict, how: str) -> dict:
    doc = copy.deepcopy(doc)
    jade2 = doc["systems"][0]
    assert jade2["name"] == "jade2"
    if how == "bad type":
        jade2["node_types"][0]["gpus_per_node"] = "eight"
    elif how == "zero":
        jade2["node_types"][0]["gpus_per_node"] = 0
    elif how == "missing field":
        del jade2["kind"]
    elif how == "unknown accelerator":
        jade2["node_types"][0]["accelerator"] = "v100-64-imaginary"
    elif how == "duplicate system":
        doc["systems"].append(copy.deepcopy(jade2))
    elif how == "unknown field":
        jade2["node_types"][0]["gpu_per_node"] = 8
    elif how == "unknown source":
        jade2["source"] = "JADE-DOCS, NOWHERE"
    elif how == "negative rate":
        doc["charge_rates"][0]["rate_per_gpu_hour"] = -1
    elif how == "rate for an unknown accelerator":
        doc["charge_rates"][0]["accelerator"] = "v100-64-imaginary"
    elif how == "rate without a date":
        del doc["charge_rates"][0]["as_of"]
    elif how == "two rates for one accelerator":
        doc["charge_rates"].append(copy.deepcopy(doc["charge_rates"][0]))
    elif how == "rate without a source":
        doc["charge_rates"][0]["source"] = "NOWHERE"
    return doc


@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            "bad type",
            "systems[0] (jade2).node_types[0].gpus_per_node: Input should be a valid "
            "integer, unable to parse string as an integer",
        ),
        ("zero", "systems[0] (jade2).node_types[0].gpus_per_node: Input should be greater than 0"),
        ("missing field", "systems[0] (jade2).kind: Field required"),
        (
            "unknown accelerator",
            "systems[0] (jade2).node_types[0].accelerator: unknown "
            "accelerator 'v100-64-imaginary' (not in this file's "
            "accelerators)",
        ),
        ("duplicate system", "systems[7] (jade2).name: duplicate name 'jade2'"),
        (
            "unknown field",
            "systems[0] (jade2).node_types[0].gpu_per_node: Extra inputs are not permitted",
        ),
        (
            "unknown source",
            "systems[0] (jade2).source: unknown source key 'NOWHERE' (add it to 'sources')",
        ),
        (
            "negative rate",
            "charge_rates[0] (a100-40-sxm4).rate_per_gpu_hour: Input should be greater than "
            "or equal to 0",
        ),
        (
            "rate for an unknown accelerator",
            "charge_rates[0] (v100-64-imaginary).accelerator: unknown accelerator "
            "'v100-64-imaginary'",
        ),
        ("rate without a date", "charge_rates[0] (a100-40-sxm4).as_of: Field required"),
        (
            "two rates for one accelerator",
            "charge_rates[9] (a100-40-sxm4).accelerator: a second charge rate for "
            "'a100-40-sxm4' (one per accelerator)",
        ),
        (
            "rate without a source",
            "charge_rates[0] (a100-40-sxm4).source: unknown source key 'NOWHERE' (add it to "
            "'sources')",
        ),
    ],
)
def test_malformed_file_names_file_entry_and_field_and_changes_nothing(
    how, message, default_data, write_catalog
):
    load("default")
    before = snapshot()
    path = write_catalog(_break(default_data, how))
    with pytest.raises(CommandError) as excinfo:
        load(str(path))
    assert str(excinfo.value) == f"{path}: {message}"
    assert snapshot() == before


def test_malformed_file_into_an_empty_database_writes_nothing(default_data, write_catalog):
    path = write_catalog(_break(default_data, "unknown accelerator"))
    with pytest.raises(CommandError):
        load(str(path))
    assert counts() == dict.fromkeys(counts(), 0)


def test_invalid_json_and_missing_file_are_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"profile": ', encoding="utf-8")
    with pytest.raises(CommandError, match=r"bad\.json: not valid JSON \(line 1, column 13"):
        load(str(bad))
    with pytest.raises(CommandError, match=r"catalog/data/nosuchprofile\.json: cannot be read"):
        load("nosuchprofile")


def test_a_system_cannot_belong_to_two_profiles(default_data, write_catalog):
    load("default")
    before = snapshot()
    doc = copy.deepcopy(default_data)
    doc["profile"]["name"] = "copycat"
    path = write_catalog(doc)
    with pytest.raises(
        CommandError,
        match=r"systems\[0\] \(jade2\)\.name: already belongs to "
        r"profile 'default'",
    ):
        load(str(path))
    assert snapshot() == before


def test_a_benchmark_cannot_belong_to_two_profiles(default_data, write_catalog):
    load("default")
    doc = copy.deepcopy(default_data)
    doc["profile"]["name"] = "copycat"
    doc["systems"] = [s for s in doc["systems"] if s["name"] == "stanage"]
    for system in doc["systems"]:
        system["name"] = "stanage-copy"
    doc["benchmarks"][0]["system"] = None
    with pytest.raises(
        CommandError,
        match=r"benchmarks\[0\] \(turing-gpt2m-a100-40-bs128-oom\)"
        r"\.name: already belongs to profile 'default'",
    ):
        load(str(write_catalog(doc)))


def test_profiles_agree_on_the_accelerators_they_share():
    """Accelerators are shared rows: loading one profile must not change another's figures."""
    records: dict[str, dict] = {}
    for path in sorted(DATA.glob("*.json")):
        for record in json.loads(path.read_text(encoding="utf-8"))["accelerators"]:
            first = records.setdefault(record["name"], record)
            assert first == record, f"{path.name}: {record['name']} differs from another profile"
    assert len(records) == 24
