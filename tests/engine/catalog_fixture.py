"""A realistic catalog for engine tests, from ../shared/catalog-facts.md (source keys in
comments). Dense peaks only; None where the hardware lacks the precision."""

from __future__ import annotations

from advisor.engine.models import (
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    NodeTypeSpec,
    PartitionSpec,
    SystemSpec,
)

ACCELERATORS = [
    # V100-3P, NV-V100-DS: tensor fp16 125 dense; no bf16, no int8 tensor cores.
    AcceleratorSpec(
        name="v100-sxm2-32", display_name="NVIDIA V100 SXM2 32GB", vendor="nvidia",
        memory_gb=32, memory_bandwidth_gb_s=900, fp64_tflops=7.8, fp32_tflops=15.7,
        fp16_tflops=125, fp16_nontensor_tflops=31.33, bf16_supported=False, tensor_cores=True,
        tdp_w=300,
    ),
    # V100-PCIE: 112 tensor fp16.
    AcceleratorSpec(
        name="v100-pcie-32", display_name="NVIDIA V100 PCIe 32GB", vendor="nvidia",
        memory_gb=32, memory_bandwidth_gb_s=900, fp64_tflops=7, fp32_tflops=14,
        fp16_tflops=112, bf16_supported=False, tensor_cores=True, tdp_w=250,
    ),
    # A100-GK, A100-TC: 312 dense fp16/bf16.
    AcceleratorSpec(
        name="a100-40-sxm4", display_name="NVIDIA A100 40GB SXM4", vendor="nvidia",
        memory_gb=40, memory_bandwidth_gb_s=1555, fp64_tflops=9.7, fp32_tflops=19.5,
        tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, int8_tops=624,
        bf16_supported=True, tensor_cores=True, tdp_w=400,
    ),
    AcceleratorSpec(
        name="a100-80-sxm4", display_name="NVIDIA A100 80GB SXM4", vendor="nvidia",
        memory_gb=80, memory_bandwidth_gb_s=2039, fp64_tflops=9.7, fp32_tflops=19.5,
        tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, int8_tops=624,
        bf16_supported=True, tensor_cores=True, tdp_w=400,
    ),
    AcceleratorSpec(
        name="a100-80-pcie", display_name="NVIDIA A100 80GB PCIe", vendor="nvidia",
        memory_gb=80, memory_bandwidth_gb_s=1935, fp64_tflops=9.7, fp32_tflops=19.5,
        tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, int8_tops=624,
        bf16_supported=True, tensor_cores=True, tdp_w=300,
    ),
    # H100-DS: PCIe 756 dense (1513 is with sparsity); SXM 989.4.
    AcceleratorSpec(
        name="h100-80-pcie", display_name="NVIDIA H100 80GB PCIe", vendor="nvidia",
        memory_gb=80, memory_bandwidth_gb_s=2000, fp64_tflops=26, fp32_tflops=51,
        tf32_tflops=378, fp16_tflops=756, bf16_tflops=756, int8_tops=1513,
        bf16_supported=True, tensor_cores=True, tdp_w=350,
    ),
    AcceleratorSpec(
        name="h100-80-sxm5", display_name="NVIDIA H100 80GB SXM5", vendor="nvidia",
        memory_gb=80, memory_bandwidth_gb_s=3350, fp64_tflops=34, fp32_tflops=67,
        tf32_tflops=494.7, fp16_tflops=989.4, bf16_tflops=989.4, int8_tops=1978.9,
        bf16_supported=True, tensor_cores=True, tdp_w=700,
    ),
    # GH200-JSC: 96 GB, peaks assumed = H100 SXM.
    AcceleratorSpec(
        name="gh200-96", display_name="NVIDIA GH200 (H100 96GB)", vendor="nvidia",
        memory_gb=96, memory_bandwidth_gb_s=4000, fp64_tflops=34, fp32_tflops=67,
        tf32_tflops=494.7, fp16_tflops=989.4, bf16_tflops=989.4, bf16_supported=True,
        tensor_cores=True,
    ),
    # L40-DS.
    AcceleratorSpec(
        name="l40s-48", display_name="NVIDIA L40S 48GB", vendor="nvidia", memory_gb=48,
        memory_bandwidth_gb_s=864, fp64_tflops=1.43, fp32_tflops=91.6, tf32_tflops=183,
        fp16_tflops=362.05, bf16_tflops=362.05, bf16_supported=True, tensor_cores=True,
        tdp_w=350,
    ),
    # T4-3P: 65 fp16, no bf16.
    AcceleratorSpec(
        name="t4-16", display_name="NVIDIA T4 16GB", vendor="nvidia", memory_gb=16,
        memory_bandwidth_gb_s=320, fp32_tflops=8.1, fp16_tflops=65, int8_tops=130,
        bf16_supported=False, tensor_cores=True, tdp_w=70,
    ),
    # NV-A5000-DS (unverified figures).
    AcceleratorSpec(
        name="rtx-a5000-24", display_name="NVIDIA RTX A5000 24GB", vendor="nvidia",
        memory_gb=24, memory_bandwidth_gb_s=768, fp32_tflops=27.8, fp16_tflops=111.1,
        bf16_tflops=111.1, bf16_supported=True, tensor_cores=True, tdp_w=230,
    ),
    # MAX1550-GK: XMX ~839 (derived).
    AcceleratorSpec(
        name="max1550-128", display_name="Intel Max 1550 128GB", vendor="intel",
        memory_gb=128, memory_bandwidth_gb_s=3276.8, fp64_tflops=52.4, fp32_tflops=52.4,
        fp16_tflops=839, bf16_tflops=839, bf16_supported=True, tensor_cores=True, tdp_w=600,
    ),
    # MI210-AT.
    AcceleratorSpec(
        name="mi210-64", display_name="AMD MI210 64GB", vendor="amd", memory_gb=64,
        memory_bandwidth_gb_s=1638.4, fp64_tflops=22.6, fp32_tflops=22.6, fp16_tflops=181,
        bf16_tflops=181, bf16_supported=True, tensor_cores=True, tdp_w=300,
    ),
]

ALL_SENSITIVITY = ["public", "internal", "confidential"]

SYSTEMS = [
    SystemSpec(
        name="baskerville", display_name="Baskerville", operator="University of Birmingham",
        kind="hpc_batch", notebooks=True, data_sensitivity=ALL_SENSITIVITY,
        trial_gpu_hours=400, typical_queue_wait_hours=12,
        modules=[
            "module purge",
            "module load baskerville",
            "module load PyTorch/2.1.2-foss-2023a-CUDA-12.1.1",
        ],
        tooling={"pytorch": True, "deepspeed": True, "fsdp": True},
        node_types=[
            NodeTypeSpec(
                name="a100-40", count=46, gpus_per_node=4, accelerator="a100-40-sxm4",
                cpu_cores=72, ram_gb=512, intra_node_interconnect="nvlink",
                inter_node_interconnect="infiniband", inter_node_gbit_s=200,
            ),
            NodeTypeSpec(
                name="a100-80", count=11, gpus_per_node=4, accelerator="a100-80-sxm4",
                cpu_cores=72, ram_gb=512, intra_node_interconnect="nvlink",
                inter_node_interconnect="infiniband", inter_node_gbit_s=200,
            ),
        ],
        partitions=[
            PartitionSpec(
                name="baskerville", node_types=["a100-40"], max_wall_hours=240,
                gpu_request="--gpus-per-node={n}", qos="YOUR_QOS",
            ),
            PartitionSpec(
                name="baskerville-a100_80", node_types=["a100-80"], max_wall_hours=240,
                gpu_request="--gpus-per-node={n}", qos="YOUR_QOS", constraint="a100_80",
            ),
        ],
    ),
    SystemSpec(
        name="jade2", display_name="JADE 2", operator="University of Oxford / STFC Hartree",
        status="retired", status_note="all access withdrawn 2025-01-06",
        data_sensitivity=ALL_SENSITIVITY, typical_queue_wait_hours=24,
        node_types=[
            NodeTypeSpec(
                name="dgx-maxq", count=63, gpus_per_node=8, accelerator="v100-sxm2-32",
                cpu_cores=40, intra_node_interconnect="nvlink",
                inter_node_interconnect="infiniband",
            )
        ],
        partitions=[PartitionSpec(name="big", node_types=["dgx-maxq"], max_wall_hours=24)],
    ),
    SystemSpec(
        name="stanage", display_name="Stanage", operator="University of Sheffield",
        data_sensitivity=ALL_SENSITIVITY, typical_queue_wait_hours=8,
        modules=["module load PyTorch/2.1.2-foss-2023a-CUDA-12.1.1"],
        node_types=[
            NodeTypeSpec(
                name="a100", count=15, gpus_per_node=4, accelerator="a100-80-sxm4",
                cpu_cores=48, ram_gb=512, intra_node_interconnect="nvlink",
                inter_node_interconnect="omnipath", inter_node_gbit_s=100,
            ),
            NodeTypeSpec(
                name="h100", count=6, gpus_per_node=2, accelerator="h100-80-pcie",
                cpu_cores=48, ram_gb=512, intra_node_interconnect="pcie",
                inter_node_interconnect="omnipath", inter_node_gbit_s=100,
            ),
        ],
        partitions=[
            PartitionSpec(name="gpu", node_types=["a100"], max_wall_hours=96, qos="gpu"),
            PartitionSpec(name="gpu-h100", node_types=["h100"], max_wall_hours=96, qos="gpu"),
        ],
    ),
    SystemSpec(
        name="bede", display_name="Bede", operator="N8 CIR", data_sensitivity=ALL_SENSITIVITY,
        typical_queue_wait_hours=48,
        node_types=[
            NodeTypeSpec(
                name="gpu", count=32, gpus_per_node=4, accelerator="v100-sxm2-32",
                cpu_cores=32, ram_gb=512, intra_node_interconnect="nvlink",
                inter_node_interconnect="infiniband", inter_node_gbit_s=100,
            ),
            NodeTypeSpec(
                name="gh", count=5, gpus_per_node=1, accelerator="gh200-96", cpu_cores=72,
                ram_gb=480, intra_node_interconnect="none",
                inter_node_interconnect="infiniband",
            ),
        ],
        partitions=[
            PartitionSpec(name="gpu", node_types=["gpu"], max_wall_hours=48),
            PartitionSpec(name="gh", node_types=["gh"], max_wall_hours=48, max_nodes_per_job=2),
        ],
    ),
    SystemSpec(
        name="dawn", display_name="Dawn", operator="University of Cambridge",
        data_sensitivity=ALL_SENSITIVITY, typical_queue_wait_hours=6,
        modules=["module load default-dawn"],
        node_types=[
            NodeTypeSpec(
                name="pvc", count=256, gpus_per_node=4, accelerator="max1550-128",
                cpu_cores=96, ram_gb=1024, intra_node_interconnect="xelink",
                inter_node_interconnect="infiniband", inter_node_gbit_s=800,
            )
        ],
        partitions=[PartitionSpec(name="pvc", node_types=["pvc"], max_wall_hours=36)],
    ),
    SystemSpec(
        name="hex", display_name="Hex", operator="Lancaster University", kind="interactive",
        scheduler="none", notebooks=True, data_sensitivity=["public", "internal"],
        typical_queue_wait_hours=0,
        node_types=[
            NodeTypeSpec(
                name="extended-3", count=3, gpus_per_node=3, accelerator="rtx-a5000-24",
                cpu_cores=64, ram_gb=128, intra_node_interconnect="pcie",
                inter_node_interconnect="ethernet",
            )
        ],
    ),
    SystemSpec(
        name="azure", display_name="Microsoft Azure", operator="Microsoft", kind="cloud",
        scheduler="cloud", notebooks=True, data_sensitivity=ALL_SENSITIVITY,
        currency="USD", typical_queue_wait_hours=0,
        node_types=[
            # AZ-PRICE: approximate USD per GPU-hour, East US.
            NodeTypeSpec(
                name="Standard_NC4as_T4_v3", count=100, gpus_per_node=1, accelerator="t4-16",
                cpu_cores=4, ram_gb=28, price_per_gpu_hour=0.526,
            ),
            NodeTypeSpec(
                name="Standard_NC96ads_A100_v4", count=100, gpus_per_node=4,
                accelerator="a100-80-pcie", cpu_cores=96, ram_gb=880,
                intra_node_interconnect="pcie", price_per_gpu_hour=3.673,
            ),
            NodeTypeSpec(
                name="Standard_ND96isr_H100_v5", count=100, gpus_per_node=8,
                accelerator="h100-80-sxm5", cpu_cores=96, ram_gb=1900,
                intra_node_interconnect="nvlink", inter_node_interconnect="infiniband",
                inter_node_gbit_s=400, price_per_gpu_hour=12.29,
            ),
        ],
    ),
    SystemSpec(
        name="cosma8", display_name="COSMA8", operator="Durham University",
        data_sensitivity=["public"], typical_queue_wait_hours=24,
        node_types=[
            NodeTypeSpec(
                name="mi210", count=2, gpus_per_node=2, accelerator="mi210-64", cpu_cores=64,
                ram_gb=1024, intra_node_interconnect="infinity_fabric",
            )
        ],
        partitions=[PartitionSpec(name="cosma8-shm2", node_types=["mi210"], max_wall_hours=72)],
    ),
]

BENCHMARKS = [
    # Megatron-LM (Narayanan et al. 2021): 52% of A100 peak for large GPT training.
    BenchmarkSpec(
        accelerator="a100-80-sxm4", model="GPT-3 175B (Megatron-LM)", task="pretrain",
        precision="fp16", num_gpus=1024, mfu=0.52, source="arXiv:2104.04473",
    ),
]


def catalog() -> CatalogSpec:
    return CatalogSpec(accelerators=ACCELERATORS, systems=SYSTEMS, benchmarks=BENCHMARKS)
