"""Speed constants: FLOPs per parameter, utilisation (MFU) by GPU generation, scaling over
links and the costs of recomputation and small micro-batches (advisor/engine/speed.py)."""

from __future__ import annotations

from advisor.engine.constants.base import Constant

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
    "extra FLOPs per parameter per token, of the checkpointed blocks (not the LM head)",
    "Chen et al. 2016 (arXiv:1604.06174); Korthikanti et al. 2022 section 5: full "
    "recomputation repeats the forward pass of each checkpointed transformer block; the "
    "vocabulary projection and loss after the last block run once (transformers and torchtune "
    "checkpoint per decoder layer)",
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
EAGER_SCORE_PASSES = Constant(
    "Passes over eager attention's scores per training step",
    20,
    "reads and writes of the heads x keys score tensor per token and layer, forward + backward "
    "(16 where the model has no attention dropout; half of either for a forward pass alone), "
    "at 4 bytes under autocast or in fp32, the activation dtype's otherwise",
    "counted from the eager attention of transformers (BertSelfAttention, LlamaAttention "
    "eager_attention_forward): the forward writes the QK^T scores (1), scales them (a read and "
    "a write, 2), adds the mask (2), runs softmax (2; in fp32: PyTorch's autocast op list casts "
    "softmax to float32, and Llama asks for dtype=float32) and dropout (2), and the PV matmul "
    "reads the result (1): 10; the backward writes dP (1), runs dropout's backward (2) and "
    "softmax's (3: the gradient, the saved output, the result), undoes the scale (2), and the "
    "two matmuls read dS (2): 10. A fused kernel (flash or memory-efficient attention, which "
    "the calibration benchmarks ran) keeps the scores on chip and moves none of them",
    "without a fused attention kernel a long sequence's scores cost more memory traffic than "
    "the rest of the layer's elementwise work",
)
LOSS_TRAFFIC_BYTES = Constant(
    "Memory traffic of an unfused language-model loss",
    44,
    "bytes per (token x vocabulary entry) per training step, forward + backward, for 16-bit "
    "logits and a loss in fp32 (32 where the logits are fp32 already)",
    "counted from the kernels of F.cross_entropy after `logits.float()` (transformers' "
    "ForCausalLMLoss; torch.autocast casts cross_entropy to fp32 the same way): the cast reads "
    "2 and writes 4 bytes; log_softmax (PyTorch's cunn_SoftMaxForward) reads the fp32 row for "
    "its max and its sum of exponentials and again to write the 4-byte result (12-16); "
    "nll_loss's backward writes a zero-filled fp32 gradient (4); log_softmax_backward reads "
    "that gradient and the saved output for its sum and again for the result it writes "
    "(12-20); the cast's backward reads 4 and writes 2. 36-52 bytes, depending on how many of "
    "the repeated reads a row finds in L2; the middle is used. The calibration runs "
    "(llm-foundry's MPT tables, flash-attention's GPT tables) trained with flash-attention's "
    "fused cross-entropy instead, which reads the 16-bit logits once in the forward pass and "
    "once in the backward, writing the gradient in place (FUSED_LOSS_TRAFFIC_BYTES): the "
    "roofline (ELEMENTWISE_BYTES_PER_WIDTH) already holds that much",
    "a small model with a large vocabulary spends a noticeable part of each step moving its "
    "logits through an unfused loss",
)
FUSED_LOSS_TRAFFIC_BYTES = Constant(
    "Memory traffic of a fused language-model loss",
    6,
    "bytes per (token x vocabulary entry) per training step",
    "flash-attention's Triton cross-entropy (flash_attn/ops/triton/cross_entropy.py), the "
    "default loss of llm-foundry's MPT models (ComposerMPTCausalLM loss_fn "
    "'fused_crossentropy') and of flash-attention's GPT training configs: one read of the "
    "16-bit logits for the log-sum-exp, one read and one in-place write of their gradient. "
    "Liger Kernel's fused linear cross-entropy and Apple's Cut Cross-Entropy never write the "
    "whole logits and move no more",
    "what the calibration runs' loss moved, so only the excess of an unfused loss is added",
)
COMPILE_ELEMENTWISE_SHARE = Constant(
    "Elementwise traffic left by torch.compile",
    0.55,
    "of the eager elementwise bytes per token and layer (ELEMENTWISE_BYTES_PER_WIDTH)",
    "set from one calibration pair: torchtitan's docs/performance.md, Table 1 (Llama 3.1 8B, 8 "
    "H100 96GB HBM2e at 2.4 TB/s, FSDP, local batch 2, selective activation checkpointing): "
    "5,762 tokens/s per GPU eager, 6,667 with torch.compile (1.157 x). With matmuls unchanged, "
    "the per-layer roofline gives that ratio when compiled layers move 0.554 of the eager "
    "elementwise bytes (eager 0.695 of the layer's time in matmuls at 989 TFLOP/s and "
    "2.4 TB/s). Inductor fuses the pointwise chains between matmuls (norms, rotary, "
    "activation, residual adds, casts) into single kernels, so each intermediate is written "
    "and read once where eager PyTorch writes and reads it per operator",
    "a compiled model waits less on memory between matmuls, most in small models",
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
QLORA_DEQUANT_BYTES_PER_PARAM = Constant(
    "QLoRA dequantisation traffic",
    2.5,
    "bytes per quantised weight per pass (forward, backward, recomputed forward)",
    "bitsandbytes/autograd/_functions.py MatMul4Bit: forward runs dequantize_4bit(B) and then "
    "a 16-bit linear, and backward dequantises B again for the input gradient; torchtune's "
    "NF4 linear (torchao linear_nf4) does the same. Each dequantisation reads the packed 4-bit "
    "weight (0.5 bytes) and writes its 16-bit copy (2 bytes); the matmul's own read of that "
    "copy is what a 16-bit LoRA layer reads too",
    "QLoRA trains at 16-bit speed plus a dequantisation of every base weight per pass",
)
QLORA_DEQUANT_BANDWIDTH_FRACTION = Constant(
    "QLoRA dequantisation speed",
    0.29,
    "of the GPU's memory bandwidth",
    "set from four calibration pairs of one table: LitGPT's resource tables "
    "(tutorials/resource-tables.md, A100 40GB, bitsandbytes 0.41.1, Alpaca, micro-batch 1, no "
    "checkpointing) time 1,000 iterations of LoRA with bf16 and with bnb.nf4 weights: phi-1.5 "
    "1.62 / 1.77 min, StableLM-Alpha 3B 1.24 / 1.82, Llama 2 7B 2.36 / 3.68, Llama 2 13B "
    "3.19 / 6.38. The difference per iteration against two passes of 2.5 bytes per linear "
    "weight at 1,555 GB/s gives 0.43, 0.30, 0.26 and 0.21 of the bandwidth; 0.29 is their "
    "geometric mean (least squares on log time; the model then gives 0.73 x the 13B pair's "
    "extra time and 1.48 x phi-1.5's; scripts/fit_qlora_dequant.py)",
    "the dequantisation kernel reaches about a third of the bandwidth, so QLoRA pays most where "
    "a micro-batch holds few tokens",
)
MFU_BY_GENERATION: dict[str, tuple[Constant, int]] = {}  # filled below, after the constants

HOPPER_CLASS_TFLOPS = 600  # dense 16-bit peak at or above which MFU_TRAINING_HOPPER applies
# Memory bandwidth from which an A100-class GPU counts as HBM-fed like the A100s that
# MFU_TRAINING_FLASH was measured on (A100 40GB: 1,555 GB/s); GDDR cards (L40S: 864 GB/s) wait
# longer on the elementwise work that flash attention does not remove.
FLASH_MFU_MIN_BANDWIDTH_GB_S = 1500
OLDER_CLASS_TFLOPS = 200  # below which MFU_TRAINING_OLDER applies
BENCHMARK_MFU_BOUNDS = (0.05, 0.85)  # a derived MFU outside this is a unit error, not a measurement
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
PACKED_SEQUENCES = Constant(
    "Sequences (training)",
    1,
    "",
    "torchtune README, 'Optimization flags' (Llama 3.2 3B, full fine-tuning, batch 2, "
    "sequences up to 4,096 tokens, one A100): 2,091 tokens per second with each batch padded "
    "to its longest example, 7,075 with the examples packed into full sequences (3.4 x); "
    "packing is TRL's SFTConfig(packing=True) and torchtune's dataset.packed=True",
    "padding costs compute like data: torchtune measured 3.4 x the tokens per second packed",
)
FP32_MATMUL_EFFICIENCY = Constant(
    "Matmul efficiency in fp32 (CUDA cores)",
    0.72,
    "of the fp32 peak for a layer's matmuls, before the per-layer roofline",
    "set from one calibration row: NVIDIA DeepLearningExamples' PyTorch BERT-large pre-training "
    "on one V100 SXM2 32GB (pytorch:19.07 container), FP32, batch 4 x 512 tokens: 8.36 "
    "sequences/s, 59 % of the 15.7 TFLOP/s fp32 peak, over the layer's roofline at that peak "
    "with eager attention's scores (0.82). The tensor-core measurements' matmul share (about "
    "0.45 on a V100) does not carry over: an fp32 matmul runs eight times longer on the same "
    "data, so the fixed costs around it (launches, tiles left idle, kernels the measurements "
    "overlap) weigh far less",
    "fp32 training without TF32 runs on the CUDA cores, closer to their peak than 16-bit "
    "training gets to the tensor cores'",
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
