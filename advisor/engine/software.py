"""Software that actually runs there: what a job needs, and whether a system's GPUs have it.

A job needs a few libraries beyond PyTorch: bitsandbytes' 4-bit kernels for QLoRA and int4,
its LLM.int8() kernels for int8, its 8-bit optimizers for `adamw_8bit`, the serving library's
fp8 kernels for fp8 weights, its MXFP4 kernels for MXFP4 experts, DeepSpeed for ZeRO,
FSDP for fsdp, vLLM when the request names vLLM as its library, and Triton (what
torch.compile's inductor backend generates, and what Unsloth's kernels are written in) when the
request names Unsloth. Whether a system has them comes from, in order:

1. the system's own cell in the catalog's tooling matrix (staff edit it in the admin, with a
   source and a date), then
2. this module's platform matrix (CUDA / ROCm / oneAPI-XPU), with its source and date, then
3. unknown: on CUDA a library that supports the hardware is taken as available; elsewhere an
   unconfirmed library rules the option out, saying what to confirm.

Non-NVIDIA options also say what the researcher must change (container, build, launcher).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.engine.generations import Generation
from advisor.engine.models import AcceleratorSpec, EstimateRequest, SystemSpec

if TYPE_CHECKING:
    from advisor.engine.memory_terms import Workload
    from advisor.engine.shape import ModelShape


@dataclass(frozen=True, slots=True)
class Cell:
    supported: bool | None
    source: str  # where it comes from, with its date


# Tool names as the tooling matrix spells them (catalog data files, admin).
BNB_4BIT = "bitsandbytes 4-bit"
BNB_8BIT = "bitsandbytes 8-bit"
FLASH = "flash-attention"
DEEPSPEED = "DeepSpeed"
FSDP = "FSDP"
VLLM = "vLLM"
COMPILE = "torch.compile"
FP8_VLLM = "vLLM FP8"
FP8_TGI = "TGI FP8"
FP8_MOE = "FP8 MoE"
FP8_HF = "transformers FP8"
MXFP4_VLLM = "vLLM MXFP4"
MXFP4_HF = "transformers MXFP4"

WHY = {
    BNB_4BIT: "QLoRA and int4 weights need bitsandbytes 4-bit (NF4) kernels",
    BNB_8BIT: "int8 weights and 8-bit Adam need bitsandbytes 8-bit kernels",
    FLASH: "flash attention needs a fused attention kernel",
    DEEPSPEED: "ZeRO needs DeepSpeed",
    FSDP: "fsdp needs PyTorch FSDP",
    VLLM: "vLLM (serving, or GRPO's generation) needs a vLLM build for the GPU",
    COMPILE: "Unsloth's kernels and torch.compile need Triton for the GPU",
    FP8_VLLM: "fp8 weights with vLLM need its FP8 kernels (W8A8, or the W8A16 Marlin kernel)",
    FP8_TGI: "fp8 weights with TGI need its FP8 kernels (fbgemm on Hopper, Marlin below)",
    FP8_MOE: "fp8 mixture-of-experts layers need fp8 hardware (the Marlin kernel serves dense "
    "layers only)",
    FP8_HF: "fp8 weights with transformers need its fine-grained FP8 kernels (vLLM's and TGI's "
    "run on more GPUs)",
    MXFP4_VLLM: "MXFP4 experts with vLLM need its MXFP4 MoE kernels (Marlin on Ampere, native "
    "on Hopper and newer); precision bf16 serves a dequantised copy",
    MXFP4_HF: "MXFP4 experts with transformers need its Triton MXFP4 kernels (triton>=3.4 and "
    "the kernels package); precision bf16 serves a dequantised copy",
}

_BNB_CUDA = (
    "bitsandbytes installation guide v0.46-0.50 (huggingface.co/docs/bitsandbytes, "
    "'Installation Guide', as of 2025-06): NF4/FP4 and 8-bit optimizers on NVIDIA compute "
    "capability 5.0/6.0+, LLM.int8() on 7.5+ (Turing or newer)"
)
_BNB_OTHER = (
    "bitsandbytes docs 'Multi-backend support (non-CUDA backends)' (as of 2025-06): a preview; "
    "'the Intel XPU backend has limited functionality and is less mature', AMD ROCm "
    "functional from source builds; official packages for both only from v0.50"
)
_DS = (
    "DeepSpeed accelerator abstraction (deepspeed.ai/tutorials/accelerator-abstraction-"
    "interface, as of 2024-01): CUDA, ROCm and Intel XPU (intel-extension-for-deepspeed)"
)
_FSDP = "PyTorch FSDP is device-agnostic (pytorch.org/docs/stable/fsdp.html, as of 2.4, 2024-07)"
_FLASH_CUDA = (
    "PyTorch scaled_dot_product_attention (pytorch.org/docs, as of 2.2, 2024-01): "
    "FlashAttention-2 on Ampere or newer, the memory-efficient kernel on Volta/Turing"
)
_FLASH_ROCM = (
    "ROCm flash-attention (github.com/ROCm/flash-attention, as of 2024-06): MI200 and MI300 "
    "(CDNA2/CDNA3) only"
)
_FLASH_XPU = (
    "Intel Extension for PyTorch (intel.github.io/intel-extension-for-pytorch, as of 2.1, "
    "2023-12): fused scaled-dot-product attention for Intel Data Center GPU Max"
)
_VLLM_NOW = (
    "vLLM docs, 'Installation: GPU' (docs.vllm.ai/en/latest, as of 2026-11): NVIDIA compute "
    "capability 7.5 or higher (v0.14 still listed 7.0, so V100s need an older release); AMD "
    "MI200s (gfx90a), MI300 and MI350 with ROCm 6.3+ (Docker recommended); Intel Data Center "
    "GPU 'basic model inference and serving' from source or vLLM's XPU images"
)
_FP8_VLLM = (
    "vLLM docs, 'FP8 W8A8' and 'Supported Hardware' (docs.vllm.ai, as of v0.32, 2026): W8A8 on "
    "NVIDIA compute capability 8.9+ (Ada, Hopper) and AMD MI300; weight-only W8A16 through the "
    "FP8 Marlin kernel on 7.5+ (Turing, Ampere); not on Volta, MI200 or Intel GPUs"
)
_FP8_TGI = (
    "huggingface/text-generation-inference #2204 and #2277 (2024-07) and #2388 (2024-08): fp8 "
    "matmuls through fbgemm-gpu, which needs Hopper's TMA, and the FP8 Marlin kernel (weight-"
    "only) on compute capability 8.0-8.9; no ROCm or Intel path stated"
)
_FP8_MOE = (
    "vLLM issues #7322 (2024-08) and #13885 (2025-02): the FP8 Marlin kernel serves dense "
    "layers only, so fp8 MoE models (DeepSeek-V3/R1's block-wise fp8 among them) need fp8 "
    "hardware, compute capability 8.9+ (Ada, Hopper) or MI300; a later release may lift this, "
    "which staff can record in the tooling matrix"
)
_FP8_HF = (
    "transformers docs, 'Fine-grained FP8' (huggingface.co/docs/transformers, v4.49-v5.14, "
    "2025-2026): 'You need a GPU with Compute Capability>=9 (H100)'"
)
_MXFP4_VLLM = (
    "vLLM recipes, 'GPT-OSS' (github.com/vllm-project/recipes, OpenAI/GPT-OSS.md, as of "
    "2026-11): NVIDIA H100, H200, B200 and AMD MI300x, MI325x, MI355x; 'GPT-OSS works on Ampere "
    "devices by default, using the TRITON_ATTN attention backend and Marlin MXFP4 MoE'; Turing, "
    "Volta, older AMD and Intel GPUs not listed"
)
_MXFP4_HF = (
    "transformers quantizer_mxfp4.py (v4.55-v5, 2025-2026): pre-quantized MXFP4 kept on CUDA "
    "GPUs of compute capability 7.5+ ('e.g T4, A100, L4, H100, or B200') and Intel XPUs ('Intel "
    "Data Center GPU Max Series') with Triton and the kernels package; otherwise 'We will "
    "default to dequantizing the model to bf16'. ROCm is not named"
)
_TRITON = (
    "PyTorch 2.5 release notes and 'Getting Started on Intel GPU' (pytorch.org, 2024-10): "
    "torch.compile's inductor backend generates Triton kernels on NVIDIA CUDA (compute "
    "capability 7.0+), AMD ROCm and, since 2.5, Intel XPU; Unsloth's README (github.com/"
    "unslothai/unsloth, as of 2025-06): 'all kernels written in OpenAI's Triton language', "
    "NVIDIA first"
)

# (platform or generation key, tool) -> cell; a generation entry wins over its platform's.
PLATFORM_MATRIX: dict[tuple[str, str], Cell] = {
    ("cuda", BNB_4BIT): Cell(True, _BNB_CUDA),
    ("cuda", BNB_8BIT): Cell(True, _BNB_CUDA),
    ("rocm", BNB_4BIT): Cell(None, _BNB_OTHER),
    ("rocm", BNB_8BIT): Cell(None, _BNB_OTHER),
    ("xpu", BNB_4BIT): Cell(False, _BNB_OTHER),
    ("xpu", BNB_8BIT): Cell(False, _BNB_OTHER),
    ("cuda", FLASH): Cell(True, _FLASH_CUDA),
    ("rocm", FLASH): Cell(True, _FLASH_ROCM),
    ("amd-cdna1", FLASH): Cell(False, _FLASH_ROCM),
    ("xpu", FLASH): Cell(True, _FLASH_XPU),
    ("cuda", DEEPSPEED): Cell(True, _DS),
    ("rocm", DEEPSPEED): Cell(True, _DS),
    ("xpu", DEEPSPEED): Cell(True, _DS),
    ("cuda", FSDP): Cell(True, _FSDP),
    ("rocm", FSDP): Cell(True, _FSDP),
    ("xpu", FSDP): Cell(True, _FSDP),
    ("cuda", VLLM): Cell(True, _VLLM_NOW),
    ("nvidia-volta", VLLM): Cell(False, _VLLM_NOW),
    ("rocm", VLLM): Cell(True, _VLLM_NOW),
    ("amd-cdna1", VLLM): Cell(False, _VLLM_NOW),
    ("xpu", VLLM): Cell(True, _VLLM_NOW),
    ("cuda", FP8_VLLM): Cell(True, _FP8_VLLM),
    ("nvidia-volta", FP8_VLLM): Cell(False, _FP8_VLLM),
    ("rocm", FP8_VLLM): Cell(False, _FP8_VLLM),
    ("amd-cdna3", FP8_VLLM): Cell(True, _FP8_VLLM),
    ("xpu", FP8_VLLM): Cell(False, _FP8_VLLM),
    ("cuda", FP8_TGI): Cell(True, _FP8_TGI),
    ("nvidia-volta", FP8_TGI): Cell(False, _FP8_TGI),
    ("nvidia-turing", FP8_TGI): Cell(False, _FP8_TGI),
    ("cuda", FP8_MOE): Cell(False, _FP8_MOE),
    ("nvidia-ada", FP8_MOE): Cell(True, _FP8_MOE),
    ("nvidia-hopper", FP8_MOE): Cell(True, _FP8_MOE),
    ("rocm", FP8_MOE): Cell(False, _FP8_MOE),
    ("amd-cdna3", FP8_MOE): Cell(True, _FP8_MOE),
    ("xpu", FP8_MOE): Cell(False, _FP8_MOE),
    ("cuda", FP8_HF): Cell(False, _FP8_HF),
    ("nvidia-hopper", FP8_HF): Cell(True, _FP8_HF),
    ("rocm", FP8_HF): Cell(False, _FP8_HF),
    ("xpu", FP8_HF): Cell(False, _FP8_HF),
    ("cuda", MXFP4_VLLM): Cell(True, _MXFP4_VLLM),
    ("nvidia-volta", MXFP4_VLLM): Cell(False, _MXFP4_VLLM),
    ("nvidia-turing", MXFP4_VLLM): Cell(False, _MXFP4_VLLM),
    ("rocm", MXFP4_VLLM): Cell(False, _MXFP4_VLLM),
    ("amd-cdna3", MXFP4_VLLM): Cell(True, _MXFP4_VLLM),
    ("xpu", MXFP4_VLLM): Cell(False, _MXFP4_VLLM),
    ("cuda", MXFP4_HF): Cell(True, _MXFP4_HF),
    ("nvidia-volta", MXFP4_HF): Cell(False, _MXFP4_HF),
    ("rocm", MXFP4_HF): Cell(None, _MXFP4_HF),
    ("xpu", MXFP4_HF): Cell(True, _MXFP4_HF),
    ("cuda", COMPILE): Cell(True, _TRITON),
    ("rocm", COMPILE): Cell(True, _TRITON),
    ("xpu", COMPILE): Cell(True, _TRITON),
}

# What a researcher changes to run on each platform; reasons and the sbatch script say it.
PLATFORM_CHANGES = {
    "rocm": (
        "AMD GPU: use a ROCm build of PyTorch (pip index download.pytorch.org/whl/rocm6.x or "
        "the site's ROCm container), not the CUDA one; select GPUs with ROCR_VISIBLE_DEVICES "
        "or HIP_VISIBLE_DEVICES; torch.cuda calls work unchanged (HIP)"
    ),
    "xpu": (
        "Intel GPU: use PyTorch with XPU support (torch>=2.5 'xpu' wheels or Intel Extension "
        "for PyTorch), move tensors to 'xpu' instead of 'cuda', and launch multi-GPU jobs with "
        "oneCCL ('ccl' backend) through mpirun/mpiexec rather than torchrun's NCCL"
    ),
}


def needs(
    *,
    task: str,
    weight_format: str,
    optimizer: str,
    flash_attention: bool,
    training: bool,
    framework: str | None = None,
    quantization: str | None = None,
    experts: bool = False,
    compiled: bool = False,
    generates: bool = False,
) -> tuple[str, ...]:
    """The tools a job needs whatever the strategy (strategies add DeepSpeed/FSDP); the
    library the request names (`framework`) adds its own. A GPTQ checkpoint needs its own
    kernels, not bitsandbytes; fp8 mixture-of-experts layers (`experts`) their own MoE kernels;
    torch.compile (`compiled`) Triton for its generated kernels; GRPO (`generates`) vLLM for its
    colocated generation (rollouts.py)."""
    out = []
    if task == "qlora" or (weight_format == "int4" and quantization != "gptq"):
        out.append(BNB_4BIT)
    if weight_format == "int8" or (training and optimizer == "adamw_8bit"):
        out.append(BNB_8BIT)
    if flash_attention and training:
        out.append(FLASH)
    if (framework == "vllm" and not training) or generates:
        out.append(VLLM)
    if weight_format == "mxfp4":
        out.append(MXFP4_VLLM if framework == "vllm" else MXFP4_HF)
    if weight_format == "fp8":
        out.append({"vllm": FP8_VLLM, "tgi": FP8_TGI}.get(framework or "", FP8_HF))
        if experts and framework in ("vllm", "tgi"):
            out.append(FP8_MOE)
    if training and (framework == "unsloth" or compiled):
        out.append(COMPILE)
    return tuple(out)


def job_needs(request: EstimateRequest, shape: ModelShape, wl: Workload) -> tuple[str, ...]:
    """`needs` for an estimate: the software its recipe needs, for the support matrix."""
    return needs(
        task=wl.task,
        weight_format=wl.weight_format,
        optimizer=request.optimizer,
        flash_attention=wl.flash_attention,
        training=wl.training,
        framework=request.framework,
        quantization=request.quantization,
        experts=shape.num_experts > 1,
        compiled=wl.compiled,
        generates=wl.generates,
    )


def eight_bit_optimizers(system: SystemSpec, acc: AcceleratorSpec, gen: Generation) -> bool:
    """bitsandbytes' 8-bit optimizers run on this system's GPUs (the recipe search offers
    8-bit AdamW only there: on Intel GPUs, and on AMD ones until staff confirm them, it does
    not exist to choose)."""
    return check(system, acc, gen, (BNB_8BIT,), weight_format="bf16")[0]


def cell(system: SystemSpec, gen: Generation, tool: str) -> Cell:
    """The system's cell, else the generation's, else the platform's, else unknown."""
    if tool in system.tooling and system.tooling[tool] is not None:
        source = system.tooling_sources.get(tool) or f"{system.display_name}'s tooling matrix"
        return Cell(system.tooling[tool], source)
    found = PLATFORM_MATRIX.get((gen.key, tool)) or PLATFORM_MATRIX.get((gen.platform, tool))
    if found is not None:
        return found
    return Cell(None, "no entry in the catalog or the engine's platform matrix")


def _hardware_limit(acc: AcceleratorSpec, gen: Generation, tool: str) -> str | None:
    """A hardware limit within CUDA (bitsandbytes' LLM.int8() needs Turing or newer)."""
    if tool == BNB_8BIT and gen.key == "nvidia-volta":
        return (
            "LLM.int8() needs NVIDIA compute capability 7.5 (Turing) or newer; "
            f"{acc.display_name} is 7.0 (bitsandbytes installation guide)"
        )
    return None


def check(
    system: SystemSpec,
    acc: AcceleratorSpec,
    gen: Generation,
    tools: tuple[str, ...],
    *,
    weight_format: str,
) -> tuple[bool, list[str]]:
    """(supported, reasons): every tool the job needs, on this system's GPUs."""
    ok = True
    reasons: list[str] = []
    vendor_gpus = f"this system's {gen.label.split(' (')[0]} GPUs"
    for tool in tools:
        if tool == BNB_8BIT and weight_format != "int8" and gen.key == "nvidia-volta":
            pass  # 8-bit optimizers need only compute capability 6.0
        elif gen.platform == "cuda":
            limit = _hardware_limit(acc, gen, tool)
            if limit is not None:
                ok = False
                reasons.append(f"{WHY[tool]}: {limit}.")
                continue
        found = cell(system, gen, tool)
        if found.supported is True:
            continue
        if found.supported is None and gen.platform == "cuda":
            continue  # the CUDA builds of these libraries run on every GPU checked above
        ok = False
        word = "not supported on" if found.supported is False else "not confirmed on"
        hint = "" if found.supported is False else "; staff can mark it supported in the admin"
        reasons.append(f"{WHY[tool]}; {word} {vendor_gpus} ({found.source}){hint}.")
    return ok, reasons
