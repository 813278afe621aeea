"""What an inference pass reads and rebuilds beyond its matmuls: the weights a decoding step
moves (quantised formats as their libraries hold them, the experts a step's tokens reach,
the tables and towers it skips) and the 4-bit layers a library rebuilds in 16-bit before
multiplying (compute.inference_gpu_hours times them)."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine.decode_speed import DecodeSpeed
from advisor.engine.memory_terms import (
    Workload,
    base_weight_bytes,
    kv_held_bytes,
    kv_read_bytes,
    recurrent_state_bytes,
    routed_expert_params,
)
from advisor.engine.shape import ModelShape


def decode_weight_bytes(shape: ModelShape, wl: Workload) -> float:
    """Weight bytes one decoding step moves, as the library that holds them computes.

    bitsandbytes' LLM.int8() matmul (activation quantisation, outlier decomposition,
    dequantised output) generates no faster than 16-bit weights and is measured slower, so
    the 16-bit read is a lower bound on its step. Its 4-bit matmul reads the packed weights
    for one sequence but dequantises every layer to 16-bit for a batch (written, then read).
    MXFP4 experts (gpt-oss) are read packed, the rest of the model in bf16. A step looks up
    one row of the input embedding table per sequence, not the table (a tied table is read
    whole by the LM head), and runs the language model alone: a multimodal model's vision
    and audio encoders ran once on the request's images and audio in the prefill."""
    unread = _unread_bytes(shape, wl)
    if wl.weight_format == "mxfp4":
        experts = routed_expert_params(shape)
        touched = _experts_touched(shape, wl.batch_size)
        packed = experts * c.MXFP4_EXPERT_BYTES.value * touched
        return (shape.params_total - experts) * 2 + packed - unread
    share = expert_read_share(shape, wl.batch_size)
    if wl.weight_format == "int8":
        return base_weight_bytes(shape, "bf16")[0] * share - unread
    weights = base_weight_bytes(shape, wl.weight_format)[0]
    if dequantises_per_step(wl):
        weights += 2 * 2 * shape.params_linear
    return weights * share - unread


def _unread_bytes(shape: ModelShape, wl: Workload) -> float:
    """Bytes of the input embedding table and of the input encoders (ModelShape.
    params_input_towers) a decoding step does not read, 16-bit unless the whole model is fp32
    (quantisation replaces the blocks' linear layers only); an encoder-decoder's shared table
    is left counted."""
    unread = shape.params_input_towers
    if not wl.encoder_len:
        head_reads = shape.vocab_size * shape.hidden_size if shape.tied_embeddings else 0
        unread += max(shape.params_embedding - head_reads, 0)
    return unread * (4 if wl.weight_format == "fp32" else 2)


def expert_read_share(shape: ModelShape, tokens: int) -> float:
    """The share of a mixture-of-experts model's weights one decoding step of `tokens`
    sequences reads: every shared weight, and the routed experts some token of the step went
    to. MoE kernels load only the experts with tokens (vLLM's fused_moe sorts tokens by expert;
    transformers' loop skips experts with none). With top-k of E routed at random, a token
    misses a given expert with probability 1 - k/E, so a step touches 1 - (1 - k/E)^tokens of
    them: the active parameters for one sequence (Mixtral 8x7B: 12.9B of 46.7B), nearly all
    for a large batch. Dense models: 1."""
    total, active = shape.params_total, shape.params_active
    if not (shape.num_experts > shape.experts_per_token > 0 and active < total):
        return 1.0
    routed = routed_expert_params(shape)
    return (total - routed * (1 - _experts_touched(shape, tokens))) / total


def _experts_touched(shape: ModelShape, tokens: int) -> float:
    """Share of the routed experts a step of `tokens` sequences sends some token to."""
    experts, k = shape.num_experts, shape.experts_per_token
    if not (experts > k > 0):
        return 1.0
    return 1 - (1 - k / experts) ** max(tokens, 1)


# AutoGPTQ's exllama (v1) kernel, the GPTQ default of transformers up to 4.35 (optimum
# GPTQQuantizer, auto-gptq 0.5), multiplies packed 4-bit weights directly only for inputs of
# fewer rows than matmul_recons_thd; from there it rebuilds the layer in fp16 and calls cuBLAS
# (exllama q4_matmul: `x_height < tuningParams.matmul_recons_thd`; auto_gptq and optimum set
# matmul_recons_thd = 8, "the default from exllama repo").
EXLLAMA_RECONSTRUCT_ROWS = 8


# The exllama v2 GPTQ kernel (transformers 4.36 and later through AutoGPTQ or GPTQModel, and
# vLLM's own gptq kernel where Marlin does not run) multiplies packed weights for fewer rows
# than MAX_Q_GEMM_ROWS and rebuilds the layer in fp16 for cuBLAS from there.
GPTQ_RECONSTRUCT_ROWS = 50


def rebuild_rows(wl: Workload) -> int | None:
    """Rows of input from which the library rebuilds each 4-bit layer in 16-bit before its
    matmul; None where it never does (not 4-bit, or vLLM and TGI serving GPTQ with fused
    Marlin kernels).

    bitsandbytes' matmul_4bit takes its fused 4-bit kernel (gemv_4bit) only for an input of
    one token; more rows take MatMul4Bit, which dequantises the whole layer to 16-bit first
    (bitsandbytes/autograd/_functions.py), in every library that calls it (vLLM's bitsandbytes
    method too). A GPTQ checkpoint under transformers 4.35 or older runs AutoGPTQ's exllama
    kernel, which does the same from EXLLAMA_RECONSTRUCT_ROWS rows; later stacks the exllama v2
    kernel, from GPTQ_RECONSTRUCT_ROWS."""
    if wl.weight_format != "int4":
        return None
    if wl.quant_method == "bitsandbytes":
        return 2
    if wl.decode_framework in ("vllm", "tgi"):
        return None
    if wl.decode_framework == "transformers_legacy":
        return EXLLAMA_RECONSTRUCT_ROWS
    return GPTQ_RECONSTRUCT_ROWS


def dequantises_per_step(wl: Workload) -> bool:
    """Whether generating rebuilds each 4-bit layer in 16-bit every step: a step's rows are
    its sequences (rebuild_rows)."""
    rows = rebuild_rows(wl)
    return rows is not None and wl.batch_size >= rows


def prefill_rows(wl: Workload) -> int:
    """Rows of the prompt pass's matmuls: every token of the batch's prompts (an
    encoder-decoder's encoder input)."""
    return max(wl.batch_size * (wl.encoder_len or wl.seq_len), 1)


def prefill_dequant_bytes(shape: ModelShape, wl: Workload, rows: int) -> float:
    """Bytes a prompt pass moves rebuilding 4-bit layers in 16-bit before multiplying: each
    quantised weight's packed read and 16-bit write (QLORA_DEQUANT_BYTES_PER_PARAM; the
    matmul's read of the copy is inside its compute-bound time), once per layer and pass;
    nothing below the library's row threshold (rebuild_rows)."""
    needed = rebuild_rows(wl)
    if needed is None or rows < needed:
        return 0.0
    weights = shape.params_quantisable * expert_read_share(shape, rows)
    return weights * c.QLORA_DEQUANT_BYTES_PER_PARAM.value


def decode_cache_seconds(
    library: DecodeSpeed, shape: ModelShape, wl: Workload, peak_bytes_s: float, tp: int = 1
) -> float:
    """The KV cache's share of the average decoding step: the attention's reads (once per
    query head where the library repeats keys and values or parallelises over query heads,
    at the share of the bandwidth its one-query attention reaches; once per GPU that holds a
    head where `tp` GPUs share fewer key/value heads than themselves, each keeping a copy, or
    a latent cache, which every GPU keeps whole) and, where the library grows the cache by
    concatenation, reading the old cache and writing the new one."""
    average = wl.new_tokens // 2
    state = recurrent_state_bytes(shape, wl)
    attention = kv_read_bytes(shape, wl, new_tokens=average)
    if library.attention_per_query_head and not shape.kv_cache_width:
        attention *= shape.num_attention_heads / max(shape.num_kv_heads, 1)
    elif tp > 1:
        kv_heads = max(shape.num_kv_heads, 1)
        attention *= tp if shape.kv_cache_width else tp / min(tp, kv_heads)
    copied = 2 * kv_held_bytes(shape, wl, new_tokens=average) if library.grows_cache_by_copy else 0
    at_bandwidth = (copied + state) / (peak_bytes_s * library.bandwidth_fraction)
    return at_bandwidth + attention / (peak_bytes_s * library.attention_bandwidth_fraction)
