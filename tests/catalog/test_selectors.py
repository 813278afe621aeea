"""engine_catalog(): the plain pydantic catalog the estimation engine takes."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from advisor.engine.models import CatalogSpec
from catalog.models import Profile
from catalog.selectors import comparison_rows, engine_catalog

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
    assert names == {"baskerville", "stanage", "cosma8", "dawn", "azure"}
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
    [uva] = engine_catalog().systems
    pod = next(p for p in uva.partitions if p.name == "gpu-basepod")
    assert (pod.gpu_request, pod.constraint) == ("--gres=gpu:a100:{n}", "-C gpupod")
    assert {s.name for s in engine_catalog(profile="lancaster").systems} == {"hex", "hec", "bede"}


def test_engine_catalog_takes_a_fixed_number_of_queries(default_catalog, django_assert_num_queries):
    with django_assert_num_queries(8):
        engine_catalog(include_retired=True)


def test_comparison_rows_group_node_types_by_gpu(default_catalog):
    rows = comparison_rows(profile=Profile.objects.get(name="default"), sort="-memory")
    assert rows[0].accelerator.memory_gb == 141
    azure_t4 = next(r for r in rows if r.system.name == "azure" and r.accelerator.name == "t4-16")
    assert azure_t4.gpus_per_node == [1, 4]
    assert azure_t4.gpus_total is None
    assert azure_t4.price_per_gpu_hour == [0.526, 1.088]
    azure_v100 = next(r for r in rows if r.accelerator.name == "v100-16-pcie")
    assert azure_v100.status == "retired"
