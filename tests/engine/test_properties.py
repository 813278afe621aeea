"""Properties that hold for any workload (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.engine import estimate_shape
from advisor.engine.memory import Workload, memory_per_gpu
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import llama_like_shape
from tests.engine.catalog_fixture import catalog

CATALOG = catalog()

shapes = st.builds(
    lambda layers, heads, head_dim, kv_div, ffn_mult, vocab: llama_like_shape(
        num_layers=layers,
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        num_kv_heads=max(heads // kv_div, 1),
        intermediate_size=heads * head_dim * ffn_mult,
        vocab_size=vocab,
    ),
    layers=st.integers(1, 96),
    heads=st.sampled_from([4, 8, 16, 32, 64]),
    head_dim=st.sampled_from([64, 128]),
    kv_div=st.sampled_from([1, 4, 8]),
    ffn_mult=st.integers(2, 4),
    vocab=st.sampled_from([32000, 50257, 128256]),
)

TASK_FORMATS = {
    "inference": [("bf16", "bf16"), ("fp32", "fp32"), ("int8", "bf16"), ("int4", "bf16")],
    "full_finetune": [("bf16", "bf16"), ("fp32", "fp32"), ("fp16", "fp16")],
    "pretrain": [("bf16", "bf16")],
    "lora": [("bf16", "bf16"), ("int8", "bf16")],
    "qlora": [("int4", "bf16")],
}

workloads = st.sampled_from(
    [(task, fmt) for task, formats in TASK_FORMATS.items() for fmt in formats]
).flatmap(
    lambda task_fmt: st.builds(
        Workload,
        task=st.just(task_fmt[0]),
        precision=st.just(task_fmt[1][0]),
        weight_format=st.just(task_fmt[1][0]),
        compute_dtype=st.just(task_fmt[1][1]),
        batch_size=st.integers(1, 64),
        seq_len=st.integers(1, 32768),
        new_tokens=st.integers(0, 4096),
        gradient_checkpointing=st.booleans(),
        flash_attention=st.booleans(),
        mixed_precision=st.booleans(),
        optimizer=st.sampled_from(["adamw", "adamw_8bit", "sgd"]),
        lora_rank=st.sampled_from([4, 8, 16, 64]),
    )
)
STRATEGIES = ["single", "ddp", "zero1", "zero2", "zero3", "fsdp", "zero3_offload"]


def _with(wl: Workload, **changes) -> Workload:
    fields = {name: getattr(wl, name) for name in wl.__slots__}
    fields.update(changes)
    return Workload(**fields)


@settings(max_examples=150, deadline=None)
@given(shape=shapes, wl=workloads, extra_batch=st.integers(1, 64), extra_seq=st.integers(1, 8192))
def test_more_batch_or_sequence_never_needs_less_memory(shape, wl, extra_batch, extra_seq):
    strategy = "single" if wl.task == "inference" else "zero2"
    n = 1 if strategy == "single" else 4
    base = memory_per_gpu(shape, wl, strategy, n)["total_bytes"]
    more_batch = memory_per_gpu(
        shape, _with(wl, batch_size=wl.batch_size + extra_batch), strategy, n
    )["total_bytes"]
    more_seq = memory_per_gpu(shape, _with(wl, seq_len=wl.seq_len + extra_seq), strategy, n)[
        "total_bytes"
    ]
    assert more_batch >= base
    assert more_seq >= base


@settings(max_examples=150, deadline=None)
@given(
    shape=shapes,
    wl=workloads.filter(lambda w: w.task != "inference"),
    strategy=st.sampled_from(STRATEGIES[1:]),
    n=st.integers(2, 256),
    extra=st.integers(1, 256),
)
def test_more_gpus_with_sharding_never_more_memory_per_gpu(shape, wl, strategy, n, extra):
    fewer = memory_per_gpu(shape, wl, strategy, n)["total_bytes"]
    more = memory_per_gpu(shape, wl, strategy, n + extra)["total_bytes"]
    assert more <= fewer


@settings(max_examples=100, deadline=None)
@given(shape=shapes, wl=workloads, n=st.sampled_from([2, 4, 8]))
def test_more_gpus_with_tensor_parallelism_never_more_memory_per_gpu_for_inference(shape, wl, n):
    if wl.task != "inference":
        return
    # From 2 GPUs up: going from 1 to 2 adds NCCL buffers, which a tiny model can exceed.
    one_more = memory_per_gpu(shape, wl, "tensor_parallel", 2 * n)["total_bytes"]
    assert one_more <= memory_per_gpu(shape, wl, "tensor_parallel", n)["total_bytes"] + 1


@settings(max_examples=25, deadline=None)
@given(
    task=st.sampled_from(["full_finetune", "lora", "qlora", "pretrain", "inference"]),
    tokens=st.integers(10**3, 10**11),
    factor=st.integers(2, 100),
    layers=st.integers(2, 48),
)
def test_more_tokens_never_fewer_gpu_hours(task, tokens, factor, layers):
    shape = llama_like_shape(
        num_layers=layers,
        hidden_size=2048,
        num_attention_heads=16,
        intermediate_size=5632,
        vocab_size=32000,
    )
    precision = "int4" if task == "qlora" else "bf16"
    small = EstimateRequest(
        params=shape.params_total, task=task, precision=precision, tokens=tokens, seq_len=1024
    )
    large = small.model_copy(update={"tokens": tokens * factor})
    a = estimate_shape(small, CATALOG, shape)
    b = estimate_shape(large, CATALOG, shape)
    hours_a = {(o.system, o.accelerator, o.strategy, o.num_gpus): o.gpu_hours for o in a.options}
    for option in b.options:
        key = (option.system, option.accelerator, option.strategy, option.num_gpus)
        if key in hours_a and hours_a[key] is not None:
            assert option.gpu_hours >= hours_a[key]


@settings(max_examples=20, deadline=None)
@given(task=st.sampled_from(["full_finetune", "lora", "inference"]), batch=st.integers(1, 16))
def test_estimates_are_deterministic(task, batch):
    shape = llama_like_shape(
        num_layers=24,
        hidden_size=2048,
        num_attention_heads=16,
        intermediate_size=5632,
        vocab_size=32000,
    )
    request = EstimateRequest(params=shape.params_total, task=task, batch_size=batch, tokens=10**8)
    first = estimate_shape(request, CATALOG, shape).model_dump_json()
    assert estimate_shape(request, CATALOG, shape).model_dump_json() == first
