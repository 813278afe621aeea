"""engine_catalog(): the catalog as the engine takes it, built once per catalog version.

The mapping (rows to the engine's frozen specs) and the cache: one cheap query while the catalog
is unchanged, and a rebuild after any write, whether the admin's, the loader's, a bulk update,
an M2M change or a delete.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import transaction

from advisor.engine.models import CatalogSpec
from advisor.engine_catalog import engine_catalog, engine_catalog_forget
from catalog.benchmark_file import benchmark_file_read
from catalog.data_file import validate_catalog_file
from catalog.models import Accelerator, CatalogVersion, NodeType, Partition, System, Tool
from tests.catalog.conftest import DATA

pytestmark = pytest.mark.django_db


def test_engine_catalog_has_dense_peaks(default_catalog):
    catalog = engine_catalog(include_retired=True)
    assert isinstance(catalog, CatalogSpec)
    accelerators = {a.name: a for a in catalog.accelerators}
    v100 = accelerators["v100-32-sxm2"]
    assert (v100.fp16_tflops, v100.bf16_tflops, v100.bf16_supported) == (125, None, False)
    h100 = accelerators["h100-80-pcie"]
    assert (h100.bf16_tflops, h100.fp16_tflops, h100.memory_gb) == (756, 756, 80)
    assert accelerators["a100-40-sxm4"].memory_bandwidth_gb_s == 1555


def test_engine_catalog_leaves_out_retired_systems_and_vm_sizes(default_catalog):
    catalog = engine_catalog()
    names = {s.name for s in catalog.systems}
    # The Turing's Trusted Research Environment is a system of its own kind (secure data route).
    assert names == {"baskerville", "stanage", "cosma8", "dawn", "azure", "turing-tre"}
    azure = next(s for s in catalog.systems if s.name == "azure")
    assert "Standard_NC6s_v3" not in {nt.name for nt in azure.node_types}
    # The V100 16GB was used only by the retired NCv3 sizes, so the engine does not see it.
    assert "v100-16-pcie" not in {a.name for a in catalog.accelerators}

    everything = engine_catalog(include_retired=True)
    jade2 = next(s for s in everything.systems if s.name == "jade2")
    assert jade2.status == "retired"
    assert [p.name for p in jade2.partitions] == ["big", "devel", "small"]


def test_engine_catalog_carries_partitions_prices_and_tooling(default_catalog):
    systems = {s.name: s for s in engine_catalog().systems}
    baskerville = systems["baskerville"]
    a100_80 = next(p for p in baskerville.partitions if p.name == "a100-80")
    assert (a100_80.gpu_request, a100_80.constraint, a100_80.slurm_partition) == (
        "--gpus={n}",
        "--constraint=a100_80",
        None,
    )
    assert a100_80.node_types == ["A100-80"]
    assert baskerville.status == "limited"
    assert baskerville.tooling["DeepSpeed"] is True
    assert baskerville.tooling["Accelerate"] is None
    stanage = {p.name: p for p in systems["stanage"].partitions}
    assert (stanage["gpu-h100"].qos, stanage["gpu-h100"].max_wall_hours) == ("gpu", 96)
    azure = {nt.name: nt for nt in systems["azure"].node_types}
    nd_h100 = azure["Standard_ND96isr_H100_v5"]
    assert (nd_h100.price_per_gpu_hour, nd_h100.gpus_per_node, nd_h100.count) == (12.29, 8, 0)
    assert systems["azure"].currency == "USD"
    assert systems["dawn"].modules == ["module load default-dawn"]


def test_engine_catalog_benchmarks_are_calibration_records(default_catalog):
    [bench] = engine_catalog().benchmarks
    assert (bench.accelerator, bench.model, bench.batch_size, bench.outcome) == (
        "a100-40-sxm4",
        "GPT2-M (minGPT)",
        128,
        "out_of_memory",
    )
    assert bench.source == "SEED-TURING"


def test_engine_catalog_follows_the_active_profile(db):
    assert engine_catalog() == CatalogSpec(accelerators=[], systems=[], benchmarks=[])
    call_command("load_catalog", "lancaster", stdout=None)
    hec = next(s for s in engine_catalog().systems if s.name == "hec")
    typed = {p.name: p.gpu_request for p in hec.partitions}
    assert typed["gpu-long-h200"] == "--gres=gpu:nvidia_h200_nvl:{n}"
    call_command("load_catalog", "uva", stdout=None)
    uva = next(s for s in engine_catalog().systems if s.name == "uva-hpc")  # beside Rio
    pod = next(p for p in uva.partitions if p.name == "gpu-basepod")
    assert (pod.gpu_request, pod.constraint) == ("--gres=gpu:a100:{n}", "-C gpupod")
    assert {s.name for s in engine_catalog(profile="lancaster").systems} == {"hex", "hec", "bede"}


def test_engine_catalog_is_built_in_a_fixed_number_of_queries_then_costs_one(
    default_catalog, django_assert_num_queries
):
    engine_catalog_forget()
    # The stamp, the profile, systems, node types with accelerators, partitions and their node
    # types, tooling, benchmarks, accelerators, the profile's ranking policy with its charge
    # rates: whatever the catalog's size.
    with django_assert_num_queries(11):
        built = engine_catalog(include_retired=True)
    with django_assert_num_queries(1):  # the stamp: unchanged, so the built catalog is reused
        assert engine_catalog(include_retired=True) is built


def _memory(name: str) -> float:
    return next(a.memory_gb for a in engine_catalog().accelerators if a.name == name)


def test_an_admin_save_is_seen_at_once(default_catalog):
    assert _memory("a100-80-sxm4") == 80
    accelerator = Accelerator.objects.get(name="a100-80-sxm4")
    accelerator.memory_gb = 81
    accelerator.save()
    assert _memory("a100-80-sxm4") == 81


def test_a_bulk_update_is_seen_at_once(default_catalog):
    assert "dawn" in {s.name for s in engine_catalog().systems}
    System.objects.filter(name="dawn").update(status="retired")
    assert "dawn" not in {s.name for s in engine_catalog().systems}


def test_a_delete_is_seen_at_once(default_catalog):
    stanage = next(s for s in engine_catalog().systems if s.name == "stanage")
    assert "gpu-h100" in {p.name for p in stanage.partitions}
    Partition.objects.filter(system__name="stanage", name="gpu-h100").delete()
    stanage = next(s for s in engine_catalog().systems if s.name == "stanage")
    assert "gpu-h100" not in {p.name for p in stanage.partitions}


def test_a_partition_losing_a_node_type_is_seen_at_once(default_catalog):
    def a100_80():
        baskerville = next(s for s in engine_catalog().systems if s.name == "baskerville")
        return next(p for p in baskerville.partitions if p.name == "a100-80")

    assert a100_80().node_types == ["A100-80"]
    partition = Partition.objects.get(system__name="baskerville", name="a100-80")
    partition.node_types.add(NodeType.objects.get(system__name="baskerville", name="A100-40"))
    assert a100_80().node_types == ["A100-40", "A100-80"]


def test_a_bulk_create_is_seen_at_once(default_catalog):
    before = CatalogVersion.objects.current()
    Tool.objects.bulk_create([Tool(name="JAX (bulk)", position=99)])
    assert CatalogVersion.objects.current() != before


def test_reloading_the_catalog_changes_the_version(default_catalog):
    before = CatalogVersion.objects.current()
    call_command("load_catalog", "lancaster", stdout=io.StringIO())
    assert CatalogVersion.objects.current() != before
    assert {s.name for s in engine_catalog().systems} == {"hex", "hec", "bede"}


def test_a_rolled_back_write_never_leaves_a_stale_catalog(default_catalog):
    """A catalog built inside a transaction that rolls back is keyed by a stamp nobody sees
    again: the stamp is random, not a counter that the next write would reach once more."""
    seen_inside = set()

    def retire_dawn_then_fail():
        with transaction.atomic():
            System.objects.filter(name="dawn").update(status="retired")
            seen_inside.update(s.name for s in engine_catalog().systems)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        retire_dawn_then_fail()
    assert "dawn" not in seen_inside
    assert "dawn" in {s.name for s in engine_catalog().systems}
    System.objects.filter(name="stanage").update(status="retired")
    names = {s.name for s in engine_catalog().systems}
    assert "dawn" in names
    assert "stanage" not in names


def test_every_catalog_model_changes_the_version_on_bulk_writes():
    """A new catalog model must use CatalogManager, or its bulk updates would go unseen."""
    from django.apps import apps

    from catalog.models import CatalogQuerySet

    for model in apps.get_app_config("catalog").get_models():
        if model is CatalogVersion:
            continue
        assert isinstance(model._default_manager.all(), CatalogQuerySet), model.__name__


PROFILES = sorted(path.stem for path in DATA.glob("*.json"))


def test_every_profile_file_is_compared():
    assert PROFILES == ["default", "lancaster", "uva"]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("include_retired", [False, True])
def test_a_data_file_reaches_the_engine_as_its_loaded_rows_do(profile, include_retired):
    """The bench and the engine tests build the catalog from a file without a database
    (CatalogFile.to_spec); after loading the same file, engine_catalog() builds the same one,
    for every institute's profile, not only the default. As bin/dev does, the default profile
    is loaded first: the shared benchmarks name its accelerators, which every profile shares."""
    call_command("load_catalog", "default", stdout=io.StringIO())
    shared = [bench for _, bench in benchmark_file_read(DATA / "shared" / "benchmarks.json")]
    call_command("load_benchmarks", str(DATA / "shared" / "benchmarks.json"), stdout=io.StringIO())
    call_command("load_catalog", profile, stdout=io.StringIO())
    doc = validate_catalog_file(DATA / f"{profile}.json")
    default_accelerators = validate_catalog_file(DATA / "default.json").accelerators

    from_file = doc.to_spec(
        shared_benchmarks=shared,
        shared_accelerators=default_accelerators,
        include_retired=include_retired,
    )
    from_rows = engine_catalog(include_retired=include_retired)

    assert from_file.systems == from_rows.systems
    assert from_file.accelerators == from_rows.accelerators
    assert from_file.benchmarks == from_rows.benchmarks
    assert from_file == from_rows
