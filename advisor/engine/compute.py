"""FLOPs, achieved throughput and time.

Achieved throughput = dense peak for the compute precision (never the sparse figure, never a
precision the accelerator lacks) x utilisation (advisor/engine/speed.py: the nearest catalog
benchmark, else a documented default per generation) x the share of each step the GPUs compute:
for training the parallel layout's time model (scale_cost.py: gradient exchange against the
compute of each optimizer step, tensor-parallel all-reduces, pipeline bubble); for inference
the scaling efficiency of the interconnect.
"""

from __future__ import annotations

import math

from advisor.engine import constants as c
from advisor.engine import tensor_parallel as tp_layout
from advisor.engine.activations import frontend_trained
from advisor.engine.decode_speed import DecodeSpeed, decode_speed
from advisor.engine.frameworks import batch_limit
from advisor.engine.inference_reads import (
    decode_cache_seconds,
    decode_weight_bytes,
    expert_read_share,
    prefill_dequant_bytes,
    prefill_rows,
)
from advisor.engine.memory_terms import (
    Workload,
    base_weight_bytes,
    copies_per_token,
    lora_targeted_linears,
    lora_trainable_params,
)
from advisor.engine.models import AcceleratorSpec, NodeTypeSpec
from advisor.engine.scale_cost import LayoutCost, StepModel, training_layout_cost
from advisor.engine.shape import CROSS_KV_ROLES, ModelShape


def peak_tflops(acc: AcceleratorSpec, dtype: str) -> float | None:
    """Dense tensor peak for `dtype`; None where the hardware does not have it."""
    if dtype == "bf16":
        return acc.bf16_tflops if acc.bf16_supported and acc.bf16_tflops else None
    if dtype == "fp16":
        return acc.fp16_tflops or acc.fp16_nontensor_tflops
    if dtype == "fp32":
        # PyTorch leaves TF32 matmuls off by default (torch.backends.cuda.matmul.allow_tf32).
        return acc.fp32_tflops
    return None


def compute_dtype_for(acc: AcceleratorSpec, wl: Workload) -> str | None:
    """The dtype the matmuls run in on `acc`; None when the request's precision is missing."""
    if wl.compute_dtype == "bf16" and not (acc.bf16_supported and acc.bf16_tflops):
        # Quantised weights compute in whatever 16-bit type the GPU has, and so does a job
        # whose precision was not said; an explicit bf16 request cannot silently become fp16
        # (different numerics, loss scaling).
        quantised = wl.precision in ("fp8", "int8", "int4")
        if quantised or wl.fp16_where_no_bf16:
            return "fp16" if peak_tflops(acc, "fp16") else None
        return None
    return wl.compute_dtype if peak_tflops(acc, wl.compute_dtype) else None


def fp16_note(acc: AcceleratorSpec, training: bool) -> str:
    """Why an option computes in fp16 when the precision was not said, and what to watch."""
    how = (
        "trains in fp16 mixed precision with loss scaling (Trainer fp16=True)"
        if training
        else "runs in fp16 (vLLM --dtype half, torch_dtype=torch.float16)"
    )
    return (
        f"No bf16 on {acc.display_name}: {how}, in the same memory. A model pre-trained in "
        "bf16 can overflow fp16's range (a NaN loss or empty outputs); where it does, choose a "
        "GPU with bf16."
    )


def scaling_efficiency(node: NodeTypeSpec, n: int, strategy: str) -> float:
    if n <= 1:
        return 1.0
    eff = c.SCALING_EFFICIENCY.get(node.intra_node_interconnect, 0.88)
    nodes = math.ceil(n / node.gpus_per_node)
    if nodes > 1:
        link = node.inter_node_interconnect
        inter = 0.5 if link == "none" else c.SCALING_EFFICIENCY.get(link, 0.63)
        if inter < 1.0:
            # Links slower than the reference lose a little more with every doubling of nodes.
            inter *= max(0.5, 1 - 0.01 * math.log2(nodes))
        eff *= inter
    if strategy in ("zero3", "fsdp", "zero3_offload"):
        eff *= c.ZERO3_COMM_FACTOR.value
    # CPU offload's own time (host link, CPU optimizer step) is added per step: offload.py.
    return eff


def micro_batch_efficiency(tokens: int) -> float:
    """Fraction of the large-GEMM utilisation a pass over `tokens` rows reaches (a training
    micro-batch, a batch of prompts): matmuls with few rows leave SMs idle."""
    full = c.MICROBATCH_SATURATION_TOKENS.value
    if tokens >= full:
        return 1.0
    return (tokens / full) ** 0.25


def training_step_model(shape: ModelShape, wl: Workload) -> StepModel:
    """The layout model for a training estimate (scale_cost.py): what its exchange moves.
    PyTorch DDP all-reduces the gradients of the fp32 master weights under autocast (4 bytes);
    DeepSpeed ZeRO and FSDP reduce in the 16-bit compute type (2 bytes). A tensor-parallel
    layout is Megatron's, whose bf16 training accumulates and all-reduces gradients in fp32
    (megatron/training/arguments.py sets accumulate_allreduce_grads_in_fp32 with --bf16;
    memory.py counts the same main_grad buffer). Adapter training exchanges the adapters'
    gradients only, but ZeRO-3 / FSDP gather every stored weight, the frozen (perhaps
    quantised) base included."""
    fp32 = wl.compute_dtype == "fp32"
    trainable = lora_trainable_params(shape, wl) if wl.adapters else shape.params_total
    main_grad = fp32 or (wl.state_mode == "mixed" and not wl.adapters)
    gathered = base_weight_bytes(shape, wl.weight_format)[0] if wl.adapters else None
    if wl.step_forward_passes:
        # The reference's forward passes (and KTO's KL pass) gather the sharded weights once
        # each per micro-batch, beside the policy's two gathers (the same base weights where
        # adapters are switched off).
        gathered = (gathered or trainable * 2.0) * (1 + wl.step_forward_passes / 2)
    return StepModel(
        params=float(trainable),
        grad_bytes=4.0 if fp32 else 2.0,
        ddp_grad_bytes=4.0 if fp32 or wl.mixed_precision else 2.0,
        split_grad_bytes=4.0 if main_grad else 2.0,
        weight_bytes=gathered,
        seq_len=wl.sample_tokens,  # tokens per sample: the exchange and the TP collectives
        layers=max(shape.total_layers, 1),
        hidden=max(shape.hidden_size, 1),
    )


def training_layout(
    shape: ModelShape,
    wl: Workload,
    node: NodeTypeSpec,
    acc: AcceleratorSpec,
    n: int,
    strategy: str,
    *,
    global_batch: int,
    micro: int,
    flops_per_token: float,
    achieved_tflops: float,
    recompute: bool,
    tp: int | None = None,
    pp: int = 1,
) -> LayoutCost:
    """The data-parallel side of a training option's layout per optimizer step, with its
    parts (scale_cost.py; `training_step_model(...).efficiency` is the same figure, faster).
    Tensor-parallel collectives are tensor_parallel.py's, priced with the option's recipe;
    `pp` pipeline stages add their bubble."""
    model = training_step_model(shape, wl)
    strategy_key = strategy
    strategy, split_tp, _ = tp_layout.split(strategy, n)
    tp = tp or split_tp  # an option's recipe states its degree; a layout key names it
    if tp > 1:
        strategy = "zero1"  # the data-parallel ranks of a TP layout (parallel_options.py)
    return training_layout_cost(
        params=model.params,
        grad_bytes_per_param=model.grad_bytes_for(strategy, tp),
        weight_bytes=model.weight_bytes,
        strategy=strategy,
        n=n,
        node=node,
        accelerator=acc.name,
        global_batch=global_batch,
        micro=micro,
        seq_len=wl.sample_tokens,
        flops_per_token=flops_per_token,
        achieved_flops=achieved_tflops * 1e12,
        layers=model.layers,
        hidden=model.hidden,
        recompute=recompute,
        tp=tp,
        pp=max(pp, tp_layout.stages(strategy_key)),
        tp_collectives=False,
    )


def training_flops_per_token(shape: ModelShape, wl: Workload) -> float:
    """FLOPs per token of the request's sequences: matmuls (per parameter and token) and
    attention scores (12 x layers x attention width x tokens attended, forward and backward).
    An encoder-decoder's stacks see different lengths (encoder_decoder_flop_params): its
    FLOPs per sequence are spread over the tokens the job counts per sequence (the input's;
    Whisper's, whose input is audio, the transcript's)."""
    per_param = c.LORA_FLOPS_PER_PARAM.value if wl.adapters else c.TRAIN_FLOPS_PER_PARAM.value
    if wl.encoder_len:
        enc, dec = wl.encoder_len, wl.decoder_len
        encoder, decoder, cross_kv = encoder_decoder_flop_params(shape)
        matmul = (encoder + cross_kv) * enc + decoder * dec
        # A masked autoencoder's decoder (ViT-MAE) has no cross-attention, and its encoder
        # its own width (ModelShape.encoder_view).
        crossed = enc if shape.cross_attends else 0
        attention = 12 * (
            shape.encoder_view().attn_dim * shape.encoder_layers * enc * enc
            + shape.attn_dim * shape.num_layers * dec * (dec + crossed)
        )
        per_sequence = per_param * matmul + attention
        if wl.gradient_checkpointing:
            recomputed = matmul - shape.head_flop_params * dec
            per_sequence += c.RECOMPUTE_FLOPS_PER_PARAM.value * recomputed + attention / 3
        # The job's tokens are the input's, or the target's where the input is not text.
        return per_sequence / max(wl.seq_len if wl.reads_text else dec, 1)
    n = shape.flop_params
    front = frontend_training_flops(shape, wl)
    # A hybrid's linear-attention layers score no token pairs; their recurrence (a few
    # head-dim-squared products per token and head) is under 1 % of the matmuls: not counted.
    # Sliding-window and chunked layers read at most their window.
    attention = 12 * shape.attention_reads(wl.seq_len)
    flops = per_param * n + attention + front
    if wl.gradient_checkpointing:
        flops += c.RECOMPUTE_FLOPS_PER_PARAM.value * recomputed_params(shape) + attention / 3
    if wl.forward_only_passes:
        # DPO's and KTO's reference model, KTO's KL pass: forward passes over as many tokens
        # (preference.py), the base alone where adapters are switched off for the reference.
        forward_front = shape.frontend.forward_flops if shape.frontend else 0
        flops += wl.forward_only_passes * (2 * n + attention / 3 + forward_front)
    return flops


def frontend_training_flops(shape: ModelShape, wl: Workload) -> float:
    """FLOPs per token of a convolutional stem (a speech encoder's feature encoder,
    architecture.model.Frontend) in a training step: forward, backward's two (input and
    weight gradients) and a recomputed forward where its layers are checkpointed, when the
    job trains it; its forward alone when the job freezes it (fine-tuning, adapters)."""
    front = shape.frontend
    if not front:
        return 0.0
    if not frontend_trained(shape, wl):
        return float(front.forward_flops)
    return front.forward_flops * (4 if wl.gradient_checkpointing else 3)


def inference_flops_per_token(shape: ModelShape) -> float:
    """Matmul FLOPs per token of a forward pass: 2 per matmul parameter and the stem's."""
    return 2 * shape.flop_params + (shape.frontend.forward_flops if shape.frontend else 0)


def recomputed_params(shape: ModelShape) -> int:
    """The matmul parameters activation checkpointing runs forward again: the transformer
    blocks it wraps, not the LM head and loss after them. Every stack checkpoints per block:
    transformers' `gradient_checkpointing_enable` wraps each decoder layer's call, torchtune's
    `enable_activation_checkpointing` each TransformerSelfAttentionLayer, Megatron's full
    recomputation each transformer layer; the output projection and the loss run once. On
    Llama 3.2 3B (a 394M-parameter head of 3.2B) recomputation adds 29 % of the step's FLOPs,
    not 33 %."""
    return max(shape.flop_params - shape.head_flop_params, 1)


def encoder_decoder_flop_params(shape: ModelShape) -> tuple[int, int, int]:
    """An encoder-decoder's matmul parameters by the tokens they process: (the encoder's,
    which read the input; the decoder's, which read the target or generated tokens, with the
    LM head; the cross-attention key and value projections, which read the encoder's output,
    so run over the input's tokens although they sit in the decoder)."""
    cross_kv = shape.num_layers * sum(
        lin.in_features * lin.out_features * lin.count_per_layer
        for lin in shape.linears
        if lin.role in CROSS_KV_ROLES
    )
    encoder = shape.params_encoder
    decoder = max(shape.flop_params - encoder - cross_kv, 1)
    return encoder, decoder, cross_kv


def training_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    tokens: float,
    peak: float,
    util: float,
    eff: float,
    flops_per_token: float | None = None,
) -> float:
    per_token = flops_per_token or training_flops_per_token(shape, wl)
    seconds = tokens * per_token / (peak * 1e12 * util * eff)
    return seconds / 3600


def lora_adapter_bytes_per_token(shape: ModelShape, wl: Workload, recompute: bool) -> float:
    """Memory traffic of the LoRA adapters' own kernels for one token through every block.

    PEFT's Linear.forward (peft/tuners/lora/layer.py) runs `result = base_layer(x)` and then
    `result + lora_B(lora_A(dropout(x))) * scaling` as separate kernels in eager PyTorch, for
    each adapted layer (in -> out features): forward, lora_A reads x (in), lora_B writes its
    output (out), the scaling reads and writes it (2 out), the sum reads two and writes one
    (3 out): in + 6 out elements; backward, the scaling's gradient (2 out), lora_B's input
    and weight gradients read the output gradient (2 out), lora_A writes the input gradient
    (in) and reads x for its weight gradient (in), and the input gradient is added to the
    base layer's (3 in): 5 in + 4 out. Dropout adds reading x and writing the dropped-out
    copy (2 in) with its 1-byte mask forward, and reading the gradient and mask and writing
    the result (2 in) backward. A recomputed forward repeats the forward. The adapters'
    FLOPs (rank r << features) are negligible; their time is this traffic at the GPU's
    bandwidth; under torch.compile their pointwise kernels fuse like a layer's
    (c.COMPILE_ELEMENTWISE_SHARE of the traffic). A token passes through the experts it is
    routed to only."""
    if not wl.adapters:
        return 0.0
    linears = lora_targeted_linears(shape, wl)
    layers = shape.total_layers
    if not linears:  # no named linears: q, k, v, o and a standard MLP
        h, f = shape.hidden_size, shape.intermediate_size
        pairs = [(h, h, 4 * layers)] + [(h, f, (2 if shape.gated_mlp else 1) * layers)]
        pairs.append((f, h, layers))
    else:
        pairs = [
            (
                lin.in_features,
                lin.out_features,
                copies_per_token(shape, lin) * shape.blocks_with(lin),
            )
            for lin in linears
        ]
    dropout = bool(wl.lora_dropout)
    e = wl.act_bytes
    total = 0.0
    for n_in, n_out, count in pairs:
        forward = (n_in + 6 * n_out) * e + dropout * (2 * n_in * e + n_in)
        backward = (5 * n_in + 4 * n_out) * e + dropout * (2 * n_in * e + n_in)
        total += count * (forward * (2 if recompute else 1) + backward)
    return total * (c.COMPILE_ELEMENTWISE_SHARE.value if wl.compiled else 1.0)


def lora_adapter_gpu_hours(
    shape: ModelShape, wl: Workload, bandwidth_gb_s: float, tokens: float, recompute: bool
) -> float:
    """GPU hours the adapters' traffic adds to `tokens` (lora_adapter_bytes_per_token). Each
    token's traffic happens on the GPU that holds it, whatever the layout."""
    per_token = lora_adapter_bytes_per_token(shape, wl, recompute)
    return tokens * per_token / (bandwidth_gb_s * 1e9) / 3600


def qlora_dequant_seconds(
    shape: ModelShape, wl: Workload, bandwidth_gb_s: float, micro_tokens: int, recompute: bool
) -> float:
    """Seconds one micro-batch of `micro_tokens` spends dequantising a QLoRA model's 4-bit base
    weights on one GPU: every quantised linear weight once in the forward pass, again for the
    input gradient in backward, and once more in a recomputed forward (constants/speed.py,
    QLORA_DEQUANT_*). 0 for anything but 4-bit adapter training. Each rank dequantises what
    it holds for each of its micro-batches, so the GPU hours of a job are this x the job's
    micro-batches whatever the layout (data, tensor or pipeline parallel)."""
    if not (wl.adapters and wl.weight_format == "int4"):
        return 0.0
    passes = (3 if recompute else 2) + wl.forward_only_passes  # the reference's too
    # A mixture-of-experts layer dequantises only the experts some token was routed to.
    weights = shape.params_linear * expert_read_share(shape, micro_tokens)
    rate = bandwidth_gb_s * 1e9 * c.QLORA_DEQUANT_BANDWIDTH_FRACTION.value
    return passes * weights * c.QLORA_DEQUANT_BYTES_PER_PARAM.value / rate


def qlora_dequant_gpu_hours(
    shape: ModelShape, wl: Workload, bandwidth_gb_s: float, tokens: float, micro: int,
    recompute: bool,
) -> float:  # fmt: skip
    """GPU hours of `tokens` spent on QLoRA dequantisation (qlora_dequant_seconds)."""
    micro_tokens = max(micro * wl.sample_tokens, 1)
    per_micro = qlora_dequant_seconds(shape, wl, bandwidth_gb_s, micro_tokens, recompute)
    return tokens / micro_tokens * per_micro / 3600


def inference_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    acc: AcceleratorSpec,
    tokens: float,
    peak: float,
    util: float,
    n: int,
    eff: float,
    collectives: float = 0.0,
    tp: int = 1,
) -> float:
    """Prefill is compute-bound; each decoding step reads all weights and the KV cache.
    `collectives`: seconds per batch the `n` GPUs wait in tensor-parallel all-reduces; `tp`:
    the tensor-parallel degree, whose GPUs each read the key/value heads they hold."""
    requests = max(tokens / wl.tokens_per_request, 1)
    batches = math.ceil(requests / wl.batch_size)
    rate = peak * 1e12 * util * n * eff
    n_flop = shape.flop_params
    # Weights each generated token reads: an encoder-decoder's decoder only, its encoder
    # having read the input once in the prefill.
    decoder_share = 1.0
    if wl.encoder_len:
        encoder, decoder, cross_kv = encoder_decoder_flop_params(shape)
        enc = wl.encoder_len
        width = shape.encoder_view().attn_dim
        attended = 4 * shape.encoder_layers * width * enc
        prefill_flops = wl.batch_size * enc * (2 * (encoder + cross_kv) + attended)
        n_flop = decoder
        # Of the weights a step could read (decode_weight_bytes leaves the input encoders out).
        read = shape.params_total - shape.params_input_towers
        decoder_share = 1 - shape.params_encoder / max(read, 1)
        if not shape.cross_attends:
            # A masked autoencoder's decoder (ViT-MAE) generates nothing: it reads all the
            # patches in the same forward pass.
            dec = wl.decoder_len
            reads = shape.num_layers * shape.attn_dim * dec
            prefill_flops += wl.batch_size * dec * (2 * decoder + 4 * reads)
    else:
        stem = shape.frontend.forward_flops if shape.frontend else 0
        reads = 4 * shape.attention_reads(wl.seq_len)
        prefill_flops = wl.batch_size * wl.seq_len * (2 * n_flop + stem + reads)
    library = decode_speed(wl.decode_framework)
    # Per library (decode_speed.py): the share of the bandwidth bound its kernels reach and the
    # host time per layer and step that no CUDA graph hides.
    bandwidth = acc.memory_bandwidth_gb_s * 1e9 * library.bandwidth_fraction * n * eff
    # The prompts' matmuls have as many rows as the pass has tokens: few leave SMs idle, as
    # a small training micro-batch does. A 4-bit layer is rebuilt in 16-bit before them.
    rows = prefill_rows(wl)
    prefill = prefill_flops / (rate * micro_batch_efficiency(rows))
    prefill += prefill_dequant_bytes(shape, wl, rows) / bandwidth
    # Eager PyTorch launches each layer's kernels from the host: a small forward pass (an
    # encoder reading one short sequence) waits for the host, not the GPU. Launches run ahead
    # of the GPU, so the two overlap: the slower sets the time.
    prefill = max(prefill, library.host_per_layer_s * shape.total_layers)
    decode = 0.0
    if wl.new_tokens:
        weights = decode_weight_bytes(shape, wl) * decoder_share
        peak_bytes = acc.memory_bandwidth_gb_s * 1e9 * n * eff
        cache = decode_cache_seconds(library, shape, wl, peak_bytes, tp)
        step_memory = weights / bandwidth + cache
        # The language model alone multiplies in a step (decode_weight_bytes).
        step_flop = max(n_flop - shape.params_input_towers, 1)
        step_compute = 2 * step_flop * wl.batch_size / rate
        decode = decode_steps(wl) * decode_step_seconds(
            library, shape.num_layers, max(step_memory, step_compute)
        )
    return batches * (prefill + decode + collectives) * n / 3600


def decode_step_seconds(library: DecodeSpeed, layers: int, gpu_seconds: float) -> float:
    """One decoding step: the GPU's reads and matmuls plus each layer's fixed kernel cost,
    overlapped by the host's launches where the library runs eagerly (they run ahead of the
    GPU, so the slower of the two sets the pace), then the host's work between two forward
    passes (sampling, stopping checks, scheduling), during which the GPU waits."""
    gpu = gpu_seconds + library.kernel_per_layer_s * layers
    return max(gpu, library.host_per_layer_s * layers) + library.host_per_step_s


def decode_steps(wl: Workload) -> int:
    """Token-by-token forward passes a request of `new_tokens` takes after its prefill. A
    decoder-only model's prompt pass already yields the first new token (generate() and vLLM
    sample it from the prompt's last logits), so one fewer; an encoder-decoder's encoder pass
    yields none, and its decoder runs once per new token."""
    if wl.encoder_len:
        return wl.new_tokens
    return max(wl.new_tokens - 1, 0)


def inference_requests(wl: Workload, tokens: float) -> int:
    """How many sequences an inference job of `tokens` (prompts and generated) runs."""
    return max(math.ceil(tokens / wl.tokens_per_request), 1)


def kv_filled_batch(
    limit: int, reserved_bytes: float, need_bytes: float, kv_bytes: float, requests: int
) -> int:
    """Sequences a continuously batching library (vLLM) generates at once on one GPU: what its
    reservation holds beyond everything but the KV cache, in whole sequences of the cache one
    sequence needs (`kv_bytes`, at full length: the scheduler admits a sequence only while
    blocks remain, and pre-empts when they run out), at most `limit` (max_num_seqs) and the
    job's own requests, at least one."""
    room = reserved_bytes - (need_bytes - kv_bytes)
    fits = int(room // kv_bytes) if kv_bytes > 0 else limit
    return max(1, min(limit, requests, fits))


def filled_batch(
    framework, acc: AcceleratorSpec, capacity: float, memory, wl: Workload, tokens: float | None
) -> int:
    """`kv_filled_batch` for one option: its GPU's capacity and library limit, its memory per
    GPU (a MemoryBreakdown sized for `wl.batch_size` sequences)."""
    limit = batch_limit(framework, acc) or 1
    return kv_filled_batch(
        limit,
        capacity * (framework.preallocates or 1.0),
        memory.total_bytes,
        memory.kv_cache / max(wl.batch_size, 1),
        inference_requests(wl, tokens) if tokens else limit,
    )
