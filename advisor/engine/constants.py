"""Every constant the engine uses, with its source and why it has the value it has.

The engine models the physics (what lives in GPU memory, how many FLOPs a step takes) and takes
its constants from published measurements or the libraries' own defaults. None of them is fitted
to a single data point. `assumption(...)` turns a constant into the `Assumption` a result shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.models import Assumption, trusted


@dataclass(frozen=True, slots=True)
class Constant:
    name: str
    value: float
    unit: str
    source: str
    why: str

    def assumption(self, value_text: str | None = None) -> Assumption:
        text = value_text if value_text is not None else f"{self.value:g} {self.unit}".strip()
        return trusted(
            Assumption, {"name": self.name, "value": f"{text} ({self.why})", "source": self.source}
        )


GIB = 1024**3
MIB = 1024**2

# --- Bytes per element ------------------------------------------------------------------------

BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}

# --- Fixed per-GPU overheads -----------------------------------------------------------------

CUDA_CONTEXT = Constant(
    "CUDA context and framework overhead",
    600 * MIB,
    "bytes per GPU",
    "PyTorch maintainers: the CUDA context takes ~300-400 MB with lazy module loading "
    "(CUDA >= 11.7) and >1 GB without (github.com/pytorch/pytorch/issues/107667, #109888); "
    "cuBLAS/cuDNN workspaces come on top",
    "context (~400 MB) plus cuBLAS workspace and kernels loaded on first use; nvidia-smi counts it",
)
CUDA_CONTEXT_LEGACY = Constant(
    "CUDA context, Volta/Turing-era stack",
    1343 * MIB,
    "bytes per GPU",
    "Hugging Face Transformers docs, 'Model training anatomy' "
    "(huggingface.co/docs/transformers/model_memory_anatomy): pynvml shows 1343 MB after "
    "`torch.ones((1, 1)).to('cuda')` on a V100 16GB ('the kernels "
    "alone take up 1.3GB'); pytorch/pytorch PR #86509: 667 MB eager vs 287 MB lazy module "
    "loading on the same test (docs/accuracy/calibration-notes.md section 1). Set from the "
    "calibration points hf-bert-large-*",
    "pre-Ampere NVIDIA GPUs (no bf16: V100, T4) are assumed to run the CUDA 11 stacks of "
    "their era, which load every kernel at start-up",
)
NCCL_BUFFERS = Constant(
    "NCCL communicator buffers",
    400 * MIB,
    "bytes per GPU when more than one GPU communicates",
    "NCCL keeps NCCL_BUFFSIZE (4 MiB default) per channel and peer; with the default 2-32 "
    "channels this is a few hundred MB per rank (NCCL environment-variable documentation; "
    "github.com/verl-project/verl/issues/5979)",
    "multi-GPU jobs hold communication buffers the model never sees",
)
ALLOCATOR_FRAGMENTATION = Constant(
    "Caching-allocator reserve",
    0.10,
    "of the tensors allocated and freed every step",
    "PyTorch CUDA semantics, 'Memory management': memory_reserved() exceeds "
    "memory_allocated() by the cached, fragmented blocks nvidia-smi still shows "
    "(pytorch.org/docs/stable/notes/cuda.html); 5-15% in practice for training loops",
    "nvidia-smi shows reserved memory, not allocated memory",
)
ALLOCATOR_STATIC_ROUNDING = Constant(
    "Caching-allocator rounding of long-lived tensors",
    0.01,
    "of weights and optimizer states",
    "PyTorch CUDACachingAllocator rounds large allocations up to 2 MiB blocks "
    "(c10/cuda/CUDACachingAllocator.cpp, kRoundLarge); a few hundred weight tensors lose up "
    "to 2 MiB each",
    "weights are allocated once and do not fragment",
)

# --- Training state ----------------------------------------------------------------------------

ZERO_MIXED_ADAM = Constant(
    "Mixed-precision Adam state",
    16,
    "bytes per trainable parameter",
    "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) section 3.1: 2 (16-bit weights) + "
    "2 (16-bit gradients) + 12 (fp32 master weights, momentum, variance)",
    "fp32 master weights and Adam moments beside the 16-bit copy the model computes with",
)
ADAM_8BIT_STATE = Constant(
    "8-bit Adam state",
    2,
    "bytes per trainable parameter (two 8-bit moments)",
    "Dettmers et al. 2022, 8-bit Optimizers via Block-wise Quantization (arXiv:2110.02861); "
    "bitsandbytes keeps one fp32 absmax per 2048-value block",
    "moments quantised block-wise to 8 bits",
)
AMP_CAST_CACHE = Constant(
    "Autocast weight cache",
    2,
    "bytes per parameter (16-bit copies of fp32 weights)",
    "PyTorch autocast caches the 16-bit cast of each leaf weight inside an autocast region "
    "(torch.autocast docs, cache_enabled); HF 'Model training anatomy' counts mixed-precision "
    "AdamW training at 18 bytes per parameter",
    "fp32 parameters and gradients plus the cast copies under PyTorch AMP",
)
DDP_BUCKET_COPY = Constant(
    "DDP gradient buckets",
    1,
    "extra copy of the gradients",
    "PyTorch DistributedDataParallel docs, gradient_as_bucket_view (default False): "
    "'gradients are copied into the bucket ... setting it True saves memory the size of the "
    "total gradients'",
    "DDP's default keeps gradients twice: in the parameters and in the all-reduce buckets",
)
ZERO3_LIVE_LAYERS = Constant(
    "ZeRO-3 / FSDP gathered layers",
    2,
    "transformer layers of full 16-bit weights at a time",
    "FSDP gathers one unit and prefetches the next (forward/backward prefetch); DeepSpeed "
    "stage-3 prefetch bucket works the same way (PyTorch FSDP docs; DeepSpeed ZeRO docs)",
    "sharded weights must be gathered whole for the layer that computes",
)

# --- Activations -------------------------------------------------------------------------------

KORTHIKANTI = Constant(
    "Activations per transformer layer",
    34,
    "x s*b*h bytes + 5*a*s^2*b bytes (16-bit, no parallelism)",
    "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models "
    "(arXiv:2205.05198) eq. 1: s*b*h*(34 + 5*a*s/h); generalised here tensor by tensor to "
    "gated MLPs, grouped-query attention, no dropout, flash attention and mixture-of-experts",
    "every tensor autograd saves for the backward pass, counted per layer",
)
LOGITS_TRAINING_BYTES = Constant(
    "Logits and loss buffers",
    10,
    "bytes per (token x vocabulary entry) in 16-bit training",
    "Hugging Face transformers causal-LM heads upcast the logits to fp32 before the "
    "cross-entropy (2 bytes 16-bit logits + 4 fp32 copy + 4 fp32 log-softmax kept for backward)",
    "a 32k-256k vocabulary makes the logits one of the largest tensors",
)
LOGITS_REMOTE_CODE_BYTES = Constant(
    "Logits and loss buffers (model's own code, no autocast)",
    4,
    "bytes per (token x vocabulary entry) in 16-bit training without autocast",
    "Qwen-7B's modeling_qwen.py (QWenLMHeadModel.forward, as published with the model; copy in "
    "alibaba/MNN transformers/llm/export/llm_models/Qwen-1_8B/modeling_qwen.py): "
    "CrossEntropyLoss on `lm_logits[..., :-1, :].contiguous()` with no `.float()`: 2 bytes of "
    "16-bit logits + 2 of 16-bit log-softmax kept for backward, counted as "
    "LOGITS_TRAINING_BYTES counts (the transient shifted copy left out). Under torch.autocast "
    "cross_entropy runs in fp32 anyway (PyTorch AMP docs, 'CUDA ops that can autocast to "
    "float32'), so there the Transformers figure applies",
    "remote code written before transformers upcast the logits computes the loss in 16-bit "
    "when the library casts the model itself (DeepSpeed fp16/bf16)",
)
LEGACY_KV_CACHE_COPIES = Constant(
    "KV cache copies alive (model's own code)",
    2,
    "caches at the end of a generation step",
    "modeling_qwen.py QWenAttention.forward (copy in alibaba/MNN, path as above): "
    "`key = torch.cat((past_key, key), dim=1)`; `present = (key, value)`: every step builds a "
    "new tuple cache while generate() still holds the previous step's past_key_values until "
    "the forward returns. transformers' own models since v4.36 use DynamicCache, which "
    "replaces each layer's tensors as it goes (transformers cache_utils.DynamicCache.update), "
    "so only about one cache is alive",
    "a tuple cache rebuilt by torch.cat keeps the old and the new cache at the peak",
)

LORA_DROPOUT = Constant(
    "LoRA dropout",
    1,
    "byte of mask + one 16-bit copy of the input, per element, for every adapted linear layer",
    "PEFT LoraLayer: `lora_B(lora_A(dropout(x)))` with one nn.Dropout per adapted module "
    "(peft/tuners/lora/layer.py); LitGPT finetune/lora.py lora_dropout=0.05; QLoRA paper "
    "(arXiv:2305.14314) appendix: dropout 0.1 up to 13B, 0.05 above. PyTorch's native_dropout "
    "keeps a bool mask and lora_A keeps the dropped-out input for its weight gradient",
    "assumed on unless lora_dropout is 0: the published recipes use it, and omitting it "
    "under-estimates",
)

# --- Quantisation -------------------------------------------------------------------------------

NF4_CONSTANTS = Constant(
    "NF4 quantisation constants",
    4 / 64,
    "bytes per quantised parameter without double quantisation",
    "bitsandbytes NF4 keeps one fp32 absmax per block of 64 weights (0.5 bits/param); "
    "transformers' BitsAndBytesConfig leaves bnb_4bit_use_double_quant False by default",
    "one fp32 absmax per 64 weights",
)
NF4_DOUBLE_QUANT = Constant(
    "NF4 double-quantised constants",
    0.127 / 8,
    "bytes per quantised parameter with double quantisation",
    "Dettmers et al. 2023, QLoRA (arXiv:2305.14314) section 3: double quantisation brings the "
    "constants from 0.5 to 0.127 bits per parameter (8-bit absmax per 64 weights, fp32 per 256 "
    "blocks); QLoRA's recipe turns it on",
    "the QLoRA recipe quantises the constants too",
)
INT8_ROW_SCALE = Constant(
    "LLM.int8 scales",
    4,
    "bytes per output row of each quantised linear layer",
    "Dettmers et al. 2022, LLM.int8() (arXiv:2208.07339): vector-wise quantisation keeps one "
    "fp32 scale per row",
    "row-wise absmax scales beside the int8 weights",
)
DEQUANT_WORKSPACE_LAYERS = Constant(
    "Dequantisation workspace",
    2,
    "copies of the largest quantised linear layer in 16-bit (the LM head where it is 4-bit)",
    "bitsandbytes 0.41 MatMul4Bit: `linear(A, dequantize_4bit(B, state).to(A.dtype).t())` for "
    "any input of more than one token (forward, and again in backward for QLoRA). "
    "dequantize_4bit allocates the whole layer in the dtype it was quantised from, and "
    "Lightning's BitsandbytesPrecision quantises from fp16 (`_Linear4bit._quantize_weight`: "
    "`.to(dtype=torch.half)`), so with bf16 compute the cast is a second copy. Lightning also "
    "quantises the LM head; transformers keeps it in 16-bit (`get_keys_to_not_convert`)",
    "the 16-bit copies of the layer being computed live beside the packed weights",
)

# --- Compute -----------------------------------------------------------------------------------

TRAIN_FLOPS_PER_PARAM = Constant(
    "Training FLOPs",
    6,
    "FLOPs per parameter per token (+ 12*L*h*s attention)",
    "Kaplan et al. 2020 (arXiv:2001.08361) C = 6ND; attention term from Chowdhery et al. "
    "2022, PaLM (arXiv:2204.02311) appendix B: 6N + 12*L*H*Q*T per token",
    "forward 2N, backward 4N",
)
LORA_FLOPS_PER_PARAM = Constant(
    "LoRA FLOPs",
    4,
    "FLOPs per frozen parameter per token",
    "Hu et al. 2021, LoRA (arXiv:2106.09685): frozen weights need no weight gradients, so the "
    "backward pass costs about one forward (2N) instead of two (4N)",
    "forward 2N + input gradients 2N",
)
RECOMPUTE_FLOPS_PER_PARAM = Constant(
    "Gradient checkpointing recomputation",
    2,
    "extra FLOPs per parameter per token",
    "Chen et al. 2016 (arXiv:1604.06174); Korthikanti et al. 2022 section 5: full "
    "recomputation repeats the forward pass",
    "checkpointed layers run their forward twice",
)
MFU_TRAINING = Constant(
    "Hardware FLOPs utilisation, training (A100-class GPUs)",
    0.50,
    "of the dense 16-bit peak, applied to the FLOPs executed (recomputation included)",
    "Narayanan et al. 2021, Megatron-LM (arXiv:2104.04473): 52% of A100 peak at 1T parameters on "
    "3,072 GPUs, counting recomputation; Korthikanti et al. 2022 (arXiv:2205.05198, abstract): "
    "530B on 2,240 A100s at 54.2% MFU, 42.1% MFU with full recomputation (56% counting the "
    "recomputed forward). For GPUs with a 200-600 TFLOP/s dense 16-bit peak "
    "(A100, L40S, MI250X) where the catalog has no benchmark and MFU_TRAINING_FLASH does not "
    "apply",
    "documented default for Ampere-class GPUs when the catalog has no measurement",
)
MFU_TRAINING_FLASH = Constant(
    "Hardware FLOPs utilisation, training with FlashAttention (A100-class NVIDIA GPUs)",
    0.60,
    "of the dense 16-bit peak, applied to the FLOPs executed (recomputation included)",
    "Dao-AILab/flash-attention, training/README.md ('Training speed'): GPT3-1.3B and -2.7B on "
    "one node of 8 x A100 80GB SXM4 with NVLink, FlashAttention and fused MLP, LayerNorm and "
    "cross-entropy kernels, no activation checkpointing: up to 189 TFLOP/s per GPU, 60.6% "
    "model FLOPs utilisation (169k and 85k tokens/s, 61% with this engine's FLOP count). For "
    "NVIDIA GPUs with a 200-600 TFLOP/s dense 16-bit peak and HBM (1.5 TB/s or more: A100) when "
    "the request trains with flash attention and the catalog has no benchmark",
    "flash attention removes the memory-bound passes over the sequence x sequence scores that "
    "the A100 default (Megatron-LM 2021, before FlashAttention) still paid for",
)
MFU_TRAINING_HOPPER = Constant(
    "Hardware FLOPs utilisation, training (H100-class GPUs)",
    0.40,
    "of the dense 16-bit peak, applied to the FLOPs executed (recomputation included)",
    "Dubey et al. 2024, The Llama 3 Herd of Models (arXiv:2407.21783) table 4: 38-43% BF16 MFU "
    "for Llama 3 405B on 8,192-16,384 H100s. For GPUs with a dense 16-bit peak of 600 TFLOP/s "
    "or more (H100, H200, GH200, MI300X, Max 1550) where the catalog has no benchmark",
    "the higher the peak, the harder it is to reach: memory bandwidth, communication and "
    "non-matmul kernels did not speed up by the same factor",
)
MFU_TRAINING_OLDER = Constant(
    "Hardware FLOPs utilisation, training (V100-class GPUs)",
    0.25,
    "of the dense 16-bit peak, applied to the FLOPs executed (recomputation included)",
    "Shoeybi et al. 2019, Megatron-LM (arXiv:1909.08053), abstract: 1.2B on one V100 sustains "
    "39 TFLOP/s, 30% of peak; 8.3B on 512 V100s sustains 15.1 PFLOP/s at 76% scaling "
    "efficiency, 29.5 TFLOP/s or 24% per GPU. For GPUs below 200 TFLOP/s dense 16-bit (V100, "
    "T4, MI100, MI210) where the catalog has no benchmark",
    "the at-scale figure, as for the other GPU classes",
)
# --- Utilisation by generation (advisor/engine/speed.py) -------------------------------------

ELEMENTWISE_BYTES_PER_WIDTH = Constant(
    "Elementwise traffic per layer",
    365,
    "bytes per token and layer per unit of hidden width (training, forward + backward)",
    "set from two calibration benchmarks of one table: llm-foundry's A100 80GB throughput table "
    "(github.com/mosaicml/llm-foundry, scripts/train/benchmarking/README.md, 'A100 80GB', "
    "sequence 2048, 8 GPUs, no checkpointing) gives MPT-125M 44.79 % MFU and MPT-7B 64.23 %; "
    "a per-layer roofline (matmuls at the peak, E x width bytes per token at the memory "
    "bandwidth) gives that ratio with E = 365. Korthikanti et al. 2022 (arXiv:2205.05198) "
    "count 34 x width bytes of activations written per token and layer in the forward pass; "
    "backward reads and writes them again and small matmuls run below peak, which E absorbs",
    "small models spend more of each layer waiting on memory: 45 % MFU at 125M against 64 % "
    "at 7B on the same A100s",
)
MFU_TRAINING_FLASH_WIDTH = 2048  # GPT3-1.3B, the flash-attention README's model
MFU_TRAINING_GDDR = Constant(
    "Hardware FLOPs utilisation, training (GDDR workstation GPUs: L40S, A5000, A2000)",
    0.40,
    "of the dense 16-bit peak at width 4,096",
    "no published training MFU for these cards was found, so this is a conservative default: "
    "the A100 default (MFU_TRAINING, 50 %) less a fifth, because a GDDR6 card has about half "
    "an A100's memory bandwidth per FLOP (L40S 864 GB/s for 362 TFLOP/s; A100 1,555 GB/s for "
    "312) and its elementwise work takes correspondingly longer",
    "a default, not a measurement: replace it with a benchmark when one is run",
)
MFU_TRAINING_CDNA2 = Constant(
    "Hardware FLOPs utilisation, training (AMD CDNA2: MI210, MI250X)",
    0.35,
    "of the dense 16-bit peak at width 4,096",
    "MosaicML, 'Training LLMs with AMD MI250 GPUs and MosaicML' (2023-06-30, "
    "databricks.com/blog/amd-mi250): per-GPU throughput of MPT-1B to 13B on MI250 within 80 % "
    "of A100-40GB (ROCm 5.4, PyTorch 2.0, llm-foundry unchanged); llm-foundry's A100-40GB "
    "table gives 50-52 % MFU for those models, so an MI250 (362 TFLOP/s dense bf16) reaches "
    "0.8 x 0.51 x 312 / 362 = 35 %",
    "a transfer through a published A100 comparison, not a direct MFU measurement",
)
MFU_TRAINING_CDNA1 = Constant(
    "Hardware FLOPs utilisation, training (AMD CDNA1: MI100)",
    0.25,
    "of the dense 16-bit peak at width 4,096",
    "no measurement: the V100-era default (MFU_TRAINING_OLDER, Megatron-LM 2019) for a "
    "first-generation matrix-core GPU whose bf16 rate is half its fp16 rate",
    "a default, not a measurement",
)
MFU_TRAINING_XE_HPC = Constant(
    "Hardware FLOPs utilisation, training (Intel Xe-HPC: Max 1550)",
    0.22,
    "of the dense 16-bit peak at width 4,096",
    "the Turing's HPC Days 2024 talk ('Single Accelerator Comparison - Observations' 1-2): H100 "
    "is the fastest GPU 'theoretically and actually' and the gap between H100, A100 and Max "
    "1550 is 'not as large as expected', i.e. a Max 1550 trains about as fast as an A100 "
    "although its dense bf16 peak is 2.7 x higher; ALCF measured 273 TFLOP/s bf16 GEMM on "
    "Aurora's Max 1550 (docs.alcf.anl.gov/aurora/node-performance-overview, quoted in "
    "glennklockwood.com/garden/processors/pvc), a third of the 839 peak. 22 % of 839 is "
    "185 TFLOP/s, an A100's with flash attention",
    "no published training MFU; set so the seed's ordering holds",
)
MOE_UTILISATION_FACTOR = Constant(
    "Mixture-of-experts utilisation",
    0.74,
    "x the dense utilisation",
    "DeepSeek-AI 2024, DeepSeek-V2 (arXiv:2405.04434) section 3.2: 172.8K GPU hours per "
    "trillion tokens for DeepSeek-V2 against 300.6K for the dense DeepSeek 67B on the same "
    "H800 cluster. Counted the engine's way (6 x active parameters + the full sequence x "
    "sequence attention term, 4,096-token sequences): V2 has 21B active parameters and 60 "
    "layers of 128 heads with 192-dim queries/keys and 128-dim values, 1.87e11 FLOPs per "
    "token; DeepSeek 67B (DeepSeek LLM paper, table 2: 95 layers, width 8,192) 4.40e11. "
    "FLOPs per token over GPU hours per trillion tokens: 1.08e6 against 1.46e6, a ratio of "
    "0.74. (Issue 14 quoted 0.79; "
    "6N alone would give 0.55, so the factor holds only with attention counted, as the "
    "engine counts it)",
    "routing, all-to-all exchange and small expert matmuls",
)
ADAPTER_UTILISATION_FACTOR = Constant(
    "LoRA/QLoRA utilisation",
    0.60,
    "x the full-training utilisation on the same GPU",
    "engine 1.x's 30 % LoRA/QLoRA MFU (MFU_LORA) against its 50 % full-training figure on the "
    "same A100 class: adapter matmuls are small and QLoRA dequantises every weight each step",
    "small adapter matmuls and dequantisation lower utilisation",
)
MFU_BY_GENERATION: dict[str, tuple[Constant, int]] = {}  # filled below, after the constants

HOPPER_CLASS_TFLOPS = 600  # dense 16-bit peak at or above which MFU_TRAINING_HOPPER applies
# Memory bandwidth from which an A100-class GPU counts as HBM-fed like the A100s that
# MFU_TRAINING_FLASH was measured on (A100 40GB: 1,555 GB/s); GDDR cards (L40S: 864 GB/s) wait
# longer on the elementwise work that flash attention does not remove.
FLASH_MFU_MIN_BANDWIDTH_GB_S = 1500
OLDER_CLASS_TFLOPS = 200  # below which MFU_TRAINING_OLDER applies
BENCHMARK_MFU_BOUNDS = (0.05, 0.85)  # a derived MFU outside this is a unit error, not a measurement
MFU_LORA = Constant(
    "Model FLOPs utilisation, LoRA/QLoRA",
    0.30,
    "of the dense peak",
    "LoRA adds many small matmuls and QLoRA dequantises every weight per step; QLoRA paper "
    "(arXiv:2305.14314) and Unsloth/HF PEFT benchmarks show 25-35% MFU",
    "small adapter matmuls and dequantisation lower utilisation",
)
MFU_PREFILL = Constant(
    "Model FLOPs utilisation, prefill",
    0.50,
    "of the dense peak",
    "prompt processing is large matmuls like training's forward pass; vLLM/TGI prefill "
    "benchmarks reach 40-60% of dense peak",
    "prefill is compute-bound",
)
SCALING_EFFICIENCY = {
    # Fraction of linear speed-up kept when data-parallel traffic crosses the link, relative to
    # NVLink within a node and InfiniBand between nodes: the default utilisations above were
    # measured at scale on such clusters, so those links cost nothing on top of them.
    "nvlink": 1.0,
    "infiniband": 1.0,
    "xelink": 0.98,
    "infinity_fabric": 0.98,
    "omnipath": 0.97,
    "pcie": 0.88,
    "none": 1.0,
    "ethernet": 0.63,
}
SCALING_SOURCE = (
    "The default utilisations are at-scale figures (Megatron-LM on 3,072 A100s, Llama 3 on "
    "16,384 H100s, both NVLink + InfiniBand), so they already include those links' "
    "communication. Slower links lose more: ring all-reduce moves 2(N-1)/N x the gradients "
    "per step (Sergeev & Del Balso 2018, arXiv:1802.05799), which PCIe-only nodes and 1-25 GbE "
    "cannot hide (the Turing's HPC Days 2024 talk: its PCIe nodes scale sub-linearly from 1 "
    "to 16 GPUs)"
)
ZERO3_COMM_FACTOR = Constant(
    "ZeRO-3 / FSDP communication",
    0.95,
    "x the data-parallel efficiency",
    "ZeRO paper section 7: stage 3 moves 1.5x the data of DDP (all-gather forward and "
    "backward, reduce-scatter)",
    "gathering weights every step costs extra traffic",
)

SELECTIVE_RECOMPUTE_ATTENTION = Constant(
    "Selective recomputation",
    1 / 3,
    "of the attention-score FLOPs repeated (the forward pass of the attention core)",
    "Korthikanti et al. 2022 (arXiv:2205.05198) section 4.2 and table 4: recomputing only "
    "the attention core removes the 5*a*s^2*b term at 1.6-2.7 % extra FLOPs for GPT-3 and MT-NLG",
    "selective recomputation repeats the cheap, memory-hungry part of each layer",
)
MICROBATCH_SATURATION_TOKENS = Constant(
    "Tokens per micro-batch for full matmul efficiency",
    2048,
    "tokens (micro-batch x sequence length); below it utilisation falls as (tokens/2048)^0.25",
    "NVIDIA Deep Learning Performance guide, 'Matrix Multiplication Background' (tile and wave "
    "quantisation: a GEMM with few rows leaves SMs idle; 108 SMs on an A100 need thousands of "
    "rows of 128-wide tiles to fill); Narayanan et al. 2021 (arXiv:2104.04473) figure 10: "
    "per-GPU throughput grows with the micro-batch size until the GEMMs are large. The "
    "exponent is an engineering judgement that only orders recipes: it makes accumulation "
    "over micro-batch 1 at 128 tokens cost about twice micro-batch 16",
    "small micro-batches leave the GPU under-used, so accumulation is not free",
)

# --- Planning ----------------------------------------------------------------------------------

CONTINGENCY = Constant(
    "Contingency",
    0.20,
    "of the compute GPU hours",
    "Allocation practice: debugging runs, evaluation and restarts after pre-emption or node "
    "failure; the Turing's trial access (HPC Days 2024 talk) exists for exactly this scoping work",
    "real projects need more than one clean run",
)
MEMORY_MARGIN = Constant(
    "Memory uncertainty",
    0.10,
    "relative, either way",
    "spread of the validation errors: docs/accuracy.md (issue 3 section 7) measures a median "
    "absolute error of 2.2% on 43 published peak-memory points, all within +-10% "
    "(worst -9%)",
    "an estimate within this margin of a GPU's capacity may not fit",
)
GPU_HOURS_MARGIN = Constant(
    "GPU-hours uncertainty",
    0.25,
    "relative, either way",
    "spread of the validation errors: docs/accuracy.md compares 20 published GPU-hour totals "
    "and benchmarks like for like: median absolute error 10%, 10th-90th percentile of the "
    "signed errors -11% to +25%; utilisation varies 40-75% across "
    "training stacks",
    "throughput depends on software and data pipeline",
)
TARGET_WALL_HOURS = Constant(
    "Target wall time",
    168,
    "hours (one week) unless the researcher sets max_wall_hours",
    "allocation practice: a job plan longer than a week of wall time is widened to more GPUs "
    "where the partition allows, since queues, failures and allocation periods make "
    "month-long single jobs impractical",
    "more GPUs rather than an impractically long run",
)
DEFAULT_LORA_RANK = 16
DEFAULT_INFERENCE_NEW_TOKENS = 256
MAX_GPUS_SEARCHED = 512

# Families whose Hugging Face implementations train with dropout on by default (their configs
# set attention/hidden dropout 0.1) and so keep dropout masks for backward.
DROPOUT_FAMILIES = frozenset(
    {
        "gpt2",
        "gpt_bigcode",
        "bert",
        "roberta",
        "distilbert",
        "t5",
        "bart",
        "opt",
        "vit",
        "whisper",
        "bloom",
    }
)
# Families whose RMSNorm upcasts its input to fp32 before normalising (transformers'
# LlamaRMSNorm and its copies: `hidden_states.to(torch.float32)`; LitGPT's RMSNorm: `x.float()`),
# so autograd keeps a 4-byte copy of every norm input even in pure 16-bit training.
RMSNORM_FP32_FAMILIES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "gemma",
        "gemma2",
        "phi3",
        "deepseek_v2",
        "deepseek_v3",
    }
)
# Families whose eager attention runs softmax in fp32 and keeps that output for backward.
FP32_SOFTMAX_FAMILIES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "gemma",
        "gemma2",
        "phi",
        "phi3",
        "gpt_bigcode",  # GPTBigCodeConfig.attention_softmax_in_fp32 defaults to True
    }
)


MFU_BY_GENERATION.update(
    {
        # generation -> (default, the model width it was measured at)
        "nvidia-hopper": (MFU_TRAINING_HOPPER, 16384),  # Llama 3 405B
        "nvidia-ampere-dc": (MFU_TRAINING, 25600),  # Megatron-LM 1T
        "nvidia-ada": (MFU_TRAINING_GDDR, 4096),
        "nvidia-ampere-ws": (MFU_TRAINING_GDDR, 4096),
        "nvidia-volta": (MFU_TRAINING_OLDER, 3072),  # Megatron-LM 2019 8.3B
        "nvidia-turing": (MFU_TRAINING_OLDER, 3072),
        "amd-cdna3": (MFU_TRAINING_CDNA2, 4096),
        "amd-cdna2": (MFU_TRAINING_CDNA2, 4096),
        "amd-cdna1": (MFU_TRAINING_CDNA1, 4096),
        "intel-xe-hpc": (MFU_TRAINING_XE_HPC, 4096),
    }
)
