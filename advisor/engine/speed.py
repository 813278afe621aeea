"""How fast a job runs on an accelerator: utilisation from the nearest measurement.

Achieved FLOP/s = dense peak x utilisation. Utilisation is worked out once per accelerator and
estimate, in three steps:

1. **Generation.** Every accelerator belongs to a vendor generation (Hopper, Ampere data
   centre, CDNA2, Xe-HPC, ...); measurements transfer within a generation only.
2. **Nearest measurement.** Among the catalog's benchmarks on the same accelerator (or, one
   step further away, the same generation) the nearest to the job in task, precision, model
   size, sequence length, micro-batch and strategy is chosen (`_distance`).
3. **Transfer by a roofline per layer** (roofline.py: matmuls at the peak, elementwise
   work, eager attention's scores and an unfused loss's logits at the memory bandwidth). The
   measurement's MFU is divided by its own model's factor and multiplied by the job's: a 125M
   model on an A100 reaches about 70 % of what a 7B model does (llm-foundry).

Without a measurement the job gets the generation's documented default (at its reference
model width), transferred the same way, and the option says it is a default. Mixture-of-experts
models run below dense ones (routing, all-to-all, small expert matmuls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from advisor.engine import constants as c
from advisor.engine.generations import default_for, generation, generation_of
from advisor.engine.models import AcceleratorSpec, BenchmarkSpec
from advisor.engine.roofline import (
    COMPILE_WHY,
    compile_gain,
    reference_roofline,
    roofline,
    roofline_factor,
    run_loss_bytes,
)
from advisor.engine.shape import ModelShape


@dataclass(frozen=True, slots=True)
class Utilisation:
    value: float
    calibrated: bool = False  # from a catalog benchmark rather than a documented default
    benchmark: str | None = None  # the benchmark's id (name) when there is one
    label: str = ""  # short words for the option: "benchmark <id>" / "default for <generation>"
    detail: tuple = ()  # what `source` is written from
    factors: tuple = ()  # (factor, why) applied on top
    fixed_source: str = ""  # a source given as text (prefill)
    # For a recipe that does not recompute activations: from the measurements' MFU rather than
    # their utilisation of executed FLOPs (see `for_recipe`); None: the same as `value`.
    no_recompute: float | None = None
    # Where `no_recompute` comes from when not from the runs `label` names (a sibling chip's
    # run without recomputation: `_without_recomputation`); "": the same runs.
    no_recompute_label: str = ""
    # The layout the measurement ran under, which its figure already contains: its GPU count
    # (scale_cost.scale_efficiency; a default is read as one node's figure) and, when it ran
    # with Megatron-style tensor parallelism, its model's width (tensor_parallel.
    # without_measured_layout removes its collectives before the job's are added).
    measured_gpus: int = 8
    tp_width: float | None = None

    @property
    def source(self) -> str:
        return self.fixed_source or describe(self.detail, self.factors)

    def label_for_recipe(self, level: str) -> str:
        """The runs the recipe's utilisation (`for_recipe`) comes from, in words."""
        if level == "full" or not self.no_recompute_label:
            return self.label
        return self.no_recompute_label

    def for_recipe(self, level: str) -> float:
        """The utilisation for a recipe with this checkpointing level. A run that recomputed
        activations is credited with its executed FLOPs (8N per token), but a job that does not
        recompute is credited with runs that did not either (`_without_recomputation`: the
        same model on a sibling chip), else it is never faster per token than the run itself
        was: it gets the run's MFU.
        llm-foundry's A100 80GB table shows it: the plain rows reach 64.2 % MFU at 7B and
        59.6 % at 13B, the checkpointed rows 55.3 % at 30B and 53.3 % at 70B, which continues
        that trend, while their executed-FLOP figures (73.7 %, 71.1 %) are above every plain
        row: a plain 30B job credited with 73.7 % would beat every run in the table."""
        if level == "full" or self.no_recompute is None:
            return self.value
        return self.no_recompute


def benchmark_mfu(bench: BenchmarkSpec, accelerators: dict[str, AcceleratorSpec]) -> float | None:
    """The benchmark's MFU: as stated, else 6 N x tokens/s / (GPUs x dense peak) for a completed
    training run (Kaplan et al.'s 6N; PaLM's MFU definition, arXiv:2204.02311 appendix B)."""
    if bench.outcome != "completed":
        return None
    if bench.mfu is not None:
        return bench.mfu
    acc = accelerators.get(bench.accelerator)
    if (
        acc is None
        or bench.task not in ("pretrain", "full_finetune")
        or not bench.tokens_per_second
        or not bench.params
        or bench.num_gpus < 1
    ):
        return None
    if bench.precision == "fp32":  # ran on the CUDA cores: of their peak (_Measured.fp32)
        peak = acc.fp32_tflops
    else:
        dtype = bench.precision if bench.precision in ("fp16", "bf16") else "bf16"
        peak = (acc.bf16_tflops if dtype == "bf16" else acc.fp16_tflops) or acc.fp16_tflops
    if not peak:
        return None
    return 6 * bench.params * bench.tokens_per_second / (bench.num_gpus * peak * 1e12)


def _bench_width(bench: BenchmarkSpec) -> tuple[float | None, float | None]:
    """(width, matmul parameters per layer) of the benchmark's model: stated, else the shape of
    a dense decoder with that many parameters (Kaplan et al.'s N = 12 L h^2 with the aspect
    ratio h / L of about 128 that GPT-3's and Llama's tables share)."""
    if bench.hidden_size and bench.num_layers and bench.params:
        return float(bench.hidden_size), bench.params / bench.num_layers
    if not bench.params:
        return None, None  # size unknown: used as measured, with no transfer
    # 12 L h^2 = N with L = h / 128  ->  h^3 = 128 N / 12
    width = (128 * bench.params / 12) ** (1 / 3)
    layers = max(width / 128, 1)
    return width, bench.params / layers


@dataclass(frozen=True, slots=True)
class _Measured:
    bench: BenchmarkSpec
    mfu: float  # as stated or derived (6N per token)
    executed: float  # of the FLOPs executed: MFU x 8/6 when the run recomputed activations
    width: float | None
    layer_params: float | None
    generation: str
    log_params: float | None
    log_seq: float | None
    log_batch: float | None
    # The measured model's roofline factor on the chip it was measured on (None: unknown
    # chip or size): a 125M row from an A100 80GB (2.0 TB/s) moves to an A100 40GB (1.6 TB/s)
    # with the 40GB card's slower elementwise work, not as if it had been measured there.
    own_roofline: float | None = None
    # An fp32 run: its matmuls ran on the CUDA cores and its MFU is of the fp32 peak. Such a
    # run sets fp32 jobs' utilisation and no other; tensor-core runs set no fp32 job's.
    fp32: bool = False
    # What the run's own unfused loss moved per token and layer (roofline.run_loss_bytes).
    loss_bytes: float = 0.0


_INDEX: dict[int, tuple[list[BenchmarkSpec], tuple[_Measured, ...]]] = {}


def measured(
    benchmarks: list[BenchmarkSpec], accelerators: dict[str, AcceleratorSpec]
) -> tuple[_Measured, ...]:
    """The training benchmarks with a usable MFU. Worked out once per catalog: a catalog is
    frozen, so its benchmark list is the cache key (kept alive with the entry)."""
    key = id(benchmarks)
    hit = _INDEX.get(key)
    if hit is not None and hit[0] is benchmarks:
        return hit[1]
    low, high = c.BENCHMARK_MFU_BOUNDS
    recompute = (c.TRAIN_FLOPS_PER_PARAM.value + c.RECOMPUTE_FLOPS_PER_PARAM.value) / (
        c.TRAIN_FLOPS_PER_PARAM.value
    )
    out = []
    for bench in benchmarks:
        if bench.task in (None, "inference"):
            continue
        mfu = benchmark_mfu(bench, accelerators)
        if mfu is None or not low <= mfu <= high:
            continue
        # MFU counts 6N per token; the engine applies utilisation to the FLOPs executed, which
        # with full recomputation are 8N (llm-foundry's HFU column is this).
        executed = mfu * recompute if bench.gradient_checkpointing else mfu
        width, layer_params = _bench_width(bench)
        acc = accelerators.get(bench.accelerator)
        gen = generation(acc) if acc is not None else generation_of(bench.accelerator)
        fp32 = bench.precision == "fp32"
        layers = bench.num_layers or (bench.params / layer_params if layer_params else 1)
        loss = run_loss_bytes(bench.vocab_size, layers, bench.fused_loss, fp32=fp32)
        out.append(
            _Measured(
                bench,
                mfu,
                executed,
                width,
                layer_params,
                gen.key,
                math.log(bench.params) if bench.params else None,
                math.log(bench.seq_len) if bench.seq_len else None,
                math.log(bench.batch_size) if bench.batch_size else None,
                roofline(width, layer_params, acc, acc.fp32_tflops if fp32 else None, loss)
                if acc is not None and width is not None and layer_params is not None
                else None,
                fp32,
                loss,
            )
        )
    if len(_INDEX) > 64:
        _INDEX.clear()
    found = _INDEX[key] = (benchmarks, tuple(out))
    return found[1]


def job_distances(
    index: tuple[_Measured, ...],
    *,
    task: str,
    precision: str,
    params: int,
    seq_len: int,
    batch: int,
) -> list[tuple[float, _Measured]]:
    """How far each measurement is from the job, before the chip (0: the same setting). Model
    size counts most (log ratio), then sequence length, then micro-batch, task and precision;
    a measurement of unknown size counts as a factor e (2.7) away. Once per estimate."""
    lp, ls, lb = math.log(max(params, 1)), math.log(max(seq_len, 1)), math.log(max(batch, 1))
    out = []
    for m in index:
        b = m.bench
        d = abs(m.log_params - lp) if m.log_params is not None else 1.0
        if m.log_seq is not None:
            d += 0.5 * abs(m.log_seq - ls)
        if m.log_batch is not None:
            d += 0.2 * abs(m.log_batch - lb)
        if b.task != task:
            d += 0.3 if {b.task, task} <= {"pretrain", "full_finetune"} else 1.5
        if b.precision and b.precision != precision:
            d += 0.3
        out.append((d, m))
    return out


FP32_LABEL = "fp32 on the CUDA cores"
OTHER_CHIP_DISTANCE = 1.0  # another chip of the same generation: one step further away
# The documented defaults are single-node figures (flash-attention's 8 x A100 table, the
# per-generation MFUs in constants/speed.py): read as measured on one node of eight.
DEFAULT_MEASURED_GPUS = 8


def training_utilisation(
    acc: AcceleratorSpec,
    shape: ModelShape,
    *,
    flash_attention: bool,
    distances: list[tuple[float, _Measured]],
    compiled: bool = False,
    matmul_peak_tflops: float | None = None,
    score_bytes: float = 0.0,
    loss_bytes: float = 0.0,
) -> Utilisation:
    """Utilisation of the dense peak for training `shape` on `acc` (see the module docstring).
    `compiled`: the job runs under torch.compile, which the measurements did not
    (`compile_gain`). `matmul_peak_tflops`: the peak of the job's matmul dtype where it is
    not the 16-bit one (fp32): its matmuls run on the CUDA cores, so only runs measured in fp32
    set it (else c.FP32_MATMUL_EFFICIENCY of that peak, never the tensor-core runs' share), and
    its elementwise bytes cost a smaller part of the slower layer. `score_bytes`: eager
    attention's traffic over its scores per token and layer (roofline.eager_score_bytes), which
    the measurements, run with fused attention kernels, did not move; `loss_bytes` likewise
    an unfused loss's beyond their fused one (roofline.LossTraffic.beyond_fused). The long
    `source` text is written only when asked for (the recommended option's)."""
    gen = generation(acc)
    job = roofline_factor(shape, acc, matmul_peak_tflops, score_bytes + loss_bytes)
    fp32 = matmul_peak_tflops is not None
    found, nearest = _candidates(distances, acc.name, gen.key, fp32)
    if found:
        base = _from_measurements(found, nearest, job, acc)
    elif fp32:
        # fp32 matmuls run on the CUDA cores: the tensor-core measurements' matmul share does
        # not carry over (c.FP32_MATMUL_EFFICIENCY), only the layer's roofline at that peak.
        value = c.FP32_MATMUL_EFFICIENCY.value * job
        # The calibration row ran on one GPU.
        base = Utilisation(value, True, None, FP32_LABEL, (FP32_LABEL, job), measured_gpus=1)
    else:
        const, width = default_for(gen, acc, flash_attention)
        value = const.value * job / reference_roofline(width, acc)
        base = Utilisation(
            value,
            False,
            None,
            f"default for {gen.label}",
            (gen, const, width),
            measured_gpus=DEFAULT_MEASURED_GPUS,
        )
    factors = []
    if shape.num_experts > 0 and shape.params_active < shape.params_total:
        factors.append((c.MOE_UTILISATION_FACTOR.value, "mixture-of-experts"))
    if compiled:
        factors.append((compile_gain(shape, acc, matmul_peak_tflops, loss_bytes), COMPILE_WHY))
    return _with_factors(base, tuple(factors), compiled)


def _candidates(
    distances: list[tuple[float, _Measured]], name: str, key: str, fp32: bool
) -> tuple[list[tuple[float, _Measured]], float]:
    """The measurements that may set the job's utilisation, with their distances (another chip
    of the generation one step further), and the nearest distance."""
    nearest = math.inf
    found = []
    for d, m in distances:
        if m.fp32 != fp32:  # CUDA-core and tensor-core runs do not set each other's speed
            continue
        if m.bench.accelerator != name:
            if m.generation != key:
                continue
            d += OTHER_CHIP_DISTANCE
        found.append((d, m))
        if d < nearest:
            nearest = d
    return found, nearest


def _from_measurements(
    found: list[tuple[float, _Measured]], nearest: float, job: float, acc: AcceleratorSpec
) -> Utilisation:
    """The nearest measurements moved to the job: the nearest and any as near (within 0.05),
    their median, so two runs of one setting count equally."""
    tied = sorted(
        ((_transfer(m, job, acc), m) for d, m in found if d <= nearest + 0.05),
        key=_first,
    )
    value = _median([v for v, _ in tied])
    measured_rows = tuple(m for _, m in tied)
    no_recompute, no_recompute_label = _without_recomputation(
        found, measured_rows, nearest, value, job, acc
    )
    median_row = tied[len(tied) // 2][1]
    return Utilisation(
        value,
        True,
        measured_rows[0].bench.name,
        _benchmarks(measured_rows),
        (measured_rows, job),
        no_recompute=no_recompute,
        no_recompute_label=no_recompute_label,
        measured_gpus=max(median_row.bench.num_gpus, 1),
        tp_width=median_row.width if median_row.bench.strategy == "tensor_parallel" else None,
    )


def _with_factors(base: Utilisation, factors: tuple, compiled: bool) -> Utilisation:
    """`base` times the factors on top of it (mixture-of-experts, torch.compile), within
    c.BENCHMARK_MFU_BOUNDS."""
    value = base.value
    no_recompute = base.value if base.no_recompute is None else base.no_recompute
    label, no_recompute_label = base.label, base.no_recompute_label
    for factor, _ in factors:
        value *= factor
        no_recompute *= factor
    if compiled:  # the option's "assumes N %" names what raised the measurement's figure
        label += ", with torch.compile"
        no_recompute_label = no_recompute_label and no_recompute_label + ", with torch.compile"
    low, high = c.BENCHMARK_MFU_BOUNDS
    return replace(
        base,
        value=min(max(value, low), high),
        factors=factors,
        label=label,
        no_recompute=min(max(no_recompute, low), high),
        no_recompute_label=no_recompute_label,
    )


def prefill_utilisation(training: Utilisation) -> Utilisation:
    """The utilisation of a prompt pass: the matmuls of a training step's forward and backward
    passes, without recomputation, so what a training job without recomputation is credited
    with on the chip (its nearest measurement moved by the roofline, else the generation's
    default). Optimum's Llama-2-13B benchmark (A100 80GB, fp16, transformers 4.35) shows the
    passes behaving so: 44 % of the peak for one 512-token prompt and 56-57 % from 2,048
    tokens a pass, where llm-foundry's MPT-13B trains at 59.6 % MFU; the rows of a pass scale
    it (compute.micro_batch_efficiency)."""
    value = training.for_recipe("none")
    if training.no_recompute_label:
        label = training.no_recompute_label
        source = f"{training.source}; without recomputation: {label}, {value:.0%}"
        return replace(
            training,
            value=value,
            label=label,
            fixed_source=source,
            no_recompute=None,
            no_recompute_label="",
        )
    return replace(training, value=value, no_recompute=None)


def _first(pair):
    return pair[0]


def describe(detail: tuple, factors: tuple) -> str:
    """The full source of a utilisation, with every citation."""
    if detail and detail[0] == FP32_LABEL:
        const = c.FP32_MATMUL_EFFICIENCY
        text = (
            f"fp32 matmuls on the CUDA cores at {const.value:.0%} of the fp32 peak "
            f"({const.source}), moved to this model's width and this chip's memory bandwidth "
            f"by the per-layer roofline ({detail[1]:.2f})"
        )
    elif len(detail) == 2:
        rows, job = detail
        text = f"nearest catalog benchmark{'s' if len(rows) > 1 else ''}: " + "; ".join(
            f"{m.bench.name or m.bench.model} ({m.bench.model}, {m.bench.num_gpus} x "
            f"{m.bench.accelerator}, {m.mfu:.0%} MFU"
            + ("" if m.bench.mfu is not None else ", from tokens/s")
            + (", recomputing activations" if m.executed != m.mfu else "")
            + f"; {m.bench.source})"
            for m in rows
        )
        if rows[0].width is not None:
            text += (
                "; moved to this model's width and this chip's memory bandwidth by the "
                f"per-layer roofline ({job:.2f})"
            )
    else:
        gen, const, width = detail
        text = (
            f"default for {gen.label} (no benchmark in the catalog): {const.value:.0%} at "
            f"width {width:,} ({const.source}), moved to this model's width by the per-layer "
            "roofline"
        )
    for factor, why in factors:
        text += f"; x{factor:g} for {why}"
    return text


def _without_recomputation(
    found: list[tuple[float, _Measured]],
    nearest_rows: tuple[_Measured, ...],
    nearest: float,
    value: float,
    job: float,
    acc: AcceleratorSpec,
) -> tuple[float, str]:
    """(utilisation, the runs it comes from where they are not `nearest_rows` themselves, else
    "") for a recipe that does not recompute activations.

    The nearest runs that did not recompute either, where there are any. Where every nearest
    run recomputed, the same model's run without recomputation on another chip of the
    generation, transferred, when the table has one, and never above the nearest runs'
    executed-FLOP figure `value`: llm-foundry ran MPT-7B on A100 40GB with activation
    checkpointing (50.9 % MFU, 67.9 % of executed FLOPs) and on A100 80GB without (64.2 %),
    one die, so a plain 7B job on the 40GB card is credited like the 80GB run (moved by the
    roofline to the 40GB card's bandwidth). Failing both, and never below it, the nearest
    runs' MFU, a lower bound (`Utilisation.for_recipe`)."""

    def plain_median(rows: tuple[_Measured, ...]) -> float:
        return _median(sorted(_transfer(m, job, acc, recompute=False) for m in rows))

    lower = plain_median(nearest_rows)
    plain = tuple(m for m in nearest_rows if not m.bench.gradient_checkpointing)
    if plain:
        if len(plain) == len(nearest_rows):
            return lower, ""
        return max(plain_median(plain), lower), _benchmarks(plain)
    sizes = {m.log_params for m in nearest_rows if m.log_params is not None}
    reach = nearest + OTHER_CHIP_DISTANCE + 0.05  # the same setting, one chip away
    siblings = tuple(
        m
        for d, m in found
        if d <= reach
        and not m.bench.gradient_checkpointing
        and m.bench.accelerator != acc.name
        and any(m.log_params is not None and abs(m.log_params - s) < 1e-3 for s in sizes)
    )
    if not siblings:
        return lower, ""
    return min(max(plain_median(siblings), lower), value), _benchmarks(siblings)


def _median(values: list[float]) -> float:
    half = len(values) // 2
    return values[half] if len(values) % 2 else (values[half - 1] + values[half]) / 2


def _benchmarks(rows: tuple[_Measured, ...]) -> str:
    return "benchmark " + ", ".join(dict.fromkeys(m.bench.name or m.bench.model for m in rows))


def _transfer(m: _Measured, job: float, acc: AcceleratorSpec, *, recompute: bool = True) -> float:
    """The measurement's utilisation moved to the job: divided by the measured model's
    roofline factor on the chip it was measured on and multiplied by the job's on this one.
    Of executed FLOPs for a job that recomputes activations, its MFU for one that does not
    (`Utilisation.for_recipe`)."""
    base = m.executed if recompute else m.mfu
    if m.width is None or m.layer_params is None:
        return base
    own = m.own_roofline
    if own is None:  # the measured chip is not in the catalog: as if measured on this one
        peak = acc.fp32_tflops if m.fp32 else None
        own = roofline(m.width, m.layer_params, acc, peak, m.loss_bytes)
    return base * job / own
