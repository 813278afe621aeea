"""What the researcher's library allocates: one profile per training or inference stack.

Each profile states the defaults that move memory or time the way the library does, with the
source of each default. The engine applies a default only where the request leaves the knob
open; a value the researcher gives always wins. "Not sure" (or no answer) maps to the most
common stack: Hugging Face Transformers' Trainer (with PEFT for LoRA/QLoRA) for training and
Transformers `generate` for inference, and the result says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from advisor.engine import constants as c
from advisor.engine.device_memory import device_bytes
from advisor.engine.models import AcceleratorSpec

MIB = 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    key: str
    name: str
    kind: str  # "training" | "inference"
    # Activation checkpointing the library turns on by default, per task ("none" | "full").
    checkpointing: Mapping[str, str]
    # Bytes per (token x vocabulary entry) the loss keeps in 16-bit training; None: the
    # Transformers default (16-bit logits, fp32 upcast, fp32 log-softmax).
    logits_bytes: float | None = None
    # The loss runs over chunks of this many tokens, each recomputed in backward, so one
    # chunk's logits exist at a time (TRL's chunked_nll); None: not chunked by tokens.
    loss_chunk_tokens: int | None = None
    # How the library's users turn on Liger Kernel's fused linear cross-entropy, which never
    # builds the logits ("" where the library has no such switch or its loss is already fused
    # or chunked): the hint a result gives when the fp32 logits weigh most.
    fused_loss_switch: str = ""
    # True: weights, gradients and optimizer states all 16-bit (no fp32 master copy).
    pure_bf16: bool = False
    # True: each parameter is updated as soon as its gradient exists, so gradients never
    # coexist for the whole model (needs gradient accumulation 1).
    optimizer_in_backward: bool = False
    # True: checkpointed layer inputs go to CPU memory, only the layers in flight stay on GPU.
    offloads_checkpoints: bool = False
    # Activation recomputation granularities the library offers.
    checkpoint_levels: tuple[str, ...]
    # Fraction of the GPU an inference server reserves up front (what nvidia-smi shows).
    preallocates: float | None = None
    # Most tokens an inference server puts through one forward pass when it splits long
    # prompts (chunked prefill); None: a prompt's whole prefill runs at once.
    prefill_chunk_tokens: int | None = None
    # Extra bytes per GPU the library holds beyond the CUDA context (server workspaces,
    # communication buckets allocated once).
    overhead_bytes: float = 0
    # True: gradients live in a buffer allocated once and kept between steps, so they exist
    # during the forward pass too; False: zero_grad(set_to_none=True) (PyTorch >= 2.0)
    # frees them after each optimizer step (memory.py, the phases of a step).
    keeps_gradients: bool = False
    # True: the library clips the gradients' global norm every optimizer step by default: one
    # read of every gradient for the norm, one read and write to scale them
    # (torch.nn.utils.clip_grad_norm_ multiplies even when the factor is 1, to avoid a device
    # sync; Megatron's clip_grad_norm_fp32 does the same). Transformers' TrainingArguments
    # max_grad_norm=1.0 (and so TRL, Unsloth, Axolotl), Megatron's --clip-grad 1.0; Lightning
    # (gradient_clip_val=None) and torchtune (clip_grad_norm: None) do not clip unless asked.
    clips_gradients: bool = False
    # True: 16-bit mixed precision is torch.autocast (fp32 weights, fp32 softmax, norms and
    # loss); False: the library casts the model to fp16/bf16 and keeps fp32 master weights in
    # its optimizer, with no autocast (DeepSpeed's fp16/bf16 modes, Megatron's Float16Module).
    autocast: bool = True
    launcher: str  # how the sbatch script starts it
    # The library's own command-line tool starts torchrun and takes the recipe as its config
    # overrides (tune run, llamafactory-cli), on Intel GPUs as elsewhere: an MPI launch of a
    # script would not read them.
    own_cli: bool = False
    # Trains with tensor parallelism within a node (tensor_parallel.py); the recipe search
    # gives tp > 1 only to these.
    tensor_parallel_training: bool = False
    # Tensor parallelism is another code base for this library's users (DeepSpeed with the
    # HF Trainer -> Megatron-DeepSpeed): offered only where no ZeRO stage fits on the GPUs.
    tensor_parallel_last_resort: bool = False
    # Steps bitsandbytes' 8-bit and paged optimizers (the recipe search may choose them).
    eight_bit_optimizers: bool = True
    # Trains with pipeline stages as well (1F1B; tensor_parallel.py's bubble): Megatron-LM and
    # Megatron-DeepSpeed.
    pipeline_parallel_training: bool = False
    # Data-parallel strategies the library offers; None: every one (DeepSpeed ZeRO, FSDP).
    # Megatron-LM shards only the optimizer (--use-distributed-optimizer), never weights.
    data_parallel: tuple[str, ...] | None = None
    # Whether the library trains in fp16 (with loss scaling) where a GPU has no bf16: False for
    # torchtune, whose recipes raise "fp16 precision is not supported in this recipe" (no
    # gradient scaling, recipes/full_finetune_single_device.py).
    fp16: bool = True
    # What the library does instead of the strategies it lacks (for the option's reason).
    shards_instead: str = ""
    source: str
    # Whether a 4-bit base keeps the LM head 4-bit too: False for transformers' bitsandbytes
    # integration (get_keys_to_not_convert keeps the output layer 16-bit) and the stacks built
    # on it; True for Lightning's BitsandbytesPrecision (LitGPT), which replaces every
    # nn.Linear; None where it depends on the user's code (the engine takes the larger layout).
    quantises_head: bool | None = None
    # True: generate() rebuilds a tuple KV cache with torch.cat every step, so the previous
    # step's cache is still alive when the new one is complete (transformers before 4.36).
    tuple_kv_cache: bool = False
    # Offline generation that schedules the job's prompts itself (vLLM's LLM class):
    # (sequences at once at most, the same on large GPUs) as `max_num_seqs` defaults; as many
    # run together as the KV cache holds (compute.kv_filled_batch). None: one request at a
    # time unless the request gives a batch.
    max_num_seqs: tuple[int, int] | None = None
    # Inference over several GPUs splits the layers between them (device_map="auto", Accelerate's
    # big-model inference), and a forward pass visits the GPUs one after another: k GPUs take
    # as long as one holding every layer. False: they run together (tensor parallel).
    sequential_multi_gpu: bool = False
    # How a script turns off the checkpointing the library applies by default (`checkpointing`
    # says for which tasks), where the script rather than the launcher line chooses it.
    checkpointing_off: str = ""
    # How the library packs short examples into full sequences, as the estimate counts them.
    packing: str = ""
    # How a script turns torch.compile on ("" where the library does not offer it for training:
    # Megatron-LM fuses with its own kernels and Transformer Engine, Unsloth with its own Triton
    # kernels).
    compile_switch: str = ""
    # A 4-/8-bit base goes through PEFT's prepare_model_for_kbit_training, which casts every
    # 16-bit parameter that is not quantised (embeddings, LM head, norms) to fp32, so under
    # AMP the embedding output, the residual stream and the quantised layers' outputs
    # (bitsandbytes returns its input's dtype) are fp32 too (memory_terms.fp32_unquantised).
    # False where the library casts them back afterwards (Axolotl, qlora.py).
    upcasts_kbit_base: bool = False
    # The trainable adapters on a 4-/8-bit base are cast to bf16 (TRL's SFTTrainer, after the
    # QLoRA paper), so they, their gradients and AdamW's moments take 2 bytes each and autocast
    # keeps no 16-bit copy of them.
    sixteen_bit_kbit_adapters: bool = False
    # Without flash attention the library still fuses scale, mask and softmax into one kernel
    # (Megatron's FusedScaleMaskSoftmax), as the Megatron runs among the calibration
    # benchmarks did, so their figures already hold that traffic; False: the scores go
    # through one PyTorch op after another (roofline.eager_score_bytes).
    fused_softmax: bool = False

    @property
    def chunked_loss(self) -> bool:
        return self.logits_bytes is not None


# Libraries that recompute every layer for every kind of training unless told not to.
EVERY_TRAINING_TASK = MappingProxyType(
    {"qlora": "full", "lora": "full", "full_finetune": "full", "pretrain": "full"}
)

TRAINING_FRAMEWORKS = {
    "hf_trainer": Framework(
        key="hf_trainer",
        clips_gradients=True,
        compile_switch="--torch_compile (TrainingArguments torch_compile=True)",
        name="Hugging Face Transformers Trainer (+ PEFT)",
        fused_loss_switch="use_liger_kernel=True in TrainingArguments",
        kind="training",
        # prepare_model_for_kbit_training(model, use_gradient_checkpointing=True) is how PEFT
        # prepares a 4-/8-bit base model; plain LoRA and full fine-tuning leave
        # TrainingArguments.gradient_checkpointing at its default False.
        checkpointing={"qlora": "full"},
        checkpointing_off="prepare_model_for_kbit_training(model, "
        "use_gradient_checkpointing=False)",
        packing="TRL's SFTConfig(packing=True)",
        checkpoint_levels=("none", "full"),
        launcher="accelerate",
        source="transformers TrainingArguments (gradient_checkpointing=False, bf16 AMP with "
        "fp32 master weights); peft/utils/other.py prepare_model_for_kbit_training "
        "(use_gradient_checkpointing=True; it also casts every 16-bit parameter that is not "
        "4-bit to fp32); causal-LM heads upcast logits to fp32 for the loss",
        quantises_head=False,
        upcasts_kbit_base=True,
    ),
    "trl": Framework(
        key="trl",
        clips_gradients=True,
        compile_switch="--torch_compile (SFTConfig torch_compile=True)",
        name="TRL 1.7 or newer (SFTTrainer, DPOTrainer)",
        kind="training",
        # _BaseConfig: gradient_checkpointing=True for every TRL trainer (TRL pull request
        # 3510, mid-2025).
        checkpointing=EVERY_TRAINING_TASK,
        checkpointing_off="SFTConfig(gradient_checkpointing=False) (TRL's default is True)",
        packing="SFTConfig(packing=True)",
        # loss_type "chunked_nll", the default since TRL 1.7 (pull request 5846): tokens whose
        # label is ignored never reach the LM head, the rest go through it and the loss in
        # checkpointed chunks of 256 tokens, so no logits are kept per token; each chunk
        # multiplies by an fp32 copy of the head weight (memory_terms.loss_chunk_bytes).
        logits_bytes=0.0,
        loss_chunk_tokens=256,
        checkpoint_levels=("none", "full"),
        launcher="accelerate",
        source="huggingface/trl trl/trainer/base_config.py (gradient_checkpointing default "
        "True, bf16 unless fp16), sft_config.py (loss_type chunked_nll, chunks of 256 tokens, "
        "since TRL 1.7) and sft_trainer.py (get_peft_model without "
        "prepare_model_for_kbit_training; a 4-bit base's adapters cast to bf16)",
        quantises_head=False,
        sixteen_bit_kbit_adapters=True,
    ),
    "torchtune": Framework(
        key="torchtune",
        compile_switch="compile=True (the recipe config key)",
        name="torchtune",
        kind="training",
        packing="dataset.packed=True",
        checkpointing=EVERY_TRAINING_TASK,
        # CEWithChunkedOutputLoss: the output projection returns 8 chunks of 16-bit logits and
        # each chunk is upcast to fp32 and reduced on its own: 2 + (4 + 4) / 8 bytes.
        logits_bytes=2 + 8 / 8,
        pure_bf16=True,
        checkpoint_levels=("none", "full"),
        launcher="tune",
        own_cli=True,
        tensor_parallel_training=True,
        # Its *_distributed recipes shard the model with FSDP2 (training.shard_model,
        # fully_shard), with fsdp_cpu_offload for the CPU-offload layout; there is no DDP or
        # DeepSpeed ZeRO recipe.
        data_parallel=("single", "fsdp", "zero3_offload"),
        shards_instead="its distributed recipes shard weights, gradients and optimizer states "
        "with FSDP",
        fp16=False,
        source="pytorch/torchtune recipes/configs/llama3_1/8B_qlora_single_device.yaml and "
        "8B_full_single_device.yaml: dtype bf16 (no fp32 master weights), "
        "enable_activation_checkpointing True, loss CEWithChunkedOutputLoss / "
        "LinearCrossEntropyLoss; recipes/full_finetune_distributed.py: tensor_parallel_dim "
        "with a tensor_parallel_plan (tensor parallel within the node, FSDP over the rest); "
        "the distributed recipes shard with FSDP2 (torchtune/training/_distributed.py "
        "shard_model)",
        quantises_head=False,
    ),
    "unsloth": Framework(
        key="unsloth",
        clips_gradients=True,
        name="Unsloth",
        kind="training",
        checkpointing={"qlora": "full", "lora": "full", "full_finetune": "full"},
        checkpointing_off="FastLanguageModel.get_peft_model(..., use_gradient_checkpointing=False)",
        packing="TRL's SFTConfig(packing=True)",
        # Since December 2024 Unsloth computes the loss with Apple's Cut Cross-Entropy: the
        # logits are formed block by block in on-chip memory and never stored whole, so no
        # tensor of tokens x vocabulary exists (Wijmans et al. 2024, arXiv:2411.09009).
        logits_bytes=0.0,
        offloads_checkpoints=True,
        checkpoint_levels=("none", "full"),
        launcher="python",
        source="unslothai/unsloth README: FastLanguageModel.get_peft_model("
        "use_gradient_checkpointing='unsloth') offloads checkpointed activations to system "
        "RAM; unsloth.ai/blog/llama3-3: the loss uses Apple's Cut Cross-Entropy (Wijmans et al. "
        "2024, arXiv:2411.09009), which never materialises the logits",
        quantises_head=False,
    ),
    "axolotl": Framework(
        key="axolotl",
        clips_gradients=True,
        compile_switch="torch_compile: true in the config",
        name="Axolotl",
        # Its Liger integration (docs: Custom Integrations, Liger Kernels).
        fused_loss_switch="plugins: [axolotl.integrations.liger.LigerPlugin] with "
        "liger_fused_linear_cross_entropy: true in the config",
        kind="training",
        checkpointing={"qlora": "full", "lora": "full", "full_finetune": "full"},
        checkpointing_off="gradient_checkpointing: false in the config",
        packing="sample_packing: true in the config",
        checkpoint_levels=("none", "full"),
        launcher="accelerate",
        source="axolotl-ai-cloud/axolotl examples (llama-3/qlora.yml, lora.yml, fft): "
        "gradient_checkpointing: true; trains through the Transformers Trainer; after PEFT's "
        "prepare_model_for_kbit_training it casts norms and embedding modules back to the "
        "model's dtype for adapters (axolotl/loaders/model.py, 'converting modules to "
        "torch_dtype for flash-attn compatibility')",
        quantises_head=False,
    ),
    "llama_factory": Framework(
        key="llama_factory",
        clips_gradients=True,
        compile_switch="torch_compile: true in the config",
        name="LLaMA-Factory",
        fused_loss_switch="enable_liger_kernel: true in the config",
        kind="training",
        # model_utils/checkpointing.py prepare_model_for_training turns gradient checkpointing
        # on for every stage and fine-tuning type unless disable_gradient_checkpointing.
        checkpointing=EVERY_TRAINING_TASK,
        checkpointing_off="disable_gradient_checkpointing: true in the config",
        packing="packing: true in the config (its default only for stage pt)",
        checkpoint_levels=("none", "full"),
        launcher="llamafactory-cli",
        own_cli=True,
        source="hiyouga/LLaMA-Factory src/llamafactory/hparams/model_args.py "
        "(disable_gradient_checkpointing False, upcast_layernorm False, upcast_lmhead_output "
        "False, double_quantization True) and model/model_utils/checkpointing.py "
        "prepare_model_for_training: its own preparation instead of PEFT's "
        "prepare_model_for_kbit_training, so a 4-bit base keeps 16-bit embeddings and norms; "
        "trains through the Transformers Trainer (bf16 AMP, fp32 logits for the loss)",
        quantises_head=False,
    ),
    "lightning": Framework(
        key="lightning",
        compile_switch="model = torch.compile(model) before fit, in your script",
        name="PyTorch Lightning / Fabric",
        kind="training",
        checkpointing={},
        checkpoint_levels=("none", "full"),
        launcher="srun",
        source="Lightning Trainer(precision='bf16-mixed') is PyTorch AMP; activation "
        "checkpointing only where the model's code asks for it",
        quantises_head=True,
    ),
    "deepspeed": Framework(
        key="deepspeed",
        clips_gradients=True,
        compile_switch="model = torch.compile(model) before deepspeed.initialize, in your script",
        name="DeepSpeed",
        kind="training",
        checkpointing={},
        checkpoint_levels=("none", "full"),
        # ZeRO's default reduce bucket: reduce_bucket_size 5e8 elements of 16-bit gradients,
        # a buffer allocated once per GPU.
        overhead_bytes=5e8 * 2,
        # ZeRO stage 1/2 copy gradients into a partition buffer kept across steps
        # (contiguous_gradients).
        keeps_gradients=True,
        # DeepSpeedEngine._configure_distributed_model: `self.module.half()` /
        # `.bfloat16()` when fp16/bf16 is enabled; torch.autocast only with the separate
        # `torch_autocast` config section.
        autocast=False,
        launcher="deepspeed",
        # Megatron-DeepSpeed: Megatron's tensor parallelism with DeepSpeed's ZeRO stage 1.
        tensor_parallel_training=True,
        # Megatron-DeepSpeed's --pipeline-model-parallel-size (DeepSpeed's PipelineModule).
        pipeline_parallel_training=True,
        tensor_parallel_last_resort=True,
        fused_softmax=True,
        source="Megatron-DeepSpeed (--tensor-model-parallel-size with ZeRO stage 1); "
        "DeepSpeed config docs: bf16/fp16 modes keep fp32 master weights in the "
        "optimizer (ZeRO paper accounting); activation_checkpointing is off unless "
        "configured; zero_optimization defaults reduce_bucket_size and allgather_bucket_size "
        "5e8 elements, contiguous_gradients (gradients copied into one buffer as produced)",
    ),
    "megatron": Framework(
        key="megatron",
        clips_gradients=True,
        name="Megatron-LM / NeMo",
        kind="training",
        checkpointing={},
        # Megatron's vocab-parallel cross-entropy works on the 16-bit logits in place and
        # keeps one fp32 copy for the softmax.
        logits_bytes=2 + 4,
        checkpoint_levels=("none", "selective", "full"),
        # Megatron's DistributedDataParallel accumulates into a contiguous main_grad buffer
        # allocated at start-up and zeroed, not freed, between steps.
        keeps_gradients=True,
        # Float16Module casts the model to fp16/bf16 (megatron/core/transformer/module.py).
        autocast=False,
        fused_softmax=True,
        launcher="torchrun",
        tensor_parallel_training=True,
        pipeline_parallel_training=True,
        # Adam or SGD only (megatron/core/optimizer/optimizer_config.py): no bitsandbytes.
        eight_bit_optimizers=False,
        # No ZeRO-3 / FSDP: data-parallel ranks keep whole (tensor- and pipeline-split)
        # weights and share the optimizer state (--use-distributed-optimizer).
        data_parallel=("single", "ddp"),
        shards_instead="it splits weights with tensor and pipeline parallelism and shards "
        "the optimizer state over data-parallel ranks (--use-distributed-optimizer)",
        source="Megatron-LM arguments (--tensor-model-parallel-size, --sequence-parallel, "
        "--pipeline-model-parallel-size, "
        "--use-distributed-optimizer; Shoeybi et al. 2019, arXiv:1909.08053; "
        "--recompute-granularity selective|full; Korthikanti et al. 2022, arXiv:2205.05198 "
        "section 4 for selective recomputation); "
        "megatron/core/tensor_parallel/cross_entropy.py (vocab-parallel cross-entropy); "
        "megatron/core/optimizer/optimizer_config.py (adam or sgd); "
        "megatron/core/distributed/distributed_data_parallel.py (contiguous grad buffer)",
    ),
}

INFERENCE_FRAMEWORKS = {
    "transformers": Framework(
        key="transformers",
        name="Hugging Face Transformers generate()",
        kind="inference",
        checkpointing={},
        pure_bf16=True,
        checkpoint_levels=("none",),
        launcher="python",
        source="transformers generate(): a contiguous KV cache grown per token (DynamicCache)",
        quantises_head=False,
    ),
    "transformers_legacy": Framework(
        key="transformers_legacy",
        name="Hugging Face Transformers generate(), version 4.35 or older (tuple KV cache)",
        kind="inference",
        checkpointing={},
        pure_bf16=True,
        checkpoint_levels=("none",),
        launcher="python",
        tuple_kv_cache=True,
        # Tensor parallelism (from_pretrained(tp_plan="auto") under torchrun) is documented
        # from 4.49 (docs, "Multi-GPU inference"); before it, several GPUs meant
        # device_map="auto".
        sequential_multi_gpu=True,
        source="transformers v4.35 models/llama/modeling_llama.py LlamaAttention.forward: "
        "`key_states = torch.cat([past_key_value[0], key_states], dim=2)`, "
        "`past_key_value = (key_states, value_states)`: each step returns a new tuple cache "
        "while generate() holds the previous one; v4.36 introduced DynamicCache "
        "(cache_utils.py), which replaces each layer's tensors in place of the old ones",
        quantises_head=False,
    ),
    "litgpt": Framework(
        key="litgpt",
        name="LitGPT generate",
        kind="inference",
        checkpointing={},
        pure_bf16=True,
        checkpoint_levels=("none",),
        launcher="python",
        source="Lightning-AI/litgpt generate/base.py with --quantize bnb.nf4: Lightning's "
        "BitsandbytesPrecision quantises every nn.Linear, the LM head included",
        quantises_head=True,
    ),
    "vllm": Framework(
        key="vllm",
        name="vLLM",
        kind="inference",
        checkpointing={},
        pure_bf16=True,
        checkpoint_levels=("none",),
        # EngineArgs.gpu_memory_utilization defaults to 0.9: vLLM reserves that share of the
        # GPU at start-up and fills what the model leaves with paged KV-cache blocks.
        preallocates=0.9,
        # V1 always chunks prefill; max_num_batched_tokens defaults to 16,384 for the offline
        # LLM class on GPUs of 70 GiB or more other than the A100, and lower everywhere else
        # (8,192, or 2,048 to 8,192 for the API server): the largest default bounds the need.
        prefill_chunk_tokens=16_384,
        # EngineArgs.get_batch_defaults: max_num_seqs 256 for the LLM class, 1,024 on GPUs
        # of >= 70 GiB other than the A100.
        max_num_seqs=(256, 1024),
        launcher="vllm",
        source="vLLM engine arguments (docs.vllm.ai, --gpu-memory-utilization, default 0.9); "
        "PagedAttention (Kwon et al. 2023, arXiv:2309.06180): KV cache in 16-token blocks, "
        "under 4 % waste; vLLM V1 always runs chunked prefill, at most max_num_batched_tokens "
        "per forward pass (EngineArgs.get_batch_defaults: 16,384 for the LLM class on GPUs of "
        ">= 70 GiB other than the A100, else 8,192; the API server 8,192 or 2,048); "
        "LLM.generate() schedules every prompt it is given with continuous batching, as "
        "many sequences at once as the KV cache holds up to max_num_seqs (get_batch_defaults: "
        "256, or 1,024 on GPUs of >= 70 GiB other than the A100)",
    ),
    "tgi": Framework(
        key="tgi",
        name="Text Generation Inference",
        kind="inference",
        checkpointing={},
        pure_bf16=True,
        checkpoint_levels=("none",),
        # --cuda-memory-fraction defaults to 1.0; the launcher warms up and then keeps the
        # KV-cache blocks that fit (paged attention), so nvidia-smi shows nearly the whole GPU.
        preallocates=1.0,
        launcher="tgi",
        source="huggingface/text-generation-inference launcher arguments (--cuda-memory-"
        "fraction 1.0, --max-batch-total-tokens inferred from free memory after warm-up)",
    ),
}

FRAMEWORKS = {**TRAINING_FRAMEWORKS, **INFERENCE_FRAMEWORKS}
FRAMEWORK_CHOICES = ("not_sure", *FRAMEWORKS)
DEFAULT_TRAINING = "hf_trainer"
DEFAULT_INFERENCE = "transformers"


def framework_for(
    requested: str | None, training: bool, preference: bool = False
) -> tuple[Framework, bool]:
    """(profile, whether it was assumed rather than named). `preference`: the job trains on
    preference pairs, which the Transformers Trainer has no loss for: "not sure" is TRL's
    DPOTrainer (a Trainer subclass, the common way), and so is the Trainer named."""
    if preference and requested in (None, "not_sure", "hf_trainer"):
        return FRAMEWORKS["trl"], requested != "hf_trainer"
    if requested in (None, "not_sure"):
        key = DEFAULT_TRAINING if training else DEFAULT_INFERENCE
        return FRAMEWORKS[key], True
    return FRAMEWORKS[requested], False


LARGE_GPU_GIB = 70  # vLLM's get_batch_defaults: larger defaults from this much memory up


def batch_limit(framework: Framework, acc: AcceleratorSpec) -> int | None:
    """The most sequences the library generates at once on this GPU by default (vLLM's rule:
    the larger default on GPUs of >= 70 GiB whose name does not contain "a100", where the
    larger budgets measured slower); None: the library does not batch by itself."""
    if framework.max_num_seqs is None:
        return None
    default, large = framework.max_num_seqs
    if device_bytes(acc) >= LARGE_GPU_GIB * 2**30 and "a100" not in acc.name.lower():
        return large
    return default


def cuda_context_bytes(framework: Framework, legacy_stack: bool) -> float:
    """Context + library workspaces per GPU: a current stack loads CUDA modules lazily; the
    stacks of the Volta/Turing era loaded every kernel at start-up (calibration notes §1)."""
    base = c.CUDA_CONTEXT_LEGACY.value if legacy_stack else c.CUDA_CONTEXT.value
    return base + framework.overhead_bytes
