"""A model that runs its repository's own code (config.json `auto_map`), and libraries that cast
the model instead of running autocast: what each changes in memory, and what the result says."""

from dataclasses import replace

from advisor.engine import estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.architecture.hub import architecture_from_hub
from advisor.engine.memory_terms import kv_cache_bytes, logits_bytes
from advisor.engine.models import EstimateRequest, HubModelMetadata
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config
from tests.engine.test_memory import workload

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")
PHI2 = config("microsoft__phi-2")
# Qwen-7B's block is Llama-2-7B's with a 151,936-token vocabulary; its config names its own
# class and code (huggingface.co/Qwen/Qwen-7B config.json).
QWEN_7B_AS_LLAMA = {
    **LLAMA2_7B,
    "vocab_size": 151936,
    "architectures": ["QWenLMHeadModel"],
    "auto_map": {
        "AutoConfig": "configuration_qwen.QWenConfig",
        "AutoModelForCausalLM": "modeling_qwen.QWenLMHeadModel",
    },
}


def test_a_config_whose_auto_map_names_a_class_transformers_lacks_runs_remote_code():
    assert architecture_from_config(QWEN_7B_AS_LLAMA).remote_code is True
    assert architecture_from_config(LLAMA2_7B).remote_code is False


def test_an_auto_map_beside_a_transformers_class_runs_transformers_code():
    # Phi-2's config keeps auto_map next to PhiForCausalLM: transformers uses its own class.
    assert "auto_map" in PHI2
    assert architecture_from_config(PHI2).remote_code is False


def test_the_hub_mapping_carries_the_remote_code_flag():
    metadata = HubModelMetadata(repo_id="Qwen/Qwen-7B", config=QWEN_7B_AS_LLAMA)
    assert architecture_from_hub(metadata).remote_code is True


def _qwen_shape():
    return shape_from_architecture(architecture_from_config(QWEN_7B_AS_LLAMA))


def test_generate_with_remote_code_holds_two_kv_caches():
    """Old tuple cache + the torch.cat'ed new one: twice what DynamicCache holds."""
    remote = _qwen_shape()
    native = replace(remote, remote_code=False)
    wl = workload(batch_size=32, seq_len=8, new_tokens=1024)
    one_cache = 32 * (8 + 1024) * 2 * 4096 * 32 * 2  # layers x tokens x K,V x width x batch x 2 B
    assert kv_cache_bytes(native, wl) == one_cache
    assert kv_cache_bytes(remote, wl) == 2 * one_cache
    # vLLM's paged cache and a forward without generation keep one.
    assert kv_cache_bytes(remote, replace(wl, decode_framework="vllm")) == one_cache
    assert kv_cache_bytes(remote, replace(wl, new_tokens=0)) == one_cache / (8 + 1024) * 8


def test_remote_code_loss_is_16_bit_without_autocast_and_fp32_under_it():
    remote = _qwen_shape()
    entries = 2048 * 151936
    cast_by_library = workload(task="lora", seq_len=2048, framework_autocast=False)
    under_autocast = workload(task="lora", seq_len=2048)
    # The backward of cross_entropy holds three tensors of the loss's dtype at once (saved
    # log-softmax, its gradient, the logits' gradient): 16-bit in Qwen's own code without
    # autocast, fp32 under autocast or where transformers' heads call .float().
    assert logits_bytes(remote, cast_by_library) == entries * 3 * 2
    assert logits_bytes(remote, under_autocast) == entries * 3 * 4
    assert logits_bytes(replace(remote, remote_code=False), cast_by_library) == entries * 3 * 4


def test_deepspeed_and_megatron_mixed_precision_is_not_autocast():
    shape = _qwen_shape()
    for framework, autocast in (("deepspeed", False), ("megatron", False), ("hf_trainer", True)):
        request = EstimateRequest(
            config=LLAMA2_7B, task="full_finetune", precision="bf16", framework=framework
        )
        assert build_workload(request, shape).autocast is autocast, framework


def test_qwen_7b_generating_1024_tokens_at_batch_64_does_not_fit_80gb():
    """Qwen README (KV-cache quantisation table): batch 64 without KV quantisation runs out of
    memory on an A100 80GB, batch 32 peaks at 48.7 GiB."""
    result = estimate(
        EstimateRequest(
            config=QWEN_7B_AS_LLAMA,
            task="inference",
            precision="bf16",
            batch_size=64,
            seq_len=8,
            new_tokens=1024,
            num_gpus=1,
            framework="transformers",
        ),
        catalog(),
    )
    a100 = [o for o in result.options if o.num_gpus == 1 and o.accelerator == "a100-80-sxm4"]
    assert a100
    assert not any(o.fits for o in a100)
    assert all(o.memory.total_bytes > 80e9 for o in a100)
    names = [a.name for a in result.assumptions]
    assert "KV cache copies alive (tuple cache: model's own code, transformers <= 4.35)" in names


def _llama_generation(framework: str, batch: int = 16):
    return estimate(
        EstimateRequest(
            config=LLAMA2_7B,
            task="inference",
            precision="fp16",
            batch_size=batch,
            seq_len=512,
            new_tokens=512,
            num_gpus=1,
            framework=framework,
        ),
        catalog(),
    )


def test_transformers_before_4_36_keeps_two_kv_caches_and_says_so():
    """transformers 4.35's Llama rebuilt a tuple cache with torch.cat each step (optimum's
    GPTQ benchmark ran on it): the researcher who names that stack gets one more cache."""
    current, legacy = _llama_generation("transformers"), _llama_generation("transformers_legacy")
    one_cache = next(o for o in current.options if o.num_gpus == 1).memory.kv_cache
    two = next(o for o in legacy.options if o.num_gpus == 1).memory.kv_cache
    assert two == 2 * one_cache
    assert any("transformers 4.35 or older" in a.value for a in legacy.assumptions)
    assert not any("transformers 4.35 or older" in a.value for a in current.assumptions)
