"""A starter sbatch script for the recommended option, built from the catalog's facts."""

from __future__ import annotations

import math

from advisor.engine import constants as c
from advisor.engine.frameworks import FRAMEWORKS, Framework
from advisor.engine.launch_args import SFT, PreferenceLaunch, recipe_lines, train_args
from advisor.engine.models import NodeTypeSpec, Option, PartitionSpec, SystemSpec
from advisor.engine.software import PLATFORM_CHANGES

# Training batches whose length varies (padded per batch rather than packed) leave PyTorch's
# caching allocator holding freed blocks of many sizes that larger requests cannot reuse;
# expandable segments grow and reuse one mapping instead. NVIDIA's Megatron-Bridge memory
# tuning (docs.nvidia.com/nemo/megatron-bridge, "Memory Tuning"): the first fix for
# fragmentation OOMs, "Most Slurm launch templates already include it"; ms-swift's unpacked
# Qwen-7B LoRA runs reserved 12-47 % beyond the estimate (docs/accuracy/commentary.md).
# The option exists from PyTorch 2.1; older versions refuse to start with it.
EXPANDABLE_SEGMENTS = [
    "# Fewer out-of-memory errors when batch shapes vary (examples padded per batch, not "
    "packed); PyTorch 2.1 or newer, delete the line on older versions",
    "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
]

LAUNCHER_NOTE = {
    "single": "one process on one GPU",
    "ddp": "torchrun starts one process per GPU (DistributedDataParallel)",
    "fsdp": "accelerate launches one process per GPU with FSDP full sharding",
    "zero1": "torchrun + DeepSpeed ZeRO stage 1 (Hugging Face Trainer --deepspeed)",
    "zero2": "torchrun + DeepSpeed ZeRO stage 2 (Hugging Face Trainer --deepspeed)",
    "zero3": "torchrun + DeepSpeed ZeRO stage 3 (Hugging Face Trainer --deepspeed)",
    "zero3_offload": "torchrun + DeepSpeed ZeRO stage 3 with CPU offload of optimizer and weights",
    "tensor_parallel": "tensor parallelism within the node (training: one process per GPU in "
    "tensor-parallel groups, data parallel across them)",
    "pipeline_parallel": "vLLM pipeline stages over the node's GPUs, a share of the layers each",
}


def slurm_time(hours: float | None, partition: PartitionSpec | None) -> tuple[str, str]:
    """Wall time with the contingency, rounded up to 15 minutes and capped at the partition."""
    note = ""
    if hours is None:
        hours = partition.max_wall_hours if partition and partition.max_wall_hours else 24
        note = "no token count was given: time set to the partition's limit"
    else:
        hours *= 1 + c.CONTINGENCY.value
    minutes = max(15, math.ceil(hours * 60 / 15) * 15)
    if partition and partition.max_wall_hours and minutes > partition.max_wall_hours * 60:
        minutes = int(partition.max_wall_hours * 60)
        note = "capped at the partition limit: save checkpoints and resubmit to resume"
    return f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00", note


def cpu_sbatch_script(
    *,
    job_name: str = "cpu-processing",
    cpus: int = 8,
    mem_gb: int = 32,
    time: str = "12:00:00",
    command: str = "python process.py",
) -> str:
    """A starter script for CPU-only work (scraping, data processing): one node, no --gres."""
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={job_name}",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            f"#SBATCH --cpus-per-task={cpus}      # no --gres: this job needs no GPU",
            f"#SBATCH --mem={mem_gb}G",
            f"#SBATCH --time={time}",
            "",
            command,
        ]
    )


def sbatch_script(
    *,
    option: Option,
    system: SystemSpec,
    node: NodeTypeSpec,
    partition: PartitionSpec | None,
    model_name: str,
    task: str,
    platform: str = "cuda",
    framework: Framework | None = None,
    stepping: tuple[bool, bool] = (False, False),
    fused_loss: bool = False,
    compiled: bool = False,
    fp8: bool = False,
    transformers_below_5: float = 0.0,
    shards: int = 1,
    mxfp4_experts: float = 0.0,
    objective: PreferenceLaunch = SFT,
) -> str | None:
    """`platform` ("cuda", "rocm", "xpu"): non-NVIDIA GPUs get what to change, as comments,
    and Intel GPUs an MPI launcher with oneCCL instead of torchrun. `stepping`: (optimizer
    in backward, activation offloading) as the estimate assumed them; `fused_loss`: the request
    said the loss is fused (Liger Kernel under the Trainer); `compiled`: it trains under
    torch.compile (frameworks.Framework.compile_switch); `transformers_below_5`: the bytes
    more a mixture-of-experts model's bitsandbytes base would hold under transformers 5, whose
    fused experts stay 16-bit (the estimate assumes transformers 4.x: the script says to pin
    it); `mxfp4_experts`: the expert parameters the estimate keeps in MXFP4, which
    transformers keeps only with its Triton kernels installed; `objective`: a preference
    objective's trainer and reference (launch_args.objective_lines)."""
    if system.scheduler.lower() != "slurm":
        return None
    gpus_per_node = min(option.num_gpus, node.gpus_per_node)
    cpus_per_gpu = (node.cpu_cores // node.gpus_per_node) if node.cpu_cores else 8
    cpus = max(cpus_per_gpu * gpus_per_node, 1)
    mem_gb = int(node.ram_gb * gpus_per_node / node.gpus_per_node * 0.9) if node.ram_gb else None
    lines = _job_directives(
        option, system, partition, model_name, task, shards, gpus_per_node, cpus, mem_gb
    )
    lines += _environment_lines(system, platform)
    framework = framework or FRAMEWORKS["transformers" if task == "inference" else "hf_trainer"]
    lines += _version_pins(framework, transformers_below_5, mxfp4_experts)
    lines += recipe_lines(option.recipe, framework, task, compiled, objective)
    if platform == "cuda" and task != "inference":
        lines += EXPANDABLE_SEGMENTS
    if shards > 1:
        lines.append(
            f"# Each array task serves its own shard of the prompts, e.g. in your script: "
            f"prompts[int(os.environ['SLURM_ARRAY_TASK_ID'])::{shards}]"
        )
    nodes = option.nodes
    xpu_ranks = platform == "xpu" and option.strategy not in ("single", "tensor_parallel")
    if task == "inference":
        lines += _inference_launcher(option, gpus_per_node, nodes, framework, fp8)
    elif xpu_ranks and not framework.own_cli:
        args = train_args(
            option.recipe, framework, fused_loss, option.compute_dtype, compiled, objective
        )
        lines += _xpu_launcher(option, gpus_per_node, nodes, args)
    else:
        if xpu_ranks:  # the library's CLI starts torchrun on Intel GPUs too
            lines.append(XPU_TORCHRUN_CAVEAT)
        lines += _training_launcher(
            option,
            gpus_per_node,
            nodes,
            cpus,
            framework,
            task,
            stepping,
            fused_loss,
            compiled,
            objective,
        )
    return "\n".join(lines) + "\n"


def _job_directives(
    option: Option,
    system: SystemSpec,
    partition: PartitionSpec | None,
    model_name: str,
    task: str,
    shards: int,
    gpus_per_node: int,
    cpus: int,
    mem_gb: int | None,
) -> list[str]:
    """The script's header and #SBATCH lines: job name, account, partition, array, nodes,
    GPUs, CPUs, memory (what one node's share of the job asks for) and wall time."""
    nodes = option.nodes
    # An inference job split into a job array: each task runs its share of the prompts.
    wall = option.wall_hours / shards if option.wall_hours is not None else None
    time, time_note = slurm_time(wall, partition)
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in model_name)[:40]
    note = LAUNCHER_NOTE[option.strategy]
    if task == "inference" and nodes > 1:
        note = "tensor parallelism within each node, a pipeline stage per node"
    lines = [
        "#!/bin/bash",
        f"# Starter script for {system.display_name}: {option.num_gpus} x {option.accelerator},"
        f" {option.strategy} ({note}).",
        "# Edit the account, paths and script name; check the system's documentation.",
        f"#SBATCH --job-name={safe_name}-{task}",
        "#SBATCH --account=YOUR_PROJECT_ACCOUNT",
    ]
    directives, gpu_request = _partition_directives(partition, gpus_per_node)
    lines += directives
    if shards > 1:
        lines.append(
            f"#SBATCH --array=0-{shards - 1}  # {shards} jobs, each the prompts of shard "
            "$SLURM_ARRAY_TASK_ID (same GPU hours, a fraction of the wall time)"
        )
    lines += [
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH {gpu_request}",
        f"#SBATCH --cpus-per-task={cpus}",
    ]
    if mem_gb:
        lines.append(f"#SBATCH --mem={mem_gb}G")
    lines.append(f"#SBATCH --time={time}")
    if time_note:
        lines.append(f"# time: {time_note}")
    return lines


def _version_pins(framework: Framework, fused_experts: float, mxfp4_experts: float) -> list[str]:
    """The transformers (and kernels) that keep experts as the estimate counts them."""
    lines = []
    if fused_experts:
        lines += [
            "# The estimate counts the experts quantised, as transformers 4.x builds them; under",
            "# transformers 5 bitsandbytes leaves its fused experts 16-bit (about "
            f"{fused_experts / 1e9:,.0f} GB more):",
            '# pip install "transformers<5"',
        ]
    if mxfp4_experts and framework.key == "transformers":
        # Dequantised to bf16 instead of 4.25 bits: 2 - 0.53 bytes more per expert weight.
        more = mxfp4_experts * (2 - c.MXFP4_EXPERT_BYTES.value)
        lines += [
            "# The estimate keeps the MXFP4 experts packed; transformers does so only with its",
            "# Triton kernels, else it dequantises them to bf16 "
            f"(about {more / 1e9:,.0f} GB more):",
            '# pip install "transformers>=4.55" "triton>=3.4" kernels',
        ]
    return lines


def _partition_directives(
    partition: PartitionSpec | None, gpus_per_node: int
) -> tuple[list[str], str]:
    """The partition's #SBATCH lines (partition, QoS, constraint) and its way to ask for GPUs."""
    if partition is None:
        return [], f"--gres=gpu:{gpus_per_node}"
    lines = []
    if partition.slurm_partition:
        lines.append(f"#SBATCH --partition={partition.slurm_partition}")
    if partition.qos:
        lines.append(f"#SBATCH --qos={partition.qos}")
    if partition.constraint:
        constraint = partition.constraint
        if not constraint.startswith("-"):
            constraint = f"--constraint={constraint}"
        lines.append(f"#SBATCH {constraint}")
    return lines, partition.gpu_request.format(n=gpus_per_node)


def _environment_lines(system: SystemSpec, platform: str) -> list[str]:
    """Shell options, the system's modules or container and what a non-CUDA platform changes."""
    lines = ["", "set -euo pipefail"]
    lines += list(system.modules) or ["# module load ...  (see the system's documentation)"]
    if system.container:
        lines.append(f"# container: {system.container}")
    change = PLATFORM_CHANGES.get(platform)
    if change:
        lines.append("# " + change + ".")
    lines.append("")
    return lines


def _xpu_launcher(option: Option, gpus_per_node: int, nodes: int, args: str) -> list[str]:
    """Intel GPUs: one MPI rank per GPU, torch.distributed over oneCCL (backend 'ccl'); `args`:
    the recipe's command-line arguments, as on the other platforms."""
    lines = [
        "# Intel GPUs: one MPI rank per GPU; init_process_group(backend='ccl') after importing "
        "oneccl_bindings_for_pytorch",
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_PORT=29500",
    ]
    if option.strategy.startswith("zero"):
        lines.append(
            "# ds_config.json: DeepSpeed with the XPU accelerator (intel-extension-for-deepspeed)"
        )
    extra = " --deepspeed ds_config.json" if option.strategy.startswith("zero") else ""
    lines.append(
        f"mpiexec -n {nodes * gpus_per_node} -ppn {gpus_per_node} python train.py{args}{extra}"
    )
    return lines


def _ray_cluster(nodes: int) -> list[str]:
    """A Ray cluster over the job's nodes, which vLLM needs to serve one model across nodes
    (docs.vllm.ai, 'Parallelism and Scaling': tensor_parallel_size = GPUs per node,
    pipeline_parallel_size = nodes)."""
    return [
        f"# vLLM over {nodes} nodes: a Ray cluster across the job's nodes, then your script on "
        "this (the first) node.",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'head_ip=$(srun --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | cut -d" " -f1)',
        'srun --nodes=1 --ntasks=1 -w "$head" ray start --head --node-ip-address="$head_ip" '
        "--port=6379 --block &",
        "sleep 10",
        f'srun --nodes={nodes - 1} --ntasks={nodes - 1} --exclude="$head" '
        'ray start --address="$head_ip:6379" --block &',
        "sleep 30  # until every node has joined (ray status lists them)",
    ]


def _inference_launcher(
    option: Option, gpus_per_node: int, nodes: int, framework: Framework, fp8: bool
) -> list[str]:
    """The library's command for a batch of prompts: vLLM's offline LLM class, a TGI server and
    its client, or the researcher's own generate() script."""
    strategy = option.strategy
    # The replica's layout as the option's recipe records it (option_writing): tensor parallel
    # within a node, a pipeline stage per node or, on PCIe nodes, per GPU.
    recipe = option.recipe
    if recipe is not None:
        tp, pp = recipe.tp, recipe.pp
    else:
        tp, pp = (gpus_per_node if strategy == "tensor_parallel" else 1), nodes
    # fp8 as the estimate assumes: a checkpoint stored in fp8 loads as it is; a 16-bit one
    # is quantised at load.
    vllm_kwargs = ', quantization="fp8"' if fp8 else ""
    # fp16 where the estimate computes in it: vLLM refuses bf16 below compute capability 8.0
    # and would load a bf16 checkpoint as bf16 elsewhere.
    half = option.compute_dtype == "fp16"
    vllm_kwargs += ', dtype="half"' if half else ""
    if framework.key == "vllm":
        # A batch job, not a server: the offline LLM class batches every prompt itself
        # (a `vllm serve` alone would wait for a client).
        stages = f", pipeline_parallel_size={pp}" if pp > 1 else ""
        ray = ', distributed_executor_backend="ray"' if nodes > 1 else ""
        return [
            *(_ray_cluster(nodes) if nodes > 1 else []),
            "# vLLM's LLM class schedules all your prompts itself (continuous batching, as "
            "the estimate assumes):",
            f'#   LLM("MODEL", tensor_parallel_size={tp}{stages}, gpu_memory_utilization=0.9'
            f"{vllm_kwargs}{ray}).generate(prompts, sampling_params)",
            "# It reserves --gpu-memory-utilization of each GPU at start-up (nvidia-smi "
            "shows that much).",
            f"python generate.py --tensor-parallel-size {tp}"
            + (f" --pipeline-parallel-size {pp}" if pp > 1 else "")
            + (" --dtype half" if half else "")
            + " --gpu-memory-utilization 0.9  # your script",
        ]
    if framework.key == "tgi":
        quantize = (" --quantize fp8" if fp8 else "") + (" --dtype float16" if half else "")
        return [
            "# TGI batches the requests a client has in flight (it has no batch endpoint):",
            "# send your prompts concurrently, as many at once as the estimate's batch size.",
            f"text-generation-launcher --model-id MODEL --num-shard {tp}{quantize} --port 8080 &",
            "until curl -sf http://127.0.0.1:8080/health; do sleep 10; done  # loading",
            "python send_prompts.py  # your client",
        ]
    hf_notes = (
        ["# fp8: from_pretrained(MODEL, quantization_config=FineGrainedFP8Config())"] if fp8 else []
    )
    if half:
        hf_notes.append("# fp16: from_pretrained(MODEL, torch_dtype=torch.float16)")
    if strategy == "tensor_parallel" and framework.sequential_multi_gpu:
        return [
            *hf_notes,
            f"# The model's layers spread over the {gpus_per_node} GPUs, which run one after "
            "another (as the estimate assumes):",
            '#   AutoModelForCausalLM.from_pretrained(MODEL, device_map="auto")',
            "python infer.py  # your script",
        ]
    if strategy == "tensor_parallel":
        return [
            *hf_notes,
            f"# Tensor parallel over the {gpus_per_node} GPUs, one process each (as the estimate "
            "assumes; Transformers 4.49 or newer):",
            '#   AutoModelForCausalLM.from_pretrained(MODEL, tp_plan="auto")',
            '# device_map="auto" would run the GPUs one after another: '
            f"about {gpus_per_node} x the GPU hours.",
            f"torchrun --nproc-per-node {gpus_per_node} infer.py  # your script",
        ]
    return [*hf_notes, "python infer.py  # your script"]


# Libraries that start torchrun themselves on Intel GPUs too; torchrun has been reported not
# to start XPU workers where an MPI launch does (pytorch/pytorch issue 158722, 2025).
XPU_TORCHRUN_CAVEAT = (
    "# Intel GPUs: if torchrun does not start the workers (pytorch/pytorch#158722), run one MPI "
    "rank per GPU (mpiexec -n GPUS -ppn GPUS_PER_NODE) with RANK, WORLD_SIZE and LOCAL_RANK set "
    "from PMI_RANK, PMI_SIZE and MPI_LOCALRANKID."
)


# The estimate times DeepSpeed's default, overlap_comm off below stage 3 (scale_cost.py).
ZERO2_OVERLAP_NOTE = (
    "# ZeRO-2 reduces every micro-batch's gradients, by default before backward goes on (as "
    "estimated): zero_optimization.overlap_comm = true hides it for about 4.5 x "
    "(allgather_bucket_size + reduce_bucket_size) x 2 bytes of GPU memory (Transformers' "
    "DeepSpeed guide); fewer, larger micro-batches cut it too.",
)


# LLaMA-Factory's example DeepSpeed configs (examples/deepspeed/) per ZeRO layout; it ships no
# stage-1 config.
_LLAMA_FACTORY_DS = {
    "zero2": "examples/deepspeed/ds_z2_config.json",
    "zero3": "examples/deepspeed/ds_z3_config.json",
    "zero3_offload": "examples/deepspeed/ds_z3_offload_config.json",
}


def _llama_factory_launcher(strategy: str, gpus_per_node: int, nodes: int, args: str) -> list[str]:
    """llamafactory-cli with the recipe as config overrides. Several GPUs: FORCE_TORCHRUN=1
    and its NNODES / NODE_RANK / MASTER_ADDR variables, one srun task per node (its README's
    multi-node recipe); FSDP through accelerate with the repository's src/train.py."""
    cli = f"llamafactory-cli train YOUR_CONFIG.yaml{args}"
    if strategy == "single":
        return [cli]
    head = 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    if strategy == "fsdp":
        return [
            head,
            f"srun accelerate launch --num_machines={nodes} "
            f'--num_processes={nodes * gpus_per_node} --main_process_ip="$head_node" '
            '--machine_rank="$SLURM_NODEID" --use_fsdp --fsdp_sharding_strategy=FULL_SHARD '
            f"src/train.py YOUR_CONFIG.yaml{args}",
        ]
    lines = [head]
    if strategy == "zero1":
        lines.append(
            "# ds_z1_config.json: examples/deepspeed/ds_z2_config.json with "
            "zero_optimization.stage = 1"
        )
        cli += " deepspeed=ds_z1_config.json"
    elif strategy in _LLAMA_FACTORY_DS:
        cli += f" deepspeed={_LLAMA_FACTORY_DS[strategy]}"
    return [
        *lines,
        f'srun bash -c "FORCE_TORCHRUN=1 NNODES={nodes} NODE_RANK=\\$SLURM_NODEID '
        f'NPROC_PER_NODE={gpus_per_node} MASTER_ADDR=$head_node MASTER_PORT=29500 {cli}"',
    ]


def _training_launcher(
    option: Option,
    gpus_per_node: int,
    nodes: int,
    cpus: int,
    framework: Framework,
    task: str,
    stepping: tuple[bool, bool],
    fused_loss: bool,
    compiled: bool = False,
    objective: PreferenceLaunch = SFT,
) -> list[str]:
    """The launcher for the option's strategy (python, torchrun, accelerate, tune, DeepSpeed),
    with the recipe's arguments in the framework's own terms."""
    strategy = option.strategy
    args = train_args(
        option.recipe, framework, fused_loss, option.compute_dtype, compiled, objective
    )
    if framework.key == "torchtune":
        # The memory the estimate assumed, in the recipe's own config keys.
        args += f" optimizer_in_bwd={stepping[0]} enable_activation_offloading={stepping[1]}"
        adapters = task in ("lora", "qlora")
        recipe = "lora_finetune" if adapters else "full_finetune"
        if objective.name != "sft":
            # lora_dpo_single_device / lora_dpo_distributed / full_dpo_distributed (no
            # single-device recipe for full DPO: the distributed one on one GPU).
            recipe = "lora_dpo" if adapters else "full_dpo"
            if strategy == "single" and not adapters:
                return [
                    f"tune run --nproc_per_node 1 full_dpo_distributed --config YOUR_CONFIG{args}"
                ]
        if strategy == "single":
            return [f"tune run {recipe}_single_device --config YOUR_CONFIG{args}"]
        return [
            f"srun tune run --nnodes {nodes} --nproc_per_node {gpus_per_node} "
            f"{recipe}_distributed --config YOUR_CONFIG{args}"
        ]
    if framework.key == "llama_factory":
        return _llama_factory_launcher(strategy, gpus_per_node, nodes, args)
    if strategy == "single":
        return [f"python train.py{args}  # your script"]
    recipe = option.recipe
    if strategy == "tensor_parallel" and (recipe is None or recipe.tp <= 1):
        return [f"python train.py --tensor-parallel-size {gpus_per_node}{args}"]
    rdzv = [
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export OMP_NUM_THREADS={max(cpus // max(gpus_per_node, 1), 1)}",
    ]
    torchrun = (
        f"srun torchrun --nnodes={nodes} --nproc_per_node={gpus_per_node} "
        '--rdzv_backend=c10d --rdzv_endpoint="$head_node:29500" --rdzv_id="$SLURM_JOB_ID"'
    )
    if strategy == "ddp":
        return [*rdzv, f"{torchrun} train.py{args}"]
    if strategy == "tensor_parallel":
        # One process per GPU; the script splits them into tensor-parallel groups of
        # recipe.tp within each node and data-parallel ranks across them.
        entry = "pretrain_gpt.py" if framework.key in ("megatron", "deepspeed") else "train.py"
        ds = ""
        if framework.key == "deepspeed":
            ds = " --deepspeed --deepspeed_config ds_config.json --zero-stage 1"
        return [*rdzv, f"{torchrun} {entry}{args}{ds}"]
    if strategy == "fsdp":
        return [
            *rdzv,
            f"srun accelerate launch --num_machines={nodes} "
            f'--num_processes={nodes * gpus_per_node} --main_process_ip="$head_node" '
            '--machine_rank="$SLURM_NODEID" --use_fsdp '
            f"--fsdp_sharding_strategy=FULL_SHARD train.py{args}",
        ]
    stage = {"zero1": 1, "zero2": 2, "zero3": 3, "zero3_offload": 3}[strategy]
    offload = " with offload_optimizer/offload_param to cpu" if strategy == "zero3_offload" else ""
    return [
        *rdzv,
        f"# ds_config.json: zero_optimization.stage = {stage}{offload}",
        *(ZERO2_OVERLAP_NOTE if stage == 2 else ()),
        f"{torchrun} train.py --deepspeed ds_config.json{args}",
    ]
