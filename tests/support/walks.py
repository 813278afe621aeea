"""Answers that walk the advisor's flowchart to a result, written once for the tests, the browser
tests and the bench (bench/flow_walk.py, bench/page_throughput.py import this module).

Each walk is a list of (step, answer) pairs in the order the Turing's chart asks them; a test
that needs a variation derives it with `changed` and `between` rather than copying the list, so
a new question in the chart is added here once.
"""

from __future__ import annotations

Answers = list[tuple[str, str]]

# Fine-tuning a 7B model with LoRA on public data: the walk most pages are tested with.
LORA_7B: Answers = [
    ("work_kind", "lora"),
    ("model", ""),
    ("model_params", "7"),
    ("precision", "bf16"),
    ("framework_training", "not_sure"),
    ("training_objective", "not_sure"),
    ("batch_size", "4"),
    ("seq_len", "2048"),
    ("dataset_tokens", "20"),
    ("epochs", "3"),
    ("num_gpus", ""),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "some"),
    ("azure", "no"),
    ("notebooks", "no"),
]

# GRPO of the same 7B model with LoRA: answers of up to 512 tokens, 8 per prompt.
GRPO_LORA_7B: Answers = (
    LORA_7B[: LORA_7B.index(("training_objective", "not_sure"))]
    + [
        ("training_objective", "grpo"),
        ("completion_tokens", "512"),
        ("generations_per_prompt", "8"),
        ("kl_penalty", "not_sure"),
        ("batch_size", "64"),
        ("seq_len", "256"),
    ]
    + LORA_7B[LORA_7B.index(("dataset_tokens", "20")) :]
)

# Serving a 110M-parameter model (BERT-base size) in fp16: small enough for a V100.
INFERENCE_110M: Answers = [
    ("work_kind", "inference"),
    ("model", ""),
    ("model_params", "0.11"),
    ("precision", "fp16"),
    ("framework_inference", "not_sure"),
    ("batch_size", "32"),
    ("seq_len", "512"),
    ("new_tokens", ""),
    ("inference_tokens", "50"),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
    ("azure", "no"),
    ("notebooks", "no"),
]

# Scraping the web on CPUs: the chart's no-GPU path.
CPU_SCRAPING: Answers = [
    ("work_kind", "cpu"),
    ("cpu_data_size", "20"),
    ("cpu_interactive", "yes"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
]


def changed(answers: Answers, **new: str | None) -> Answers:
    """`answers` with some steps answered differently (`precision="fp16"`); a step given None is
    left out (`azure=None`). Naming a step the walk does not ask is a mistake in the test."""
    unknown = set(new) - {step for step, _answer in answers}
    if unknown:
        raise KeyError(f"the walk asks no {sorted(unknown)}")
    return [
        (step, new.get(step, answer))
        for step, answer in answers
        if not (step in new and new[step] is None)
    ]


def between(answers: Answers, first: str | None = None, last: str | None = None) -> Answers:
    """The answers from step `first` to step `last`, both included (None: the start, the end)."""
    steps = [step for step, _answer in answers]
    start = steps.index(first) if first else 0
    end = steps.index(last) + 1 if last else len(steps)
    return answers[start:end]


def walk_partway(client, answers: Answers, *, azure_first: bool = False):
    """Start a session with Django's test client and post each answer (every one must be
    accepted: a redirect); returns (the session, the last response). With `azure_first`, the
    Turing chart's opening question (Azure? No) is answered first when the chart asks it."""
    # Imported here: the benches import this module before Django is set up.
    from django.urls import reverse

    from advisor.models import AdvisorSession

    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.latest("created_at")  # the one just started
    first = [("azure", "no")] if azure_first and advisor_session.current_step == "azure" else []
    response = None
    for step, value in [*first, *answers]:
        response = client.post(
            reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step}),
            {"answer": value},
        )
        assert response.status_code == 302, (step, response.content[:300])
    advisor_session.refresh_from_db()
    return advisor_session, response


def walk_to_result(client, answers: Answers, *, azure_first: bool = False):
    """`walk_partway` through every answer to the result; returns (the session, the result
    page)."""
    advisor_session, response = walk_partway(client, answers, azure_first=azure_first)
    assert response["Location"] == f"/a/{advisor_session.id}/result/"
    return advisor_session, client.get(response["Location"])
