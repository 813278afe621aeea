"""Which counting applies to a config: model_type (or architectures[0]) -> family reader.

A model_type the registry does not hold is refused with a message naming it: counting it as a
Llama would give a confident wrong number (Qwen3-30B-A3B counted that way was a dense 3.3B
model, its memory under-estimated by 89 %, issue 13).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.blip import blip2_blueprint
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.dual_encoders import dual_encoder_blueprint
from advisor.engine.architecture.encoders import (
    ENCODERS,
    bart_blueprint,
    encoder_blueprint,
    t5_blueprint,
    vit_blueprint,
)
from advisor.engine.architecture.encoders_modern import (
    MODERN_ARCHITECTURES,
    MODERN_ENCODERS,
    REFUSED_FAMILIES,
)
from advisor.engine.architecture.families import DECODERS, fuyu_blueprint
from advisor.engine.architecture.gemma3n import gemma3n_blueprint
from advisor.engine.architecture.gemma4 import gemma4_blueprint
from advisor.engine.architecture.hybrids import (
    falcon_h1_blueprint,
    granitemoehybrid_blueprint,
    lfm2_blueprint,
)
from advisor.engine.architecture.mllama import mllama_blueprint
from advisor.engine.architecture.model import ModelArchitecture
from advisor.engine.architecture.multimodal import (
    gemma3_blueprint,
    glm4v_blueprint,
    llama4_blueprint,
    mistral3_blueprint,
)
from advisor.engine.architecture.nemotron_h import nemotron_h_blueprint
from advisor.engine.architecture.omni import qwen2_5_omni_blueprint
from advisor.engine.architecture.qwen3_omni import qwen3_omni_moe_blueprint
from advisor.engine.architecture.qwen_multimodal import qwen2_audio_blueprint, qwen_vl_blueprint
from advisor.engine.architecture.recurrent import (
    RECURRENT_REFUSED,
    bamba_blueprint,
    recurrent_gemma_blueprint,
    zamba_refused,
)
from advisor.engine.architecture.seq2seq import SEQ2SEQ, SEQ2SEQ_ARCHITECTURES, seq2seq_blueprint
from advisor.engine.architecture.speech import (
    SPEECH_ARCHITECTURES,
    SPEECH_FAMILIES,
    speech_blueprint,
)
from advisor.engine.architecture.ssm import jamba_blueprint, mamba2_blueprint, mamba_blueprint
from advisor.engine.architecture.vision import (
    VISION_ARCHITECTURES,
    VISION_ENCODERS,
    VISION_REFUSED,
)
from advisor.engine.architecture.vlm import (
    idefics2_blueprint,
    idefics3_blueprint,
    internvl_blueprint,
    llava_blueprint,
    paligemma_blueprint,
)
from advisor.engine.errors import ConfigError

Reader = Callable[[Config, str], b.Blueprint]

REGISTRY: dict[str, Reader] = {
    **{name: partial(decoder_blueprint, spec=spec) for name, spec in DECODERS.items()},
    **{name: partial(encoder_blueprint, spec=spec) for name, spec in ENCODERS.items()},
    "vit": vit_blueprint,
    "t5": t5_blueprint,
    "mt5": t5_blueprint,
    "umt5": t5_blueprint,
    "bart": bart_blueprint,
    "mbart": bart_blueprint,
    "whisper": bart_blueprint,
    "gemma3": gemma3_blueprint,
    "qwen2_vl": qwen_vl_blueprint,
    "qwen2_5_vl": qwen_vl_blueprint,
    "qwen3_vl": qwen_vl_blueprint,
    "qwen3_vl_moe": qwen_vl_blueprint,
    "qwen3_5": qwen_vl_blueprint,
    "qwen3_5_moe": qwen_vl_blueprint,
    "llama4": llama4_blueprint,
    "gemma4": gemma4_blueprint,
    "gemma4_text": gemma4_blueprint,
    "gemma3n": gemma3n_blueprint,
    "gemma3n_text": gemma3n_blueprint,
    "mistral3": mistral3_blueprint,
    "glm4v": glm4v_blueprint,
    "glm4v_moe": glm4v_blueprint,
    "glm46v": glm4v_blueprint,
    "qwen2_audio": qwen2_audio_blueprint,
    "llava": llava_blueprint,
    "llava_next": llava_blueprint,
    "llava_onevision": llava_blueprint,
    "paligemma": paligemma_blueprint,
    "idefics3": idefics3_blueprint,
    "smolvlm": idefics3_blueprint,
    "internvl": internvl_blueprint,
    "idefics2": idefics2_blueprint,
    "blip-2": blip2_blueprint,
    "instructblip": blip2_blueprint,
    "mllama": mllama_blueprint,
    "mllama_text_model": mllama_blueprint,
    "clip": dual_encoder_blueprint,
    "siglip": dual_encoder_blueprint,
    "siglip2": dual_encoder_blueprint,
    "fuyu": fuyu_blueprint,
    "granitemoehybrid": granitemoehybrid_blueprint,
    "nemotron_h": nemotron_h_blueprint,
    "falcon_h1": falcon_h1_blueprint,
    "lfm2": lfm2_blueprint,
    "mamba": mamba_blueprint,
    "falcon_mamba": mamba_blueprint,
    "mamba2": mamba2_blueprint,
    "jamba": jamba_blueprint,
    "qwen2_5_omni": qwen2_5_omni_blueprint,
    "qwen2_5_omni_thinker": qwen2_5_omni_blueprint,
    "qwen3_omni_moe": qwen3_omni_moe_blueprint,
    "qwen3_omni_moe_thinker": qwen3_omni_moe_blueprint,
    "recurrent_gemma": recurrent_gemma_blueprint,
    "bamba": bamba_blueprint,
    "zamba": zamba_refused,
    "zamba2": zamba_refused,
    **MODERN_ENCODERS,
    **VISION_ENCODERS,
    **dict.fromkeys(SEQ2SEQ, seq2seq_blueprint),
    **dict.fromkeys(SPEECH_FAMILIES, speech_blueprint),
}
# Families reported under another name than their model_type.
_LABEL = {"mt5": "t5"}

# architectures[0] -> model_type, for configs without (or with an unknown) model_type.
ARCHITECTURES = {
    "GPT2LMHeadModel": "gpt2",
    "GPT2Model": "gpt2",
    "OpenAIGPTLMHeadModel": "openai-gpt",
    "OpenAIGPTModel": "openai-gpt",
    "GPTBigCodeForCausalLM": "gpt_bigcode",
    "MPTForCausalLM": "mpt",
    "MptForCausalLM": "mpt",
    "BertModel": "bert",
    "BertForMaskedLM": "bert",
    "BertForPreTraining": "bert",
    "RobertaModel": "roberta",
    "RobertaForMaskedLM": "roberta",
    "DistilBertModel": "distilbert",
    "DistilBertForMaskedLM": "distilbert",
    "T5ForConditionalGeneration": "t5",
    "T5Model": "t5",
    "BartForConditionalGeneration": "bart",
    "BartModel": "bart",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "GraniteForCausalLM": "granite",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma4ForConditionalGeneration": "gemma4",
    "Gemma4ForCausalLM": "gemma4_text",
    "Gemma3nForConditionalGeneration": "gemma3n",
    "Gemma3nForCausalLM": "gemma3n_text",
    "Qwen2VLForConditionalGeneration": "qwen2_vl",
    "Qwen2_5_VLForConditionalGeneration": "qwen2_5_vl",
    "Qwen3VLForConditionalGeneration": "qwen3_vl",
    "Qwen3VLMoeForConditionalGeneration": "qwen3_vl_moe",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "Qwen3NextForCausalLM": "qwen3_next",
    "Llama4ForConditionalGeneration": "llama4",
    "Llama4ForCausalLM": "llama4_text",
    "OlmoForCausalLM": "olmo",
    "Olmo2ForCausalLM": "olmo2",
    "PhiForCausalLM": "phi",
    "Phi3ForCausalLM": "phi3",
    "PhiMoEForCausalLM": "phimoe",
    "MixtralForCausalLM": "mixtral",
    "GptOssForCausalLM": "gpt_oss",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "FalconForCausalLM": "falcon",
    "RWForCausalLM": "RefinedWebModel",
    "GPTNeoXForCausalLM": "gpt_neox",
    "GPTJForCausalLM": "gptj",
    "OPTForCausalLM": "opt",
    "BloomForCausalLM": "bloom",
    "ViTModel": "vit",
    "ViTForImageClassification": "vit",
    "WhisperForConditionalGeneration": "whisper",
    "Glm4MoeForCausalLM": "glm4_moe",
    "Mistral3ForConditionalGeneration": "mistral3",
    "Ministral3ForCausalLM": "ministral3",
    "Glm4vForConditionalGeneration": "glm4v",
    "Glm4vMoeForConditionalGeneration": "glm4v_moe",
    "Glm46VForConditionalGeneration": "glm46v",
    "Qwen2AudioForConditionalGeneration": "qwen2_audio",
    "LlavaForConditionalGeneration": "llava",
    "LlavaNextForConditionalGeneration": "llava_next",
    "LlavaOnevisionForConditionalGeneration": "llava_onevision",
    "PaliGemmaForConditionalGeneration": "paligemma",
    "Idefics3ForConditionalGeneration": "idefics3",
    "SmolVLMForConditionalGeneration": "smolvlm",
    "InternVLForConditionalGeneration": "internvl",
    "Idefics2ForConditionalGeneration": "idefics2",
    "Blip2ForConditionalGeneration": "blip-2",
    "InstructBlipForConditionalGeneration": "instructblip",
    "MllamaForConditionalGeneration": "mllama",
    "MllamaForCausalLM": "mllama_text_model",
    "CLIPModel": "clip",
    "SiglipModel": "siglip",
    "Siglip2Model": "siglip2",
    "MiniMaxM2ForCausalLM": "minimax_m2",
    "HunYuanMoEV1ForCausalLM": "hunyuan_v1_moe",
    "SmolLM3ForCausalLM": "smollm3",
    "Olmo3ForCausalLM": "olmo3",
    "Ernie4_5_MoeForCausalLM": "ernie4_5_moe",
    "SeedOssForCausalLM": "seed_oss",
    "GraniteMoeHybridForCausalLM": "granitemoehybrid",
    "NemotronHForCausalLM": "nemotron_h",
    "FalconH1ForCausalLM": "falcon_h1",
    "Lfm2ForCausalLM": "lfm2",
    "MambaForCausalLM": "mamba",
    "FalconMambaForCausalLM": "falcon_mamba",
    "Mamba2ForCausalLM": "mamba2",
    "JambaForCausalLM": "jamba",
    "RecurrentGemmaForCausalLM": "recurrent_gemma",
    "BambaForCausalLM": "bamba",
    "ZambaForCausalLM": "zamba",
    "Zamba2ForCausalLM": "zamba2",
    "Exaone4ForCausalLM": "exaone4",
    "ApertusForCausalLM": "apertus",
    "Starcoder2ForCausalLM": "starcoder2",
    "GPTNeoForCausalLM": "gpt_neo",
    "CohereForCausalLM": "cohere",
    "Cohere2ForCausalLM": "cohere2",
    "OlmoeForCausalLM": "olmoe",
    "StableLmForCausalLM": "stablelm",
    "Glm4ForCausalLM": "glm4",
    "GlmForCausalLM": "glm",
    "GraniteMoeForCausalLM": "granitemoe",
    "HunYuanDenseV1ForCausalLM": "hunyuan_v1_dense",
    "BioGptForCausalLM": "biogpt",
    "CodeGenForCausalLM": "codegen",
    "XGLMForCausalLM": "xglm",
    "DbrxForCausalLM": "dbrx",
    "PersimmonForCausalLM": "persimmon",
    "FuyuForCausalLM": "fuyu",
    **MODERN_ARCHITECTURES,
    **VISION_ARCHITECTURES,
    **SEQ2SEQ_ARCHITECTURES,
    **SPEECH_ARCHITECTURES,
    "CamembertModel": "camembert",
    "CamembertForMaskedLM": "camembert",
    "MPNetModel": "mpnet",
    "MPNetForMaskedLM": "mpnet",
    "LongformerModel": "longformer",
    "LongformerForMaskedLM": "longformer",
    "Qwen2_5OmniModel": "qwen2_5_omni",
    "Qwen2_5OmniForConditionalGeneration": "qwen2_5_omni",
    "Qwen2_5OmniThinkerForConditionalGeneration": "qwen2_5_omni_thinker",
    "Qwen3OmniMoeForConditionalGeneration": "qwen3_omni_moe",
    "Qwen3OmniMoeThinkerForConditionalGeneration": "qwen3_omni_moe_thinker",
}


def supported_model_types() -> list[str]:
    return sorted(
        name
        for name in REGISTRY
        if name not in REFUSED_FAMILIES | VISION_REFUSED | RECURRENT_REFUSED
    )


def known_families() -> list[str]:
    """The family names a researcher would recognise (model_type spellings, no aliases), less
    those registered only to be refused with their own reason (ALBERT)."""
    return sorted(
        name
        for name in REGISTRY
        if not name.startswith("Refined")
        and name not in REFUSED_FAMILIES | VISION_REFUSED | RECURRENT_REFUSED
    )


def family_of(c: Config) -> str | None:
    model_type = c.model_type()
    if model_type in REGISTRY:
        return model_type
    architecture = c.architecture()
    if architecture in ARCHITECTURES:
        return ARCHITECTURES[architecture]
    return None


def runs_remote_code(c: Config) -> bool:
    """Whether loading the model runs its repository's code rather than transformers' own.

    `auto_map` names the repository's class; transformers prefers its own class when it has
    one for the config (AutoModel.from_pretrained: `has_local_code` wins unless the caller
    passes trust_remote_code=True), so a config whose architecture is a transformers class
    (Phi-2's later configs keep an auto_map beside PhiForCausalLM) runs transformers' code.
    Qwen-7B (architectures QWenLMHeadModel, auto_map modeling_qwen.QWenLMHeadModel) runs its own.
    """
    remote = c.remote_model_class()
    return remote is not None and c.architecture() not in ARCHITECTURES


def unknown_family_error(c: Config) -> ConfigError:
    component = c.raw.get("_class_name")
    if not c.model_type() and "_diffusers_version" in c.raw and isinstance(component, str):
        # A diffusers pipeline's component (a UNet, a VAE, a DiT): no transformers family.
        return ConfigError(
            f"This is a diffusers model component ({component[:60]}), not a transformers "
            "config: the estimator counts transformers families only. Enter the parameter "
            "count from the model card instead (Stable Diffusion XL's UNet has 2.6 billion).",
            field="model_type",
        )
    model_type = c.model_type()
    what = f"model_type '{model_type}'" if model_type else "a config without a model_type"
    architecture = c.architecture()
    if architecture:
        what += f" ({architecture})"
    return ConfigError(
        f"The estimator cannot count {what}: it counts only the families it knows exactly "
        f"({', '.join(known_families())}), and counting it as another family would give a "
        "wrong size. Enter the parameter count from the model card instead.",
        field="model_type",
    )


def architecture_from_config(config: dict) -> ModelArchitecture:
    """Shape and exact parameter count from a Hugging Face config.json (as a dict).

    Raises ConfigError (naming the field) when the config is not one, a field is malformed or
    beyond any real model, or the family is not one the engine counts.
    """
    c = Config(config)
    model_type = family_of(c)
    if model_type is not None:
        blueprint = REGISTRY[model_type](c, model_type)
        if model_type in _LABEL:
            blueprint.family = _LABEL[model_type]
        arch = b.assemble(c, blueprint)
        return arch.model_copy(update={"remote_code": True}) if runs_remote_code(c) else arch
    text_config = c.raw.get("text_config")
    if isinstance(text_config, dict) and text_config:
        inner = architecture_from_config(
            {"architectures": c.raw.get("architectures"), **text_config}
        )
        return inner.model_copy(
            update={
                "exact": False,
                "notes": [
                    *inner.notes,
                    "Only the language model inside this multimodal config is "
                    "counted; its vision/audio encoder is not.",
                ],
            }
        )
    raise unknown_family_error(c)
