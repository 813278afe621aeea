"""The researcher's whole path (issue 15): sensitive data, project-sized requests, the size asked
for when the model's size is unknown, and the request form that follows."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from advisor.models import AdvisorSession
from tests.support import walks

pytestmark = pytest.mark.django_db

BERT_FINETUNE = [
    ("azure", "no"),
    ("work_kind", "full_finetune"),
    ("model", ""),
    ("model_params", "110M"),
    ("precision", "fp16"),
    ("framework_training", "not_sure"),
    ("training_objective", "not_sure"),
    ("batch_size", "32"),
    ("seq_len", "128"),
    ("dataset_tokens", "5"),
    ("epochs", "3"),
    ("num_gpus", ""),
    ("project_plan", "suggested"),
    ("data_sensitivity", "public"),
    ("timeline", ""),
    ("hpc_experience", "none"),
    ("notebooks", "no"),
]


def walk(client, answers, chart="default"):
    if chart != "default":
        from advisor import flow_services

        flow_services.active_flowchart_set(chart=chart)
    return walks.walk_to_result(client, answers)


@pytest.fixture
def turing(db):
    call_command("load_catalog", "default", verbosity=0)


def test_bert_fine_tuning_asks_for_a_project_not_a_minute(client, turing):
    advisor_session, page = walk(client, BERT_FINETUNE)
    plan = advisor_session.project_plan
    keys = [line["key"] for line in plan["lines"]]
    assert keys == ["runs", "sweep", "eval", "dev"]
    assert 40 <= plan["total_gpu_hours"] < 60
    # Each line on its own row, with its arithmetic and why.
    assertContains(page, "GPU hours for the whole project")
    assertContains(page, '<tr data-line="runs"><th scope="row">Full runs (seeds, ablations')
    assertContains(page, "Dodge et al. 2020")
    assertContains(page, f'<td id="plan-total"><strong>{plan["total_gpu_hours"]}</strong></td>')
    if plan["trial_gpu_hours"]:
        assertContains(page, f"within trial access (up to {plan['trial_gpu_hours']:g} GPU hours")
    # The justification lists the same lines and the total.
    assertContains(page, "Hyper-parameter sweep: 6 trials x 25% of a run")
    assertContains(page, f"Total requested: {plan['total_gpu_hours']:,} GPU hours.")


def test_the_request_form_starts_from_the_project_total_and_its_lines(client, turing):
    from django.contrib.auth import get_user_model

    from allocations.facilities import facility_offers_trial
    from allocations.selectors import allocation_request_initial_from_session

    advisor_session, _ = walk(client, BERT_FINETUNE)
    user = get_user_model().objects.create_user("researcher", password="x")
    initial = allocation_request_initial_from_session(session=advisor_session, user=user)
    assert initial["gpu_hours"] == advisor_session.project_plan["total_gpu_hours"]
    assert "Development and debugging: 40 GPU hours" in initial["justification"]
    # Trial access is pre-ticked only where the system documents one and the hours fit it; the
    # system chosen for BERT in the Turing catalog documents none (only Baskerville and JADE 2
    # did, and neither is open to the Turing now), so the small total is not a trial there.
    assert initial["trial"] is facility_offers_trial(initial["facility"])


def test_confidential_data_goes_to_the_trusted_research_environment(client, turing):
    answers = [
        ("azure", "no"),
        ("work_kind", "qlora"),
        ("model", ""),
        ("model_params", "8B"),
        ("precision", "bf16"),
        ("framework_training", "not_sure"),
        ("training_objective", "not_sure"),
        ("batch_size", "4"),
        ("seq_len", "2048"),
        ("dataset_tokens", "20"),
        ("epochs", "2"),
        ("num_gpus", ""),
        ("project_plan", "suggested"),
        ("data_sensitivity", "confidential"),
        ("timeline", ""),
        ("hpc_experience", "some"),
    ]
    advisor_session, page = walk(client, answers)
    assertContains(page, '<h1 tabindex="-1" id="result-heading">Use the Turing&#x27;s Trusted')
    assertContains(page, "What to do with confidential data")
    assertContains(page, "trustedresearch@turing.ac.uk")
    assertContains(page, "Data Protection Assessment Process")
    assertContains(page, "What the estimate says about the hardware")
    assertContains(page, "per GPU on")
    assertContains(page, "GPU hours of compute on")
    assertNotContains(page, "GPU(s)")
    # The headline and hints never blame memory or precision for a sensitivity rule.
    assertNotContains(page, "try a lower precision")
    assertNotContains(page, "No system in this part of the catalog")
    assertNotContains(page, "approved for public data.")
    assert advisor_session.estimate_request["constraints"]["data_sensitivity"] == "confidential"
    assert advisor_session.estimate_result["recommendation"]["fits"] is True

    from django.contrib.auth import get_user_model

    from allocations.selectors import allocation_request_initial_from_session

    user = get_user_model().objects.create_user("researcher", password="x")
    initial = allocation_request_initial_from_session(session=advisor_session, user=user)
    assert initial["facility"] == "turing-tre"
    assert initial["service"] == "secure"
    assert initial["data_sensitivity"] == "confidential"
    assert initial["gpu_hours"] == advisor_session.project_plan["total_gpu_hours"]


def test_uva_sensitive_data_is_sized_on_rio_itself(client):
    call_command("load_catalog", "uva", verbosity=0)
    answers = walks.between(
        walks.changed(
            walks.LORA_7B, epochs="1", project_plan="single", data_sensitivity="restricted"
        ),
        last="data_sensitivity",
    )
    advisor_session, page = walk(client, answers, chart="uva")
    assertContains(page, "Use Rio, UVA&#x27;s high-security cluster")
    rec = advisor_session.estimate_result["recommendation"]
    assert rec["system"] == "uva-rio"
    assert advisor_session.project_plan["lines"][0]["arithmetic"].startswith("1 x ")


def test_cpu_work_with_restricted_data_is_routed_without_a_gpu_estimate(client, turing):
    answers = [
        ("azure", "no"),
        ("work_kind", "cpu"),
        ("cpu_data_size", "20"),
        ("cpu_interactive", "no"),
        ("data_sensitivity", "restricted"),
        ("timeline", ""),
        ("hpc_experience", "none"),
    ]
    advisor_session, page = walk(client, answers)
    assertContains(page, "What to do with restricted data")
    assertContains(page, "The work needs no GPU")
    assert advisor_session.estimate_result is None


def test_a_named_model_without_a_known_size_is_asked_for_with_its_name_kept(
    client, turing, settings
):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # nothing listens: the Hub is away
    settings.HF_TIMEOUT_SECONDS = 1
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()

    def post(step, value):
        return client.post(
            reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step}),
            {"answer": value},
        )

    post("azure", "no")
    post("work_kind", "qlora")
    response = post("model", "acme/llama-like-8b")
    assert response["Location"].endswith("/step/model_params/")
    page = client.get(response["Location"])
    assertContains(page, "For <strong>acme/llama-like-8b</strong>")
    # Blank is not an answer once the lookup has ended without a size.
    assertContains(post("model_params", ""), "This question needs an answer.")
    for step, value in [
        ("model_params", "8B"),
        ("precision", "bf16"),
        ("framework_training", "not_sure"),
        ("training_objective", "not_sure"),
        ("batch_size", "4"),
        ("seq_len", "2048"),
        ("dataset_tokens", "20"),
        ("epochs", "1"),
        ("num_gpus", ""),
        ("project_plan", "suggested"),
        ("data_sensitivity", "public"),
        ("timeline", ""),
        ("hpc_experience", "some"),
        ("notebooks", "no"),
    ]:
        response = post(step, value)
        assert response.status_code == 302, step
    advisor_session.refresh_from_db()
    assert advisor_session.estimate_request["model_id"] == "acme/llama-like-8b"
    assert advisor_session.estimate_request["params"] == 8_000_000_000
    page = client.get(response["Location"])
    assertNotContains(page, "could not estimate")
    assertContains(page, "GPU hours for the whole project")


def test_the_progress_line_counts_the_questions_this_researcher_is_asked(client, turing):
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()
    answers = [("azure", "no"), *walks.changed(walks.INFERENCE_110M, azure=None)]
    seen = []
    for step, value in answers:
        url = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step})
        page = client.get(url).content.decode()
        seen.append(page.split("Question ", 1)[1].split("</label>", 1)[0])
        client.post(url, {"answer": value})
    # Until the kind of work is known the usual (training) path is counted: one more question.
    assert seen[:2] == ["1 of about 16", "2 of about 16"]
    assert seen[2:] == [f"{n} of about 15" for n in range(3, 16)]
    # Changing an earlier answer counts from that question, not from the end of the path.
    url = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": "precision"})
    page = client.get(url).content.decode()
    assert page.split("Question ", 1)[1].split("</label>", 1)[0] == "5 of about 15"


@pytest.mark.parametrize(
    ("task", "model_id", "tokens_step", "tokens"),
    [
        ("qlora", "meta-llama/Llama-3.1-8B", "dataset_tokens", "20"),
        ("inference", "mistralai/Mixtral-8x7B-v0.1", "inference_tokens", "100"),
    ],
)
def test_a_bundled_model_needs_no_size_question_with_the_hub_away(
    client,
    turing,
    settings,
    django_capture_on_commit_callbacks,
    task,
    model_id,
    tokens_step,
    tokens,
):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # nothing listens: the Hub is away
    settings.HF_TIMEOUT_SECONDS = 1
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()

    def post(step, value):
        return client.post(
            reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step}),
            {"answer": value},
        )

    post("azure", "no")
    post("work_kind", task)
    with django_capture_on_commit_callbacks(execute=True):
        post("model", model_id)
    # The size comes from the configuration the service keeps: the next question is precision.
    response = client.get(reverse("advisor:resume", kwargs={"session_id": advisor_session.id}))
    assert response["Location"].endswith("/step/precision/")
    library = ("framework_inference" if task == "inference" else "framework_training", "not_sure")
    rest = [("precision", "bf16" if task == "qlora" else "fp16"), library]
    if task in ("lora", "qlora", "full_finetune"):
        rest += [("training_objective", "not_sure")]
    rest += [("batch_size", "4")]
    rest += [("seq_len", "2048")]
    if task == "inference":
        rest += [("new_tokens", "")]
    rest += [(tokens_step, tokens)]
    if task != "inference":
        rest += [("epochs", "1"), ("num_gpus", "")]
    rest += [("project_plan", "suggested"), ("data_sensitivity", "public"), ("timeline", "")]
    rest += [("hpc_experience", "some"), ("notebooks", "no")]
    for step, value in rest:
        response = post(step, value)
        assert response.status_code == 302, (step, response.content[:300])
    advisor_session.refresh_from_db()
    result = advisor_session.estimate_result
    assert "error" not in result
    assert result["recommendation"]["fits"] is True
    assert advisor_session.estimate_request["model_id"] == model_id
    page = client.get(response["Location"])
    assertContains(page, "GPU hours for the whole project")
    assertNotContains(page, "could not estimate")
