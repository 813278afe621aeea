"""The chart schema, loader and path walk: pure Python, no database."""

from __future__ import annotations

import pytest

from advisor.chart_diagram import chart_mermaid
from advisor.chart_walk import AnswerError, Decision, clean_answer, walk
from advisor.flowchart import FlowchartError, available_charts, load_chart, parse_chart
from tests.support.dates import iso_days_from_today

LORA_7B = {
    "work_kind": "lora",
    "model": None,
    "model_params": 7,
    "precision": "bf16",
    "framework_training": "not_sure",
    "training_objective": "not_sure",
    "batch_size": 4,
    "seq_len": 2048,
    "dataset_tokens": 20,
    "epochs": 3,
    "num_gpus": None,
    "project_plan": "suggested",
    "data_sensitivity": "public",
    "timeline": None,
    "hpc_experience": "some",
    "azure": "no",
    "notebooks": "no",
}


def decide(value):
    return lambda node, answers: Decision(value, f"decided {value}")


def test_every_shipped_chart_loads():
    assert available_charts() == ["default", "lancaster", "uva"]
    for key in available_charts():
        assert load_chart(key).key == key


@pytest.mark.parametrize(
    ("v100", "leaf"), [("yes", "hpc_v100"), ("no", "hpc_a100"), ("unknown", "hpc_a100")]
)
def test_default_routes_v100_question_by_hardware(v100, leaf):
    chart = load_chart("default")
    path = walk(chart, LORA_7B, decide(v100))
    assert path.outcome == leaf
    assert path.decisions["v100_sufficient"].value == v100


def test_default_keeps_the_turing_azure_branches():
    chart = load_chart("default")
    maybe = walk(chart, {**LORA_7B, "azure": "maybe"}, decide("no"))
    assert maybe.outcome == "azure_trial"
    core = walk(chart, {**LORA_7B, "azure": "yes", "who_pays": "core"}, decide("no"))
    assert core.outcome == "azure_full"
    project = walk(chart, {**LORA_7B, "azure": "yes", "who_pays": "project"}, decide("no"))
    assert project.outcome == "azure_brief"
    notebooks = walk(chart, {**LORA_7B, "notebooks": "yes"}, decide("no"))
    assert notebooks.outcome == "notebooks_leaf"


def test_no_leaf_of_the_default_chart_points_at_jade2():
    assert "jade2" not in load_chart("default").outcome_systems()


def test_walk_stops_at_the_first_unanswered_question():
    chart = load_chart("default")
    path = walk(chart, {"azure": "no", "work_kind": "lora"}, decide("no"))
    assert path.current == "model"
    assert path.steps == ["azure", "work_kind", "model"]
    assert path.outcome is None


def test_changing_an_earlier_answer_recomputes_the_path_and_ignores_stale_answers():
    chart = load_chart("default")
    answers = {**LORA_7B, "work_kind": "cpu", "cpu_data_size": 5, "cpu_interactive": "yes"}
    path = walk(chart, answers, decide("no"))
    assert path.outcome == "cpu_interactive_leaf"
    assert "model_params" not in path.steps  # stored, but off the path


def test_size_is_required_unless_the_lookup_is_still_running():
    # Issue 15: a named model whose size the lookup cannot find is asked for on the spot; the
    # question is optional only while the lookup runs (the walk asks again once it ends).
    chart = load_chart("default")
    node = chart.node("model_params")
    with pytest.raises(AnswerError, match="This question needs an answer."):
        clean_answer(node, "", {"model": None, "model_size": "no"})
    with pytest.raises(AnswerError, match="This question needs an answer."):
        clean_answer(node, "", {"model": "meta-llama/Llama-3.1-8B", "model_size": "no"})
    assert (
        clean_answer(node, "", {"model": "meta-llama/Llama-3.1-8B", "model_size": "pending"})
        is None
    )


@pytest.mark.parametrize(
    ("step", "raw", "message"),
    [
        ("model_params", "seven", "Enter a number, for example 8."),
        ("model_params", "5000", "Enter at most 2,000 billion parameters."),
        ("model_params", "0", "Enter at least 0.001 billion parameters."),
        ("batch_size", "2.5", "Enter a whole number."),
        ("model", "not a model!", "That is not a Hugging Face model id."),
        ("model", "a--b/c", "That is not a Hugging Face model id."),
        ("timeline", "31/12/2027", "Enter a date as YYYY-MM-DD"),
        ("work_kind", "gpu_mining", "Choose one of the options listed."),
    ],
)
def test_bad_answers_get_a_message_for_the_field(step, raw, message):
    node = load_chart("default").node(step)
    with pytest.raises(AnswerError, match=message.replace(".", r"\.")):
        clean_answer(node, raw, {})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("org/model.git", "A model id does not end with '.git'."),
        ("datasets/squad", "That is a dataset or Space, not a model."),
        ("https://huggingface.co/org/name", "not a web address"),
    ],
)
def test_the_model_question_refuses_what_the_hub_refuses_and_says_why(raw, reason):
    """The flowchart and the Hub lookup share one repo-id check (huggingface_hub's rules)."""
    node = load_chart("default").node("model")
    with pytest.raises(AnswerError, match="That is not a Hugging Face model id") as refused:
        clean_answer(node, raw, {})
    assert reason in str(refused.value)


def test_the_model_question_takes_every_id_the_hub_takes():
    # 60 + 1 + 60 characters: each part within the Hub's 96, the whole beyond it.
    long_id = "o" * 60 + "/" + "m" * 60
    assert clean_answer(load_chart("default").node("model"), long_id, {}) == long_id


def test_good_answers_are_cleaned():
    chart = load_chart("default")
    assert clean_answer(chart.node("model_params"), "1,000") == 1000
    assert clean_answer(chart.node("model_params"), "0.11") == 0.11
    assert clean_answer(chart.node("model"), " google-bert/bert-base-uncased ") == (
        "google-bert/bert-base-uncased"
    )
    deadline = iso_days_from_today(120)
    assert clean_answer(chart.node("timeline"), deadline) == deadline


CHART = """
key: broken
title: T
institute: I
start: a
nodes:
  - id: a
    kind: question
    type: single
    title: A?
    choices: [{value: x, label: X}, {value: y, label: Y}]
    next: [{to: z, when: [{step: a, equals: w}]}, {to: end}]
  - id: end
    kind: outcome
    advice: cpu_batch
    title: End
"""


def test_loader_names_the_node_and_field_at_fault():
    with pytest.raises(FlowchartError, match=r"node 'a': next\[0\]\.to: no node 'z'"):
        parse_chart(CHART, name="broken.yaml")
    bad_type = CHART.replace("type: single", "type: slider")
    with pytest.raises(FlowchartError, match=r"broken.yaml: node 'a': type: Input should be"):
        parse_chart(bad_type, name="broken.yaml")
    bad_choice = CHART.replace("{to: z,", "{to: end,")
    with pytest.raises(FlowchartError, match=r"node 'a': next\[0\]\.when: 'w' is not one of"):
        parse_chart(bad_choice, name="broken.yaml")


def test_mermaid_marks_the_path_in_words():
    chart = load_chart("default")
    path = walk(chart, LORA_7B, decide("no"))
    text = chart_mermaid(chart, highlight=path.steps)
    assert text.startswith("graph TD")
    assert (
        'hpc_a100(["Your path: Request time on an HPC system with A100, H100 or newer GPUs"])'
        in text
    )
    assert 'azure_full(["Submit a full Azure request"])' in text


@pytest.mark.parametrize("key", ["default", "lancaster", "uva"])
def test_the_trainer_with_liger_kernel_asks_for_a_fused_loss(key):
    """A researcher who will add Liger Kernel to the Trainer says so in the library question:
    the estimate runs the Trainer with the fused loss (no fp32 logits)."""
    from advisor.chart_walk import answer_fields

    chart = load_chart(key)
    fields = answer_fields(chart, {"framework_training": "hf_trainer_liger"})
    assert fields["framework"] == "hf_trainer"
    assert fields["fused_loss"] is True
    plain = answer_fields(chart, {"framework_training": "hf_trainer"})
    assert plain["framework"] == "hf_trainer"
    assert "fused_loss" not in plain


@pytest.mark.parametrize("key", ["default", "lancaster", "uva"])
def test_the_precision_question_offers_fp8_for_inference(key):
    """fp8 is a choice (DeepSeek-V3/R1 are published in it) and reaches the estimate as it is;
    its label says it is for inference only."""
    from advisor.chart_walk import answer_fields

    chart = load_chart(key)
    node = chart.by_id["precision"]
    assert "inference only" in node.choice_labels["fp8"]
    assert answer_fields(chart, {"precision": "fp8"})["precision"] == "fp8"


@pytest.mark.parametrize("key", ["default", "lancaster", "uva"])
def test_the_library_question_can_say_the_model_is_compiled(key):
    """torchtune with compile=True and the Trainer with torch_compile=True reach the estimate as
    their library with torch_compile set; the plain choices leave it unset."""
    from advisor.chart_walk import answer_fields

    chart = load_chart(key)
    for choice, library in (
        ("torchtune_compile", "torchtune"),
        ("hf_trainer_compile", "hf_trainer"),
    ):
        fields = answer_fields(chart, {"framework_training": choice})
        assert fields["framework"] == library
        assert fields["torch_compile"] is True
    assert "torch_compile" not in answer_fields(chart, {"framework_training": "torchtune"})


@pytest.mark.parametrize("key", ["default", "lancaster", "uva"])
def test_fine_tuning_asks_what_it_learns_from(key):
    """After the library, LoRA, QLoRA and full fine-tuning ask whether the job learns from
    example texts, preference pairs (DPO, or ORPO / SimPO without a reference) or single
    answers marked good or bad (KTO); the answer
    reaches the estimate as training_objective, "Not sure" as supervised fine-tuning.
    Pre-training goes straight on to the batch."""
    from advisor.chart_walk import answer_fields

    chart = load_chart(key)
    after_library = chart.by_id["framework_training"]
    for task, expected in (("lora", "training_objective"), ("pretrain", "batch_size")):
        taken = next(e.to for e in after_library.next if e.taken({"work_kind": task}))
        assert taken == expected
    assert answer_fields(chart, {"training_objective": "dpo"})["training_objective"] == "dpo"
    free = answer_fields(chart, {"training_objective": "reference_free_preference"})
    assert free["training_objective"] == "reference_free_preference"
    assert answer_fields(chart, {"training_objective": "kto"})["training_objective"] == "kto"
    objective = chart.by_id["training_objective"]
    assert next(e.to for e in objective.next if e.taken({"training_objective": "grpo"})) == (
        "completion_tokens"
    )
    assert next(e.to for e in objective.next if e.taken({"training_objective": "dpo"})) == (
        "batch_size"
    )
    grpo = answer_fields(
        chart,
        {"training_objective": "grpo", "completion_tokens": 1024, "generations_per_prompt": 16},
    )
    assert (grpo["training_objective"], grpo["new_tokens"]) == ("grpo", 1024)
    assert grpo["generations_per_prompt"] == 16
    assert "kl_penalty" not in grpo  # not answered, or "Not sure": TRL's beta 0
    for answer, expected in (("yes", True), ("no", False)):
        assert answer_fields(chart, {"kl_penalty": answer})["kl_penalty"] is expected
    assert "kl_penalty" not in answer_fields(chart, {"kl_penalty": "not_sure"})
    assert (
        answer_fields(chart, {"training_objective": "not_sure"}).get("training_objective") is None
    )
