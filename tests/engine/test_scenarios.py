"""What a practitioner would sign: researcher scenarios through POST /api/estimate on the default
catalog, each with the range an ML engineer accepts and the published figure behind it.

These are the tests a reviewer reads first. They assert memory, GPU counts and the recipe (the
knobs the engine turned); which system ranks first is the ranking's business and is asserted
only where any sensible ranking agrees.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from advisor import model_configs
from tests.engine.inputs import config

GB = 1e9
T4_REPORTED = 15_360 * 2**20  # what nvidia-smi shows of a T4's 16 GiB with ECC on


LLAMA3_8B = "meta-llama__Meta-Llama-3-8B"
LLAMA2_7B = "meta-llama__Llama-2-7b-hf"
LLAMA2_70B = "meta-llama__Llama-2-70b-hf"
MIXTRAL = "mistralai__Mixtral-8x7B-v0.1"
MISTRAL_7B = "mistralai__Mistral-7B-v0.1"
QWEN25_7B = "Qwen__Qwen2.5-7B"
BERT_BASE = "google-bert__bert-base-uncased"
BERT_LARGE = "google-bert__bert-large-uncased"
GPT2 = "openai-community__gpt2"
PHI2 = "microsoft__phi-2"


@pytest.fixture
def api(client, db):
    call_command("load_catalog", "default", stdout=io.StringIO())

    def post(model: str | None, **fields):
        body = {"config": config(model), **fields} if model else fields
        response = client.post(
            reverse("advisor:api-estimate"), data=json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 200, response.content[:500]
        return response.json()

    return post


def options_on(result: dict, accelerator: str) -> list[dict]:
    return [o for o in result["options"] if o["accelerator"] == accelerator and o["eligible"]]


def single(result: dict, accelerator: str) -> dict:
    """The one-GPU option on `accelerator` (the first system that has it)."""
    found = [o for o in options_on(result, accelerator) if o["num_gpus"] == 1]
    assert found, f"no eligible one-GPU option on {accelerator}"
    return found[0]


# --- QLoRA: the point of it is a small GPU -------------------------------------------------------


def test_qlora_8b_fits_one_16gb_t4_with_the_peft_recipe(api):
    """QLoRA paper (arXiv:2305.14314) and PEFT's prepare_model_for_kbit_training: 7-8B QLoRA
    runs on one consumer 24 GB card; torchtune's README measures 7.4 GiB peak for Llama 3 8B
    QLoRA. Through the Trainer and PEFT (fp32 embeddings and head after
    prepare_model_for_kbit_training), Unsloth's benchmark table reaches 932 tokens on a 12 GB
    card and 2,551 on a 16 GB one for Llama 3.1 8B. Practitioner's range at 1,024 tokens on a
    16 GB T4: one GPU, checkpointing on, 6-15 GB."""
    result = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        batch_size=4,
        seq_len=1024,
        tokens=50_000_000,
        accelerator="t4-16",
    )
    rec = result["recommendation"]
    assert rec is not None
    assert rec["accelerator"] == "t4-16"
    assert rec["num_gpus"] == 1
    assert 6 * GB <= rec["memory_per_gpu_bytes"] <= 15 * GB
    recipe = rec["recipe"]
    assert recipe["checkpointing"] == "full"
    assert recipe["micro_batch"] * recipe["grad_accumulation"] == 4
    assert any("checkpointing makes it fit" in r for r in rec["reasons"])


def test_qlora_8b_at_2048_tokens_is_at_the_edge_of_a_t4_under_the_trainer(api):
    """The same job at 2,048 tokens: Unsloth's table puts the Trainer's limit on a 16 GiB card
    at 2,551 tokens, about 2.65 MB a token, so 2,048 tokens need about 16 GB, all a T4 with ECC
    on (15,360 MiB) has: one T4 holds it without the 10 % margin, so the recommendation
    spreads it or says why."""
    result = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        batch_size=4,
        seq_len=2048,
        tokens=50_000_000,
        accelerator="t4-16",
    )
    one = single(result, "t4-16")
    assert 15 * GB <= one["memory_per_gpu_bytes"] <= T4_REPORTED
    assert one["fits"]
    assert not one["headroom"]


@pytest.mark.parametrize(
    ("framework", "low", "high"),
    [
        # TRL 1.7: no fp32 upcast and a chunked loss; LLaMA-Factory: no upcast, fp32 logits.
        ("trl", 9 * GB, 13 * GB),
        ("llama_factory", 10 * GB, 14 * GB),
    ],
)
def test_qlora_8b_at_2048_tokens_fits_a_t4_with_room_under_libraries_without_the_upcast(
    api, framework, low, high
):
    """The job above under libraries that keep the base's other parameters 16-bit: the
    residual stream is bf16, so the same 2,048 tokens leave a T4 the 10 % margin (the
    Trainer's fp32 stream is what takes it to the card's edge)."""
    result = api(
        LLAMA3_8B, task="qlora", precision="int4", batch_size=4, micro_batch=1, seq_len=2048,
        tokens=50_000_000, accelerator="t4-16", framework=framework,
    )  # fmt: skip
    one = single(result, "t4-16")
    assert low <= one["memory_per_gpu_bytes"] <= high
    assert one["headroom"]
    assert one["recipe"]["checkpointing"] == "full"


def test_the_result_names_the_phase_that_sets_the_peak(api):
    """A training estimate says which moment of the step sets its peak (issue 13): for QLoRA
    the end of the forward pass, where activations and logits are alive; accumulated
    micro-batches keep the adapters' gradients beside them."""
    result = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        batch_size=4,
        seq_len=2048,
        tokens=50_000_000,
        accelerator="t4-16",
    )
    rec = result["recommendation"]
    assert rec["memory"]["peak_phase"] == "forward"
    if rec["recipe"]["grad_accumulation"] > 1:
        assert rec["memory"]["gradients"] > 0
    peak = [a for a in result["assumptions"] if a["name"] == "Peak of a step"]
    assert peak
    assert "end of the forward pass" in peak[0]["value"]


def test_qlora_8b_needs_one_gpu_wherever_it_runs(api):
    """Every eligible GPU in the catalog with 24 GB or more runs 8B QLoRA at batch 4 x 2048 on
    one GPU (engine 1.1 asked for 98-100 GiB and a 128 GB Max 1550)."""
    result = api(LLAMA3_8B, task="qlora", precision="int4", batch_size=4, tokens=50_000_000)
    assert result["recommendation"]["num_gpus"] == 1
    for accelerator in ("a100-40-sxm4", "a100-80-sxm4", "h100-80-sxm5", "gh200-96"):
        option = single(result, accelerator)
        assert option["fits"], accelerator
        assert option["headroom"], accelerator


def test_qlora_70b_fits_one_80gb_gpu(api):
    """QLoRA paper abstract: 65B fine-tuned on a single 48 GB GPU (paged optimizer, ~512-token
    sequences). At 2048 tokens with PEFT's checkpointing a practitioner expects one 80 GB GPU,
    40-65 GB used (engine 1.1 asked for 64 GPUs)."""
    result = api(LLAMA2_70B, task="qlora", precision="int4", batch_size=1, tokens=10_000_000)
    assert result["recommendation"]["num_gpus"] == 1
    option = single(result, "a100-80-sxm4")
    assert option["fits"]
    assert 40 * GB <= option["memory_per_gpu_bytes"] <= 65 * GB
    assert option["recipe"]["checkpointing"] == "full"


def test_qlora_65b_at_the_papers_settings_fits_48gb(api):
    """QLoRA paper, scripts/finetune_guanaco_65b.sh: batch 4, ~528 tokens (source 16 + target
    512), r=64 on every linear layer, dropout 0.05, checkpointing, paged AdamW: fits 48 GB."""
    result = api(
        LLAMA2_70B,
        task="qlora",
        precision="int4",
        batch_size=4,
        seq_len=528,
        lora_rank=64,
        lora_dropout=0.05,
        gradient_checkpointing=True,
        optimizer="paged_adamw",
        # qlora.py casts the LoRA layers to bf16 under --bf16: no fp32 adapter copies.
        mixed_precision=False,
        tokens=10_000_000,
    )
    option = single(result, "a100-80-sxm4")
    assert option["memory_per_gpu_bytes"] <= 48 * GB * 1.05


def test_pinned_no_checkpointing_is_never_changed(api):
    """A knob the researcher pins stays pinned: without checkpointing the engine finds room
    with the micro-batch and accumulation instead, or says it does not fit."""
    result = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        batch_size=8,
        tokens=50_000_000,
        gradient_checkpointing=False,
    )
    assert {o["recipe"]["checkpointing"] for o in result["options"]} == {"none"}
    rec = result["recommendation"]
    assert rec["recipe"]["micro_batch"] * rec["recipe"]["grad_accumulation"] == 8


# --- LoRA and full fine-tuning -------------------------------------------------------------------


def test_lora_7b_batch_4_fits_one_a100_40gb(api):
    """PEFT README: LoRA of 7B-class models trains on one consumer GPU; LitGPT measures 21.3 GB
    for Llama 2 7B LoRA at micro-batch 1 (resource tables). Batch 4 x 2048 on an A100 40GB:
    a practitioner uses a smaller micro-batch with accumulation or checkpointing (engine 1.1
    said 81 GB and never applied either)."""
    result = api(LLAMA2_7B, task="lora", batch_size=4, seq_len=2048, tokens=20_000_000)
    option = single(result, "a100-40-sxm4")
    assert option["fits"]
    assert option["memory_per_gpu_bytes"] <= 40 * GB
    recipe = option["recipe"]
    assert recipe["micro_batch"] < 4 or recipe["checkpointing"] != "none"
    assert recipe["micro_batch"] * recipe["grad_accumulation"] == 4


def test_pinned_micro_batch_is_kept(api):
    """A pinned micro-batch is never changed, whatever it costs."""
    result = api(LLAMA2_7B, task="lora", batch_size=16, micro_batch=8, tokens=20_000_000)
    for option in result["options"]:
        assert option["recipe"]["micro_batch"] == 8


def test_full_finetune_7b_with_adamw_needs_more_than_one_80gb_gpu(api):
    """HF 'Model training anatomy': mixed-precision AdamW keeps 18 bytes per parameter, 121 GB
    for a 6.7B model before activations; ZeRO paper section 3.1: 16 bytes. With AdamW pinned
    no 80 GB GPU holds it alone."""
    result = api(LLAMA2_7B, task="full_finetune", batch_size=64, optimizer="adamw", tokens=10**9)
    for option in options_on(result, "a100-80-sxm4"):
        if option["fits"]:
            assert option["num_gpus"] >= 2
            assert option["strategy"] in ("zero2", "zero3", "fsdp", "zero3_offload")


def test_full_finetune_7b_global_batch_is_split_into_accumulation(api):
    """The researcher's batch is the global batch: 64 sequences of 2048 tokens never sit on
    one GPU at once; micro-batch x accumulation x data-parallel GPUs makes up 64."""
    result = api(LLAMA2_7B, task="full_finetune", batch_size=64, tokens=10**9)
    rec = result["recommendation"]
    recipe = rec["recipe"]
    data_parallel = 1 if rec["strategy"] in ("single", "tensor_parallel") else rec["num_gpus"]
    assert recipe["micro_batch"] * recipe["grad_accumulation"] * data_parallel == 64
    assert recipe["micro_batch"] <= 8
    assert rec["memory_per_gpu_bytes"] <= rec["capacity_bytes"] / 1.1


def test_gpt2_pretraining_accumulates_like_nanogpt(api):
    """karpathy/nanoGPT train_gpt2 config: GPT-2 124M on 8 x A100 40GB with micro-batch 12 and
    40 accumulation steps (global batch about 480 sequences of 1024 tokens). The engine must
    split 480 sequences into micro-batches that fit 40 GB."""
    result = api(
        GPT2,
        task="pretrain",
        batch_size=480,
        seq_len=1024,
        tokens=10**9,
        accelerator="a100-40-sxm4",
    )
    rec = result["recommendation"]
    recipe = rec["recipe"]
    assert rec["memory_per_gpu_bytes"] <= 40 * GB
    assert recipe["grad_accumulation"] > 1
    assert 4 <= recipe["micro_batch"] <= 120


def test_bert_base_finetuning_needs_a_few_gb(api):
    """HF Trainer fine-tuning of BERT-base (110M) at batch 32 x 128 in fp16 takes a few GB
    (run_glue defaults; HF 'Model training anatomy' measures 14.9 GB for BERT-large at batch 4
    x 512 in fp32): one GPU, 2-8 GB, no accumulation or checkpointing needed."""
    result = api(BERT_BASE, task="full_finetune", precision="fp16", batch_size=32, seq_len=128)
    rec = result["recommendation"]
    assert rec["num_gpus"] == 1
    assert 2 * GB <= rec["memory_per_gpu_bytes"] <= 8 * GB
    assert rec["recipe"]["micro_batch"] == 32
    assert rec["recipe"]["checkpointing"] == "none"


def test_bert_large_fp32_batch_4_on_a_16gb_v100(api):
    """HF 'Model training anatomy': BERT-large, fp32, batch 4 x 512 on a V100 16GB shows 14,949
    MiB in nvidia-smi (15.7 GB). On the catalog's V100 16GB: one GPU, 14-17 GB with nothing
    changed, so a 16 GB card needs a smaller micro-batch or checkpointing."""
    result = api(
        BERT_LARGE,
        task="full_finetune",
        precision="fp32",
        mixed_precision=False,
        batch_size=4,
        seq_len=512,
        flash_attention=False,
        gradient_checkpointing=False,
        optimizer="adamw",
        micro_batch=4,
        accelerator="v100-16-pcie",
    )
    option = next(
        o for o in result["options"] if o["accelerator"] == "v100-16-pcie" and o["num_gpus"] == 1
    )
    assert 14 * GB <= option["memory_per_gpu_bytes"] <= 17.5 * GB
    # A V100's PyTorch 1.x stack zeroed gradients in place: they coexist with activations.
    assert option["memory"]["peak_phase"] == "forward"
    assert option["memory"]["gradients"] >= 1.3 * GB


# --- Inference -----------------------------------------------------------------------------------


def test_llama2_7b_bf16_inference_fits_one_gpu(api):
    """LitGPT resource tables: Llama 2 7B bf16 generation peaks at 13.52 GB on an A100: one
    GPU, 13-18 GB."""
    result = api(LLAMA2_7B, task="inference", batch_size=1, tokens=10_000_000)
    rec = result["recommendation"]
    assert rec["num_gpus"] == 1
    assert 13 * GB <= rec["memory_per_gpu_bytes"] <= 18 * GB


def test_gpt_oss_120b_is_served_on_one_80gb_gpu(api):
    """OpenAI's model card: 'gpt-oss-120b runs on a single 80GB GPU' (its experts in MXFP4);
    vLLM's recipe: it fits a single A100 (80GB). A researcher who says nothing of precision
    gets the checkpoint as published. (The recommendation may spread a batch job over two:
    test_a_server_short_of_kv_cache_takes_more_gpus_where_they_pay.)"""
    body = {"config": model_configs.find_bundled("openai/gpt-oss-120b").config}
    result = api(None, **body, task="inference", framework="vllm", tokens=10_000_000)
    for accelerator in ("a100-80-sxm4", "h100-80-sxm5"):
        alone = single(result, accelerator)
        assert alone["fits"]
        assert alone["headroom"]
        assert 60 * GB <= alone["memory"]["weights"] + alone["memory"]["quantization"] <= 70 * GB
    assert result["recommendation"]["num_gpus"] <= 2


def test_mixtral_bf16_needs_more_than_one_80gb_gpu(api):
    """Mixtral-8x7B has 46.7B parameters, 93 GB in bf16 (Mistral AI's model card): no 80 GB GPU
    holds it alone."""
    result = api(MIXTRAL, task="inference", batch_size=1, tokens=10_000_000)
    # On one GPU the weights alone are 93 GB. (The recommendation itself may split them: since
    # issue 14 it is the cheapest option that fits, often two smaller GPUs.)
    single = [o for o in result["options"] if o["num_gpus"] == 1 and o["memory"]]
    assert single
    assert all(o["memory"]["weights"] >= 90 * GB for o in single)
    for accelerator in ("a100-80-sxm4", "h100-80-sxm5"):
        for option in options_on(result, accelerator):
            if option["fits"]:
                assert option["num_gpus"] >= 2


def test_llama2_70b_bf16_inference_needs_two_or_more_80gb_gpus(api):
    """Llama 2 70B in bf16 is 138 GB of weights (model card: 70B parameters): at least two
    80 GB GPUs with tensor parallelism."""
    result = api(LLAMA2_70B, task="inference", batch_size=1, tokens=10_000_000)
    rec = result["recommendation"]
    assert rec["num_gpus"] >= 2 or rec["accelerator"] == "h200-141-sxm"
    fits_on_80 = [o for o in options_on(result, "a100-80-sxm4") if o["fits"]]
    assert fits_on_80
    assert min(o["num_gpus"] for o in fits_on_80) >= 2


def _llama_405b(api, **fields) -> dict:
    from advisor.model_configs import find_bundled

    body = {"config": find_bundled("meta-llama/Llama-3.1-405B").config, **fields}
    return api(None, **body)


def test_llama31_405b_fp8_serves_from_one_8_gpu_80gb_node_with_vllm(api):
    """vLLM's Llama 3.1 launch post (blog.vllm.ai, 2024-07-23): 'vLLM runs the official FP8
    quantized model natively on 8xA100 or 8xH100' (A100s through the FP8 Marlin kernel)."""
    result = _llama_405b(api, task="inference", precision="fp8", framework="vllm", tokens=10**8)
    for accelerator in ("a100-80-sxm4", "h100-80-sxm5"):
        fitting = [o for o in options_on(result, accelerator) if o["fits"]]
        assert fitting, accelerator
        assert min(o["num_gpus"] for o in fitting) == 8
        assert min(o["nodes"] for o in fitting) == 1


def test_llama31_405b_bf16_needs_h200s_or_several_nodes(api):
    """The same post: the BF16 model runs on one 8 x H200 (141 GB) machine, or over several
    nodes with pipeline parallelism; 810 GB of weights do not fit one node of 8 x 80 GB."""
    result = _llama_405b(api, task="inference", framework="vllm", tokens=10**8)
    h200 = [o for o in options_on(result, "h200-141-sxm") if o["fits"]]
    assert h200
    assert min(o["num_gpus"] for o in h200) == 8
    h100 = [o for o in options_on(result, "h100-80-sxm5") if o["fits"]]
    assert h100
    assert min(o["nodes"] for o in h100) >= 2


def test_vllm_says_what_it_reserves_and_what_the_model_needs(api):
    """vLLM's gpu_memory_utilization (default 0.9) reserves 90 % of each GPU at start-up: the
    result must say what nvidia-smi will show and what the model needs."""
    result = api(LLAMA2_7B, task="inference", framework="vllm", tokens=10_000_000, system="stanage")
    assert result["framework"]["key"] == "vllm"
    assert not result["framework"]["assumed"]
    rec = result["recommendation"]
    assert any("nvidia-smi" in r and "90%" in r for r in rec["reasons"])
    assert "--gpu-memory-utilization 0.9" in result["slurm_script"]


# --- Frameworks ----------------------------------------------------------------------------------


def test_not_sure_assumes_the_hf_trainer_and_says_so(api):
    result = api(LLAMA2_7B, task="lora", framework="not_sure", tokens=20_000_000)
    assert result["framework"]["key"] == "hf_trainer"
    assert result["framework"]["assumed"] is True
    assert any(
        a["name"] == "Library" and "did not say" in a["value"] for a in result["assumptions"]
    )
    inference = api(LLAMA2_7B, task="inference", tokens=10_000_000)
    assert inference["framework"]["key"] == "transformers"
    assert inference["framework"]["assumed"] is True


def test_torchtune_qlora_8b_memory_matches_its_readme(api):
    """torchtune README (memory table): Llama 3 8B QLoRA, batch 2, activation checkpointing, pure
    bf16, chunked cross-entropy: about 7.4 GiB peak. Accepted: 6-12 GB on one GPU."""
    result = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        framework="torchtune",
        batch_size=2,
        seq_len=2048,
        lora_rank=8,
        lora_dropout=0,
        gradient_checkpointing=True,
        tokens=10_000_000,
    )
    option = single(result, "a100-80-sxm4")
    assert option["recipe"]["checkpointing"] == "full"
    assert 6 * GB <= option["memory_per_gpu_bytes"] <= 12 * GB
    # torchtune's chunked loss keeps far fewer logit bytes than the HF Trainer's fp32 upcast.
    hf = api(
        LLAMA3_8B,
        task="qlora",
        precision="int4",
        batch_size=2,
        seq_len=2048,
        lora_rank=8,
        lora_dropout=0,
        gradient_checkpointing=True,
        tokens=10_000_000,
    )
    assert option["memory"]["logits"] < single(hf, "a100-80-sxm4")["memory"]["logits"] / 2


def test_unsloth_qwen_7b_qlora_fits_a_t4(api):
    """Unsloth README: Qwen2.5 7B QLoRA in its free Colab notebooks on a 16 GB T4 (its offloaded
    'unsloth' checkpointing keeps layer inputs in CPU memory)."""
    result = api(
        QWEN25_7B,
        task="qlora",
        precision="int4",
        framework="unsloth",
        batch_size=8,
        seq_len=2048,
        tokens=10_000_000,
        accelerator="t4-16",
    )
    rec = result["recommendation"]
    assert rec is not None
    assert rec["num_gpus"] == 1
    assert rec["memory_per_gpu_bytes"] <= T4_REPORTED / 1.1  # with the 10 % margin


def test_unknown_framework_is_a_400_naming_the_field(client, db):
    response = client.post(
        reverse("advisor:api-estimate"),
        data=json.dumps({"params": 7_000_000_000, "task": "lora", "framework": "jax"}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "framework"


@pytest.mark.parametrize(
    ("task", "framework", "said"),
    [
        ("lora", "vllm", "vLLM is an inference library; for lora choose one of: not_sure, "),
        ("inference", "llama_factory", "LLaMA-Factory is a training library; for inference "),
        ("inference", "trl", "TRL 1.7 or newer (SFTTrainer, DPOTrainer) is a training library"),
    ],
)
def test_a_library_of_the_other_kind_is_a_400(client, db, task, framework, said):
    response = client.post(
        reverse("advisor:api-estimate"),
        data=json.dumps({"params": 7_000_000_000, "task": task, "framework": framework}),
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "framework"
    assert error["message"].startswith(said)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task": "inference", "training_objective": "dpo"}, "training_objective"),
        ({"task": "lora", "training_objective": "ppo"}, "training_objective"),
        ({"task": "lora", "training_objective": "grpo", "framework": "torchtune"}, "framework"),
        ({"config": config(BERT_BASE), "task": "lora", "training_objective": "dpo"},
         "training_objective"),
    ],
)  # fmt: skip
def test_a_preference_objective_the_job_cannot_have_is_a_400(client, db, body, field):
    body = {"params": 7_000_000_000, **body} if "config" not in body else body
    response = client.post(
        reverse("advisor:api-estimate"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_sbatch_script_applies_the_recipe(api):
    """The script a researcher copies runs the recipe the estimate assumed."""
    result = api(
        LLAMA2_7B, task="lora", batch_size=4, tokens=20_000_000, accelerator="a100-40-sxm4"
    )
    recipe = result["recommendation"]["recipe"]
    script = result["slurm_script"]
    assert f"--per_device_train_batch_size {recipe['micro_batch']}" in script
    assert f"--gradient_accumulation_steps {recipe['grad_accumulation']}" in script
    assert ("--gradient_checkpointing" in script) == (recipe["checkpointing"] != "none")
    assert "Library assumed: Hugging Face Transformers Trainer" in script


@pytest.mark.parametrize(
    ("framework", "setting"),
    [
        (None, "prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)"),
        ("unsloth", "use_gradient_checkpointing=False"),
        ("axolotl", "gradient_checkpointing: false"),
        ("llama_factory", "disable_gradient_checkpointing=true"),
        ("trl", "--gradient_checkpointing False"),
    ],
)
def test_a_qlora_script_without_checkpointing_turns_the_librarys_default_off(
    api, framework, setting
):
    """PEFT's prepare_model_for_kbit_training, Unsloth, Axolotl, LLaMA-Factory and TRL checkpoint
    QLoRA by default: where the recipe runs without it (an 80 GB GPU holds 8B QLoRA at
    2 x 2,048), the script says how to turn it off, or the job runs slower than its estimate."""
    fields = {"framework": framework} if framework else {}
    result = api(
        LLAMA3_8B, task="qlora", precision="int4", batch_size=8, tokens=10_000_000,
        accelerator="a100-80-sxm4", **fields,
    )  # fmt: skip
    assert result["recommendation"]["recipe"]["checkpointing"] == "none"
    assert setting in result["slurm_script"]

    checkpointed = api(
        LLAMA3_8B, task="qlora", precision="int4", batch_size=8, tokens=10_000_000,
        accelerator="a100-80-sxm4", gradient_checkpointing=True, **fields,
    )  # fmt: skip
    assert checkpointed["recommendation"]["recipe"]["checkpointing"] == "full"
    assert setting not in checkpointed["slurm_script"]


def test_phi2_lora_fits_a_t4(api):
    """Phi-2 (2.7B) LoRA in fp16 is a common free-Colab T4 fine-tune: one 16 GB GPU."""
    result = api(
        PHI2,
        task="lora",
        precision="fp16",
        batch_size=8,
        seq_len=1024,
        tokens=10_000_000,
        accelerator="t4-16",
    )
    rec = result["recommendation"]
    assert rec is not None
    assert rec["num_gpus"] == 1
    assert rec["memory_per_gpu_bytes"] <= T4_REPORTED / 1.1  # with the 10 % margin


def test_mistral_sliding_window_bounds_the_kv_cache(api):
    """Mistral 7B paper (arXiv:2310.06825), 'Sliding Window Attention' and 'Rolling Buffer
    Cache': with a 4,096-token window the cache never holds more than 4,096 positions per layer,
    so 30,000-token prompts need the same KV cache as 4,096-token ones: 32 layers x 4,096 x 2
    x 8 KV heads x 128 x 2 bytes = 0.54 GB per sequence."""
    long = api(MISTRAL_7B, task="inference", seq_len=30_000, new_tokens=256, tokens=10**6)
    window = 32 * 4096 * 2 * 8 * 128 * 2
    assert long["memory"]["kv_cache"] == window
    full_context = api(
        "meta-llama__Llama-2-7b-hf", task="inference", seq_len=4000, new_tokens=96, tokens=10**6
    )
    assert full_context["memory"]["kv_cache"] == 32 * 4096 * 2 * 32 * 128 * 2


# --- Preference training ---------------------------------------------------------------------


def test_zephyr_dpo_of_a_7b_model_fits_the_recipes_eight_80gb_gpus(api):
    """alignment-handbook recipes/zephyr-7b-beta/dpo/config_full.yaml: full DPO of Mistral 7B
    in bf16 under DeepSpeed ZeRO-3, 8 pairs per GPU of up to 1,024 tokens, 2 accumulation
    steps, gradient checkpointing, on the 8 x 80 GB its README asks for. The policy's states,
    the sharded reference and 16 sequences' checkpointed activations per GPU: 20-70 GB."""
    result = api(
        MISTRAL_7B, task="full_finetune", training_objective="dpo", framework="trl",
        seq_len=1024, batch_size=128, micro_batch=8, gradient_checkpointing=True,
        strategy="zero3", num_gpus=8, tokens=10**8, accelerator="a100-80-sxm4",
    )  # fmt: skip
    rec = result["recommendation"]
    assert rec["num_gpus"] == 8
    assert rec["fits"]
    assert 20 * GB <= rec["memory_per_gpu_bytes"] <= 70 * GB
    objective = next(a for a in result["assumptions"] if a["name"] == "Training objective")
    assert "frozen copy of the model" in objective["value"]


def test_full_dpo_of_a_7b_model_needs_more_than_one_80gb_gpu(api):
    """Mixed-precision AdamW's 16-18 bytes per parameter and the reference's 2-4 more: about
    150 GB for 7B before activations. No 80 GB GPU holds it alone."""
    result = api(
        MISTRAL_7B, task="full_finetune", training_objective="dpo", optimizer="adamw",
        seq_len=1024, batch_size=64, tokens=10**8,
    )  # fmt: skip
    for option in options_on(result, "a100-80-sxm4"):
        if option["fits"]:
            assert option["num_gpus"] >= 2


def test_lora_dpo_of_a_7b_model_fits_one_24gb_class_budget(api):
    """Qwen2.5-7B LoRA DPO (rank 16, one pair of 2,048 tokens, 8 accumulation steps, gradient
    checkpointing, bf16, one GPU) peaked at 19.1 GB as reported in the odyn-network
    benchmark-finetune-dpo-v1 dataset (secondary; the measuring method is not stated). With
    TRL's DPOTrainer the reference is the same model without its adapter: 16-24 GB."""
    result = api(
        QWEN25_7B, task="lora", training_objective="dpo", framework="trl", lora_rank=16,
        seq_len=2048, batch_size=8, micro_batch=1, gradient_checkpointing=True,
        precision="bf16", tokens=10**7, accelerator="a100-80-sxm4", num_gpus=1,
    )  # fmt: skip
    rec = result["recommendation"]
    assert rec["num_gpus"] == 1
    assert 16 * GB <= rec["memory_per_gpu_bytes"] <= 24 * GB
