"""What an inference pass reads and rebuilds beyond its matmuls: the weights a decoding step
moves (quantised formats as their libraries hold them, the experts a step's tokens reach,
the tables and towers it skips) and the 4-bit layers a library rebuilds in 16-bit before
multiplying (compute.inference_gpu_hours times them)."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine.memory_terms import Workload, base_weight_bytes, routed_expert_params
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


def dequantises_per_step(wl: Workload) -> bool:
    """Whether generating with 4-bit weights rebuilds each layer in 16-bit per step.

    bitsandbytes' matmul_4bit takes its fused 4-bit kernel (gemv_4bit) only for an input of
    one token; a batch of several sequences takes MatMul4Bit, which dequantises the whole
    layer to 16-bit first (bitsandbytes/autograd/_functions.py). A GPTQ checkpoint under
    transformers 4.35 or older runs AutoGPTQ's exllama kernel, which does the same from
    EXLLAMA_RECONSTRUCT_ROWS sequences a step."""
    if wl.weight_format != "int4":
        return False
    if wl.quant_method == "bitsandbytes":
        return wl.batch_size > 1
    legacy_gptq = wl.quant_method == "gptq" and wl.decode_framework == "transformers_legacy"
    return legacy_gptq and wl.batch_size >= EXLLAMA_RECONSTRUCT_ROWS


def prefill_rows(wl: Workload) -> int:
    """Rows of the prompt pass's matmuls: every token of the batch's prompts (an
    encoder-decoder's encoder input)."""
    return max(wl.batch_size * (wl.encoder_len or wl.seq_len), 1)


# Rows of input from which a library's 4-bit linear layer stops multiplying the packed weights
# and rebuilds the layer in 16-bit for cuBLAS (bitsandbytes MatMul4Bit: anything but one
# token; AutoGPTQ's exllama v1 under transformers 4.35 and older: matmul_recons_thd = 8; the
# exllama v2 GPTQ kernel of later transformers, AutoGPTQ and GPTQModel: MAX_Q_GEMM_ROWS = 50).
_REBUILD_ROWS = {"bitsandbytes": 2, "gptq_legacy": EXLLAMA_RECONSTRUCT_ROWS, "gptq": 50}


def prefill_dequant_bytes(shape: ModelShape, wl: Workload, rows: int) -> float:
    """Bytes a prompt pass moves rebuilding 4-bit layers in 16-bit before multiplying: each
    quantised weight's packed read and 16-bit write (QLORA_DEQUANT_BYTES_PER_PARAM; the
    matmul's read of the copy is inside its compute-bound time), once per layer and pass.
    vLLM and TGI multiply the packed weights in fused kernels (Marlin, exllama's in-kernel
    dequantisation) and rebuild nothing; neither does any library below its row threshold."""
    if wl.weight_format != "int4" or wl.decode_framework in ("vllm", "tgi"):
        return 0.0
    method = wl.quant_method
    if method == "gptq" and wl.decode_framework == "transformers_legacy":
        method = "gptq_legacy"
    if rows < _REBUILD_ROWS.get(method, 2):
        return 0.0
    weights = shape.params_quantisable * expert_read_share(shape, rows)
    return weights * c.QLORA_DEQUANT_BYTES_PER_PARAM.value
