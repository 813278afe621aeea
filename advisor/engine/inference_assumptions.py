"""The assumptions an inference result lists beyond memory: generation length, prefill
utilisation, decoding speed and what quantised weights do to it, or an encoder's single forward
pass (result_assumptions.assumptions lists them in this order)."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine.compute import micro_batch_efficiency
from advisor.engine.decode_speed import DecodeSpeed, decode_speed
from advisor.engine.inference_reads import (
    EXLLAMA_RECONSTRUCT_ROWS,
    GPTQ_RECONSTRUCT_ROWS,
    dequantises_per_step,
    expert_read_share,
    prefill_rows,
    rebuild_rows,
)
from advisor.engine.memory import Workload
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES
from advisor.engine.models import Assumption, EstimateRequest, built
from advisor.engine.shape import ModelShape
from advisor.engine.words import plural


def inference_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, best=None
) -> list[Assumption]:
    """Generation length, prefill utilisation and decoding speed."""
    if shape.family in ENCODER_ONLY_FAMILIES:
        return _encoder_inference_assumptions(shape, wl, best)
    out = []
    out.append(
        built(
            Assumption,
            name="Generation",
            value=(
                f"prompt {wl.seq_len:,}"
                if wl.reads_text
                else f"one clip ({wl.encoder_len:,} encoder positions)"
            )
            + f" + {wl.new_tokens:,} generated tokens per request"
            + (" (default)" if request.new_tokens is None else "")
            + (
                f"; KV cache in {wl.compute_dtype} with {shape.num_kv_heads} KV heads"
                if shape.softmax_layers
                else "; no KV cache: a fixed recurrent state per sequence"
            ),
            source="KV cache = 2 x layers x KV heads x head dim x tokens x batch x bytes"
            if shape.softmax_layers
            else "state = layers x (conv window + SSM state) x batch, whatever the length",
        )
    )
    out.append(_prompt_assumption(wl, best))
    library = decode_speed(wl.decode_framework)
    out.append(
        built(
            Assumption,
            name="Decoding speed",
            value=decoding_speed_words(library),
            source=library.source,
        )
    )
    share = expert_read_share(shape, wl.batch_size)
    if share < 1:
        out.append(
            built(
                Assumption,
                name="Experts read per step",
                value=f"{share:.0%} of the weights at {plural(wl.batch_size, 'sequence')} per "
                f"step: the shared layers and the experts the step's tokens are routed to "
                f"({shape.experts_per_token} of {shape.num_experts} per token)",
                source="MoE kernels load only experts that received tokens (vLLM fused_moe "
                "groups tokens by expert; transformers' sparse MoE blocks skip experts with "
                "none); with top-k routing spread evenly a step of b tokens touches 1 - (1 - "
                "k/E)^b of the experts",
            )
        )
    out.extend(_weight_speed_assumptions(wl))
    if wl.prefill_chunk_tokens:
        out.append(
            built(
                Assumption,
                name="Prefill chunks",
                value=f"at most {wl.prefill_chunk_tokens:,} tokens per forward pass: "
                "activations for one chunk, not a whole long prompt",
                source="vLLM V1 always runs chunked prefill; max_num_batched_tokens defaults "
                "to 16,384 for the offline LLM class on GPUs of 70 GiB or more other than the "
                "A100 and lower elsewhere (vllm/engine/arg_utils.py, "
                "EngineArgs.get_batch_defaults), so the largest default bounds the need",
            )
        )
    return out


def _weight_speed_assumptions(wl: Workload) -> list[Assumption]:
    """What quantised weights do to the inference timing (fp8, LLM.int8(), 4-bit dequant)."""
    out = []
    if wl.weight_format == "fp8":
        out.append(
            built(
                Assumption,
                name="fp8 weights and speed",
                value="decoding reads 1 byte per weight of the linear layers; prefill is timed "
                "at the 16-bit peak (weight-only W8A16), a lower bound on Ada and Hopper, whose "
                "fp8 tensor cores vLLM runs W8A8",
                source="vLLM docs, 'FP8 W8A8' (docs.vllm.ai, as of v0.32): fp8 halves the "
                "weights' memory and gives 'up to a 1.6x improvement in throughput'; Ampere "
                "and Turing run the weights through the FP8 Marlin kernel (W8A16)",
            )
        )
    if wl.weight_format == "int8":
        out.append(
            built(
                Assumption,
                name="8-bit weights and speed",
                value="decoding is timed as with 16-bit weights, a lower bound: bitsandbytes' "
                "LLM.int8() saves memory, not time (expect generation to be slower still)",
                source="Dettmers et al. 2022, LLM.int8() (arXiv:2208.07339): the int8 matmul "
                "with mixed-precision decomposition runs below the 16-bit speed; users report "
                "generate() 2.5-4x slower than bf16/fp16 (FLAN-UL2 on an A100, about 3x: "
                "huggingface.co/google/flan-ul2/discussions/27; a 13B model on an A100, 4-5 "
                "against 15-20 tokens/s: huggingface.co/IlyaGusev/saiga2_13b_lora/"
                "discussions/3)",
            )
        )
    if dequantises_per_step(wl):
        gptq = wl.quant_method == "gptq"
        legacy = wl.decode_framework == "transformers_legacy"
        fused = (
            f"fewer than {rebuild_rows(wl)} sequences a step take the packed 4-bit kernel"
            if gptq
            else "one sequence at a time takes the fused 4-bit kernel"
        )
        out.append(
            built(
                Assumption,
                name="4-bit weights and speed",
                value=f"with {wl.batch_size} sequences per step each 4-bit layer is "
                f"{'rebuilt' if gptq else 'dequantised'} in 16-bit before its matmul: a step "
                f"reads 0.5 + 2 + 2 bytes per weight, more than 16-bit weights would ({fused})",
                source=(
                    "AutoGPTQ's exllama kernel, the GPTQ default of transformers 4.35 and "
                    "older (exllama q4_matmul: the packed kernel while x_height < "
                    f"matmul_recons_thd, set to {EXLLAMA_RECONSTRUCT_ROWS} by auto_gptq and "
                    "optimum; above it q4_matmul_recons_cuda and cuBLAS)"
                    if gptq and legacy
                    else "the exllama v2 GPTQ kernel of later transformers (AutoGPTQ, "
                    f"GPTQModel): the packed kernel below MAX_Q_GEMM_ROWS = "
                    f"{GPTQ_RECONSTRUCT_ROWS} rows, above it the layer rebuilt in fp16 and cuBLAS"
                    if gptq
                    else "bitsandbytes/autograd/_functions.py matmul_4bit: gemv_4bit only when "
                    "the input is a single token (A.numel() == A.shape[-1]), otherwise "
                    "MatMul4Bit: linear(A, dequantize_4bit(B).to(A.dtype).t())"
                ),
            )
        )
    return out


def _prompt_assumption(wl: Workload, best) -> Assumption:
    """How fast the prompt pass multiplies: the recommended option's utilisation (training's
    without recomputation, speed.prefill_utilisation) at the rows of a pass."""
    rows = prefill_rows(wl)
    share = micro_batch_efficiency(rows)
    util = best.utilisation if best is not None else None
    fewer = (
        f", x{share:.2f} for {rows:,} tokens a pass (under "
        f"{c.MICROBATCH_SATURATION_TOKENS.value:,}, matmuls with few rows leave the GPU idle)"
        if share < 1
        else ""
    )
    if util is None:
        value = "the utilisation a training job without recomputation reaches on each GPU" + fewer
        source = "advisor/engine/speed.py prefill_utilisation; docs/engine.md, 'Compute'"
    else:
        value = (
            f"{util.value:.0%} of the dense peak on the recommended GPU, what training reaches "
            "there without recomputation" + fewer
        )
        source = util.source
    return built(Assumption, name="Prompt processing (prefill)", value=value, source=source)


def decoding_speed_words(library: DecodeSpeed) -> str:
    """What a decoding step costs under the library, in one sentence."""
    reads = f"{library.bandwidth_fraction:.0%} of the memory bandwidth for the weights"
    if library.host_per_layer_s:
        host = (
            f"at least {library.host_per_layer_s * 1e3:.2f} ms of kernel launches per layer "
            "(no CUDA graphs), overlapping the GPU's work"
        )
    else:
        host = f"{library.kernel_per_layer_s * 1e3:.3f} ms per layer for the replayed kernels"
    cache = (
        "the KV cache grown by copying it each step and read once per query head"
        if library.grows_cache_by_copy and library.attention_per_query_head
        else "the KV cache read once per query head"
        if library.attention_per_query_head
        else "the KV cache read once per KV head"
    )
    return (
        f"{reads}, {cache} at {library.attention_bandwidth_fraction:.0%}; {host}; "
        f"{library.host_per_step_s * 1e3:.2f} ms of host time between steps"
    )


def _encoder_inference_assumptions(shape: ModelShape, wl: Workload, best) -> list[Assumption]:
    """An encoder-only model's inference: one forward pass per sequence, nothing generated."""
    library = decode_speed(wl.decode_framework)
    host = library.host_per_layer_s * shape.num_layers
    return [
        built(
            Assumption,
            name="Forward pass",
            value=f"one forward pass per sequence of {wl.seq_len:,} tokens: an encoder-only "
            f"model ({shape.family}) embeds or classifies, it generates no tokens and keeps no "
            "KV cache",
            source="encoder-only architectures (BERT, RoBERTa, DistilBERT, ViT) have no decoder: "
            "Transformers runs them with a single model(**inputs) call, not generate()",
        ),
        _prompt_assumption(wl, best),
        built(
            Assumption,
            name="Host time per forward pass",
            value=(
                f"{host * 1e3:.1f} ms ({library.host_per_layer_s * 1e3:.2f} ms per layer, "
                "no CUDA graphs): a batch takes at least this long however small it is"
                if host
                else "none: the library replays CUDA graphs"
            ),
            source=library.source,
        ),
    ]
