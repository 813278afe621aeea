"""Memory constants: fixed per-GPU overheads, training state, activations, quantisation
buffers, and the model families whose implementations keep extra tensors."""

from __future__ import annotations

from advisor.engine.constants.base import MIB, Constant

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
    "ZeRO-3 / FSDP gathered units",
    2,
    "units of full 16-bit weights at a time: transformer layers, or the embedding / LM head "
    "where that unit is larger than a layer",
    "FSDP gathers one unit and prefetches the next (forward/backward prefetch); DeepSpeed "
    "stage-3 prefetch bucket works the same way (PyTorch FSDP docs; DeepSpeed ZeRO docs). "
    "The embedding and the LM head are units too: torchtune's llama3_1/70B_full.yaml shards "
    "them on their own (custom_sharded_layers: ['tok_embeddings', 'output']), and FSDP2's root "
    "unit, which holds whatever is not wrapped, is not resharded after forward (torch "
    "fully_shard docs, reshard_after_forward). With a 128,256-token vocabulary the LM head "
    "(1.05 B parameters for Llama 3.1 70B) is larger than a layer (0.86 B). Its gradient is "
    "whole on every rank until it is reduce-scattered (FSDP FULL_SHARD: 'after backward "
    "computation, reduce-scatter gradients'), so backward starts with it alive",
    "sharded weights must be gathered whole for the unit that computes",
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
    12,
    "bytes per (token x vocabulary entry) in 16-bit training",
    "The loss runs in fp32: transformers' causal-LM heads call `logits.float()`, and under "
    "torch.autocast cross_entropy and log_softmax autocast to fp32 (PyTorch AMP docs, 'CUDA ops "
    "that can autocast to float32'). F.cross_entropy is nll_loss(log_softmax(x)); log_softmax "
    "saves its fp32 output for backward, nll_loss's backward returns a zero-filled fp32 "
    "gradient of that size, and log_softmax_backward allocates the fp32 gradient of the "
    "logits while both still exist: 3 x 4 bytes (PyTorch aten/src/ATen/native/cuda/Loss.cu "
    "nll_loss_backward_out_cuda: `grad_input.zero_()` on a tensor of the input's shape; "
    "log_softmax_backward_data writes a new one). The forward pass reaches the "
    "same 12 bytes (16-bit logits and their shifted contiguous copy, the fp32 cast and the "
    "fp32 log-softmax; transformers' own heads: fp32 logits, fp32 shifted copy, log-softmax), "
    "as the fp32 branch of memory_terms.logits_bytes already counted",
    "a 32k-256k vocabulary makes the logits one of the largest tensors; the 16-bit logits "
    "are freed before backward (the Trainer drops the model outputs after the loss)",
)
LOGITS_REMOTE_CODE_BYTES = Constant(
    "Logits and loss buffers (model's own code, no autocast)",
    6,
    "bytes per (token x vocabulary entry) in 16-bit training without autocast",
    "Qwen-7B's modeling_qwen.py (QWenLMHeadModel.forward, as published with the model; copy in "
    "alibaba/MNN transformers/llm/export/llm_models/Qwen-1_8B/modeling_qwen.py): "
    "CrossEntropyLoss on `lm_logits[..., :-1, :].contiguous()` with no `.float()`, so the "
    "loss runs in 16-bit: the same three tensors as LOGITS_TRAINING_BYTES at 2 bytes each "
    "(saved 16-bit log-softmax, its gradient, the logits' gradient in backward; logits, "
    "shifted copy and log-softmax in forward). Under torch.autocast cross_entropy runs in "
    "fp32 anyway (PyTorch AMP docs, 'CUDA ops that can autocast to float32'), so there the "
    "Transformers figure applies",
    "remote code written before transformers upcast the logits computes the loss in 16-bit "
    "when the library casts the model itself (DeepSpeed fp16/bf16)",
)
LEGACY_KV_CACHE_COPIES = Constant(
    "KV cache copies alive (tuple cache: model's own code, transformers <= 4.35)",
    2,
    "caches at the end of a generation step",
    "modeling_qwen.py QWenAttention.forward (copy in alibaba/MNN, path as above): "
    "`key = torch.cat((past_key, key), dim=1)`; `present = (key, value)`: every step builds a "
    "new tuple cache while generate() still holds the previous step's past_key_values until "
    "the forward returns. transformers' own models did the same up to v4.35 (v4.35 "
    "models/llama/modeling_llama.py LlamaAttention.forward: `key_states = torch.cat("
    "[past_key_value[0], key_states], dim=2)`; `past_key_value = (key_states, value_states)`); "
    "transformers' own models since v4.36 use DynamicCache, which "
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
FP8_BLOCK_SCALES = Constant(
    "FP8 block scales",
    4 / (128 * 128),
    "bytes per weight of each fp8 linear layer",
    "DeepSeek-V3's checkpoint and transformers' FineGrainedFP8Config (huggingface.co/docs/"
    "transformers/quantization/finegrained_fp8): one fp32 scale per 128 x 128 block of weights; "
    "per-tensor and per-channel scales (vLLM's dynamic fp8, llm-compressor) are smaller still",
    "one fp32 scale per 128 x 128 block, the largest of the usual fp8 layouts",
)
MXFP4_EXPERT_BYTES = Constant(
    "MXFP4 expert weights",
    0.5 + 1 / 32,
    "bytes per routed-expert weight",
    "OCP Microscaling Formats (MX) v1.0: blocks of 32 FP4 (E2M1) values sharing one 8-bit "
    "E8M0 scale; gpt-oss model card (arXiv:2508.10925) and its config.json "
    "(quantization_config: quant_method mxfp4, attention, router, embeddings and LM head in "
    "modules_to_not_convert): the MoE weights are stored so, about 4.25 bits per parameter, "
    "and 'gpt-oss-120b runs on a single 80GB GPU'",
    "4-bit values and a shared 1-byte scale per 32; everything else stays bf16",
)
GPTQ_GROUP_CONSTANTS = Constant(
    "GPTQ scales and zero points",
    (2 + 0.5) / 128,
    "bytes per quantised parameter (group size 128)",
    "AutoGPTQ / optimum QuantLinear buffers: qweight int32 packing eight 4-bit weights, "
    "scales fp16 [in/group, out], qzeros int32 packing eight 4-bit zero points [in/group, "
    "out/8], g_idx int32 [in] (under 0.1 % of the weights, not counted); group_size 128 is "
    "TheBloke's and optimum's default (GPTQConfig(bits=4, group_size=128))",
    "a GPTQ checkpoint with group size 128",
)
GPTQ_DEQUANT_LAYERS = Constant(
    "GPTQ kernel workspace",
    1,
    "copy of the largest quantised linear layer in fp16",
    "AutoGPTQ's exllama kernel allocates one fp16 buffer the size of the largest quantised "
    "layer (max_dq_buffer_size) plus a small temp_state (max_input_length x the widest layer "
    "x 2 bytes); its cuda-old kernel dequantises a layer to fp16 for inputs of 128 rows or "
    "more (kernel_switch_threshold) and multiplies with torch.matmul",
    "the kernels dequantise one layer at a time",
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
        # DeBERTa-v2/v3 and ELECTRA: hidden and attention dropout 0.1 in every released config
        # (ModernBERT, ESM-2 and DINOv2 ship 0.0).
        "deberta",
        "electra",
        # MPNet, Longformer, M2M-100 / NLLB-200 and Pegasus: hidden and attention dropout 0.1
        # in their released configs (Marian's attention dropout is 0.0: not listed).
        "mpnet",
        "longformer",
        "m2m_100",
        "pegasus",
        # Speech encoders: attention and hidden dropout 0.1 in the released wav2vec 2.0,
        # HuBERT, WavLM and data2vec-audio configs.
        "wav2vec2",
        "hubert",
        "wavlm",
        "data2vec-audio",
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
        # Their RMSNorms are copies of Llama's or, in Qwen3.5's and Qwen3-Next's (1 + w) form,
        # normalise `x.float()`.
        "qwen3_moe",
        "qwen3_vl",
        "qwen3_vl_moe",
        "gemma3",
        "gemma3_text",
        "gemma4",
        "gemma4_text",
        "llama4",
        "llama4_text",
        "gpt_oss",
        "qwen3_5",
        "qwen3_5_moe",
        "qwen3_5_text",
        "qwen3_5_moe_text",
        "qwen3_next",
        "olmo2",
        "olmo3",
        "smollm3",
        "seed_oss",
        "glm4_moe",
        "ernie4_5_moe",
        "mistral3",
        "granitemoehybrid",
        "nemotron_h",
        "falcon_h1",
        "lfm2",
        "exaone4",
        "apertus",
        # MambaRMSNorm and its Falcon Mamba / Mamba-2 copies.
        "mamba",
        "falcon_mamba",
        "mamba2",
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
