"""From answers to the result page, with the real engine and the default catalog."""

from __future__ import annotations

import re
import shutil

import pytest
from django.core.management import call_command
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from advisor import flowchart
from tests.support import walks

pytestmark = pytest.mark.django_db

LORA_7B = walks.LORA_7B


def walk_to_result(client, answers):
    # The Turing chart asks about Azure first; a later ("azure", ...) in `answers` changes it.
    return walks.walk_to_result(client, answers, azure_first=True)


def test_lora_7b_in_bf16_is_routed_past_v100s_to_an_a100_class_system(client, default_catalog):
    advisor_session, page = walk_to_result(client, LORA_7B)
    assertContains(page, "Request time on an HPC system with A100, H100 or newer GPUs")
    assertContains(page, "You chose bf16, which V100s do not support")
    result = advisor_session.estimate_result
    rec = result["recommendation"]
    # Baskerville is no longer available to the Turing (catalog), so it is left out; COSMA8's
    # A100/GH200/MI210 nodes run bf16 and are weighed too.
    assert rec["system"] in {"stanage", "dawn", "cosma8"}
    assert advisor_session.estimate_request["constraints"]["systems"] == [
        "cosma8",
        "stanage",
        "dawn",
    ]
    assert advisor_session.estimate_request["params"] == 7_000_000_000
    # Contingency on its own line, then the sum a request asks for.
    assertContains(
        page, f'<dd id="contingency">+ {rec["contingency_gpu_hours"]:g} GPU hours</dd>', html=True
    )
    assertContains(page, "GPU hours to request")
    assertContains(page, 'role="img"')
    assertContains(page, "Memory per GPU against each GPU")
    assertContains(page, "#SBATCH")
    assertContains(page, 'id="justification"')
    assertContains(page, "Assumptions behind the numbers")
    assertNotContains(page, "JADE 2</strong>")


def test_small_fp16_inference_fits_a_v100(client, default_catalog):
    answers = walks.INFERENCE_110M
    advisor_session, page = walk_to_result(client, answers)
    assertContains(page, "Request time on a V100-class HPC system")
    assertContains(page, "decided for you: It needs")
    assert advisor_session.estimate_result["recommendation"]["fits"] is True


def test_the_tokens_each_prompt_generates_are_asked_and_priced(client, default_catalog):
    """Each generated token is one more pass through the model: a job that writes 2,000
    tokens per 512-token prompt costs far more than the assumed 256, and the result says which
    length it priced."""
    assumed, assumed_page = walk_to_result(client, walks.INFERENCE_110M)
    written, written_page = walk_to_result(
        client, walks.changed(walks.INFERENCE_110M, new_tokens="2000")
    )
    assert assumed.estimate_request["new_tokens"] is None
    assert written.estimate_request["new_tokens"] == 2000
    assertContains(assumed_page, "prompt 512 + 256 generated tokens per request (default)")
    assertContains(written_page, "prompt 512 + 2,000 generated tokens per request")
    # The same 50 M tokens hold fewer requests, but each one decodes eight times longer.
    hours = [s.estimate_result["recommendation"]["gpu_hours"] for s in (assumed, written)]
    assert hours[1] > 2 * hours[0]


def test_a_sequence_length_left_blank_is_assumed_and_said(client, default_catalog):
    """Researchers often do not know their sequence length: the question may be left blank,
    and the result names the length it assumed."""
    advisor_session, page = walk_to_result(client, walks.changed(LORA_7B, seq_len=""))
    assert advisor_session.estimate_request["seq_len"] is None
    assert "error" not in advisor_session.estimate_result
    assertContains(page, "Sequence length (not given)")
    assertContains(page, "2,048 tokens per sequence (you did not give a sequence length)")


def test_generated_tokens_may_be_zero_but_not_negative(client, default_catalog):
    """0 is an answer (a model that only reads: embeddings, scoring); a negative count is
    refused on the question's page with the reason, and the session does not move on."""
    scored, _page = walk_to_result(client, walks.changed(walks.INFERENCE_110M, new_tokens="0"))
    assert scored.estimate_request["new_tokens"] == 0
    assert "error" not in scored.estimate_result
    answers = walks.between(walks.INFERENCE_110M, last="seq_len")
    advisor_session, _ = walks.walk_partway(client, answers, azure_first=True)
    url = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": "new_tokens"})
    response = client.post(url, {"answer": "-5"})
    assert response.status_code == 200
    assertContains(response, "Enter at least 0 tokens.")
    advisor_session.refresh_from_db()
    assert advisor_session.current_step == "new_tokens"


def test_a_dpo_walk_is_estimated_with_pairs_and_says_so(client, default_catalog):
    """Answering "Preference pairs with a reference model" reaches the engine as DPO: the
    result page states the objective and the pairs, and the drafted justification says it."""
    dpo = walks.changed(LORA_7B, training_objective="dpo")
    advisor_session, page = walk_to_result(client, dpo)
    assert advisor_session.estimate_request["training_objective"] == "dpo"
    assertContains(page, "Training objective")
    assert re.search(r'id="recipe-micro-batch">\d+ preference pairs?<', page.content.decode())
    assertContains(page, "a micro-batch of")
    result = advisor_session.estimate_result
    assert result["framework"]["key"] == "trl"
    assert "by DPO (preference pairs against a frozen reference model)" in (result["justification"])
    assert "a global batch of 4 preference pairs" in result["justification"]
    plain = walk_to_result(client, LORA_7B)[0].estimate_result
    # The same 4 samples as pairs: twice the sequences and a reference forward pass.
    assert result["recommendation"]["gpu_hours"] > plain["recommendation"]["gpu_hours"]


def test_a_kto_walk_counts_examples_and_keeps_two_a_pass(client, default_catalog):
    """Answering "Single answers marked good or bad" reaches the engine as KTO: TRL's
    KTOTrainer (the library left open), examples rather than pairs, at least two per pass."""
    advisor_session, page = walk_to_result(client, walks.changed(LORA_7B, training_objective="kto"))
    assert advisor_session.estimate_request["training_objective"] == "kto"
    assertContains(page, "Training objective")
    micro = re.search(r'id="recipe-micro-batch">(\d+) sequences?<', page.content.decode())
    assert micro
    assert int(micro.group(1)) >= 2
    result = advisor_session.estimate_result
    assert "by KTO (single responses labelled desirable or undesirable" in result["justification"]
    assert "a global batch of 4 labelled examples" in result["justification"]
    assert "TRL's KTOTrainer" in result["slurm_script"]


def test_a_grpo_walk_is_estimated_with_vllm_beside_the_training(client, default_catalog):
    """Answering "Answers it writes itself, scored by reward functions" reaches the engine as
    GRPO with the answers' length and group size: the result page draws vLLM's share of the GPU
    and the justification counts completions in groups."""
    advisor_session, page = walk_to_result(client, walks.GRPO_LORA_7B)
    request = advisor_session.estimate_request
    assert request["training_objective"] == "grpo"
    assert (request["new_tokens"], request["generations_per_prompt"]) == (512, 8)
    assertContains(page, "Generation engine (vLLM)")
    assertContains(page, 'id="recipe-generation"')  # how many GPUs each vLLM engine spans
    result = advisor_session.estimate_result
    assert result["recommendation"]["memory"]["rollout_engine"] > 14e9  # 7B in 16-bit and more
    assert (
        "a global batch of 64 completions (8 prompts x 8 sampled each)" in (result["justification"])
    )
    assert "--use_vllm True --vllm_mode colocate" in result["slurm_script"]


def test_a_70b_grpo_walk_shows_vllm_split_over_the_node(client, default_catalog):
    """A 70B model's vLLM copy fits no GPU beside the training: the recipe panel says one
    engine spans several GPUs, as the script's --vllm_tensor_parallel_size does."""
    advisor_session, page = walk_to_result(
        client, walks.changed(walks.GRPO_LORA_7B, model_params="70")
    )
    recipe = advisor_session.estimate_result["recommendation"]["recipe"]
    degree = recipe["generation_tp"]
    assert degree > 1
    assertContains(page, f"one engine across {degree} GPUs (tensor parallel)")
    assert (
        f"--vllm_tensor_parallel_size {degree}" in (advisor_session.estimate_result["slurm_script"])
    )


def test_public_web_service_on_azure_is_estimated_for_the_cloud(client, default_catalog):
    answers = LORA_7B[:-2] + [("azure", "yes"), ("who_pays", "project")]
    answers[0] = ("work_kind", "inference")
    answers[4] = ("framework_inference", "not_sure")
    training_only = ("training_objective", "dataset_tokens", "epochs", "num_gpus")
    answers = [a for a in answers if a[0] not in training_only]
    answers[7:7] = [("new_tokens", ""), ("inference_tokens", "100")]
    advisor_session, page = walk_to_result(client, answers)
    assertContains(page, "Submit a brief Azure request")
    assert advisor_session.estimate_result["recommendation"]["system"] == "azure"


def test_admin_warns_when_the_active_chart_points_at_a_retired_system(
    admin_client, default_catalog, tmp_path, monkeypatch
):
    for path in flowchart.CHARTS_DIR.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    stale = (
        (tmp_path / "default.yaml")
        .read_text()
        .replace("systems: [cosma8, baskerville, stanage, dawn]", "systems: [jade2]")
    )
    (tmp_path / "default.yaml").write_text(stale)
    monkeypatch.setattr(flowchart, "CHARTS_DIR", tmp_path)
    response = admin_client.get("/admin/advisor/activeflowchart/")
    assertContains(response, "points at jade2, which is retired")
    assertContains(response, "(outcome hpc_a100)")


def test_admin_shows_no_retired_warning_for_the_shipped_default_chart(
    admin_client, default_catalog
):
    response = admin_client.get("/admin/advisor/activeflowchart/")
    assertNotContains(response, "which is retired")


@pytest.mark.parametrize(
    ("profile", "answers", "outcome", "systems"),
    [
        (
            "lancaster",
            [
                ("work_kind", "cpu"),
                ("cpu_data_size", "5"),
                ("cpu_interactive", "yes"),
                ("data_sensitivity", "public"),
            ],
            "hex_jupyter",
            None,
        ),
        (
            "lancaster",
            [
                ("work_kind", "inference"),
                ("model", ""),
                ("model_params", "0.11"),
                ("precision", "fp16"),
                ("framework_inference", "not_sure"),
                ("batch_size", "8"),
                ("seq_len", "512"),
                ("new_tokens", ""),
                ("inference_tokens", "10"),
                ("project_plan", "suggested"),
                ("data_sensitivity", "public"),
                ("interactive_gpu", "yes"),
            ],
            "hex_gpu",
            ["hex"],
        ),
        (
            "lancaster",
            [*walks.between(walks.LORA_7B, last="data_sensitivity"), ("interactive_gpu", "no")],
            "hec_gpu",
            ["hec"],
        ),
        (
            "uva",
            [
                ("work_kind", "cpu"),
                ("cpu_data_size", "5"),
                ("cpu_interactive", "no"),
                ("data_sensitivity", "public"),
            ],
            "uva_standard",
            None,
        ),
        (
            "uva",
            [
                ("work_kind", "inference"),
                ("model", ""),
                ("model_params", "0.11"),
                ("precision", "fp16"),
                ("framework_inference", "not_sure"),
                ("batch_size", "8"),
                ("seq_len", "512"),
                ("new_tokens", ""),
                ("inference_tokens", "10"),
                ("project_plan", "suggested"),
                ("data_sensitivity", "public"),
            ],
            "uva_gpu",
            ["uva-hpc"],
        ),
    ],
)
def test_lancaster_and_uva_charts_route_with_their_catalogs(
    client, db, profile, answers, outcome, systems
):
    from django.utils.html import escape

    from advisor.flow_services import active_flowchart_set
    from advisor.flowchart import load_chart

    call_command("load_catalog", profile, verbosity=0)
    active_flowchart_set(chart=profile)
    advisor_session, page = walk_to_result(client, answers)
    assert advisor_session.chart == profile
    assert advisor_session.current_step == outcome
    assertContains(page, escape(load_chart(profile).node(outcome).title))
    if systems is None:
        assert advisor_session.estimate_request is None
    else:
        assert advisor_session.estimate_request["constraints"]["systems"] == systems
        assert advisor_session.estimate_result["recommendation"]["system"] == systems[0]


def test_result_links_to_the_allocation_request_form_when_that_app_is_installed(
    client, default_catalog
):
    from django.urls import NoReverseMatch

    advisor_session, page = walk_to_result(client, LORA_7B)
    try:
        url = reverse("allocations:request-create", kwargs={"session_id": advisor_session.id})
    except NoReverseMatch:
        assertNotContains(page, "Create allocation request")
        pytest.skip("the allocation-requests app (branch alloc) is not merged here")
    assertContains(page, f'<a class="button" href="{url}">Create allocation request</a>', html=True)


def test_a_deadline_within_a_week_becomes_the_wall_time_target():
    import datetime as dt

    from django.utils import timezone

    from advisor.flow_requests import estimate_request_for

    # Fields, not step ids: the chart's `estimate` mappings turn answers into these (issue 15).
    answers = {"task": "pretrain", "params": 1e9, "tokens": 2e10}
    soon = (timezone.localdate() + dt.timedelta(days=3)).isoformat()
    later = (timezone.localdate() + dt.timedelta(days=90)).isoformat()
    assert (
        estimate_request_for(fields={**answers, "deadline": soon}).constraints.max_wall_hours == 72
    )
    # Further away than the one-week default: the default target stands.
    assert (
        estimate_request_for(fields={**answers, "deadline": later}).constraints.max_wall_hours
        is None
    )
    assert estimate_request_for(fields=answers).constraints.max_wall_hours is None


def test_result_says_the_objective_why_the_top_option_won_and_sorts_alternatives(
    client, default_catalog
):
    """Issue 14: one sentence of objective, one line of why, and an alternatives table that
    sorts by GPU hours, wall time and cost with plain links (no JavaScript)."""
    advisor_session, page = walk_to_result(client, LORA_7B)
    result = advisor_session.estimate_result
    assertContains(page, 'id="why-first"')
    assertContains(page, result["why_first"])
    assertContains(page, "Ranked by what the job costs the institute")
    assertContains(page, "Charged to the institute")
    url = f"/a/{advisor_session.id}/result/"
    for key in ("gpu_hours", "wall", "cost"):
        assertContains(page, f'href="?sort={key}#alt-heading"')
    by_cost = client.get(url, {"sort": "cost"})
    assertContains(by_cost, '<strong aria-current="true">charged cost</strong>', html=True)
    assert result["alternatives"]
    table = by_cost.content.decode().split('class="alternatives-table"')[1]
    cells = re.findall(r'<td data-label="Charged cost">([^<]*)</td>', table)
    known = [float(c.split()[0].replace(",", "")) for c in cells if c[:1].isdigit()]
    assert len(known) >= 2
    assert known == sorted(known)
    # Unknown charges, if any, come last.
    assert all(c[:1].isdigit() for c in cells[: len(known)])
    # An unknown sort falls back to the ranking order.
    assertContains(client.get(url, {"sort": "<script>"}), 'aria-current="true">ranking<')


def test_result_says_which_moment_of_the_step_sets_the_peak(client, default_catalog):
    """Issue 13: peak memory is the larger phase of a step, and the page says which one."""
    advisor_session, page = walk_to_result(client, LORA_7B)
    phase = advisor_session.estimate_result["memory"]["peak_phase"]
    assert phase in ("forward", "optimizer")
    assertContains(page, 'id="memory-peak-phase"')
    assertContains(page, "The peak is at the end of")


def test_a_whisper_transcription_is_sized_per_clip_and_writing_nothing_is_explained(
    client, default_catalog, settings
):
    """Whisper reads 30 s of audio and writes text: the result counts one clip per request,
    and a researcher who answers 0 generated tokens is told why that cannot be estimated."""
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # nothing listens: the bundled config is used
    settings.HF_TIMEOUT_SECONDS = 1
    whisper = walks.changed(walks.INFERENCE_110M, model="openai/whisper-small", seq_len="")
    whisper = [answer for answer in whisper if answer[0] != "model_params"]

    _sized, page = walk_to_result(client, whisper)
    assertContains(page, "one clip (1,500 encoder positions) + 256 generated tokens per request")

    refused, page = walk_to_result(client, walks.changed(whisper, new_tokens="0"))
    assert page.status_code == 200
    assert "Whisper reads audio and writes text" in refused.estimate_result["error"]
    # Named by the question the researcher answered, with a way back to it.
    assertContains(
        page,
        "from your answer to “How many tokens does the model write for each prompt?”: "
        "Whisper reads audio and writes text",
    )
    assertContains(page, f'href="/a/{refused.id}/step/new_tokens/"')


def test_result_states_the_range_of_its_gpu_hours_from_test_points(client, default_catalog):
    """The compute GPU hours come with the range the engine's own test points support (the
    error covering 80% of the published speed measurements of this kind of work)."""
    advisor_session, page = walk_to_result(client, LORA_7B)
    uncertainty = advisor_session.estimate_result["uncertainty"]
    assert uncertainty["gpu_hours_test_points"] >= 3
    assert (
        uncertainty["gpu_hours_low"]
        < advisor_session.estimate_result["recommendation"]["gpu_hours"]
        < uncertainty["gpu_hours_high"]
    )
    assertContains(page, 'id="gpu-hours-range"')
    points = int(uncertainty["gpu_hours_test_points"])
    assertContains(page, f"80% of {points} published measurements")


def test_a_tiny_job_reads_under_a_hundredth_of_an_hour_not_zero(client, default_catalog):
    """A thousand tokens round to 0.00 GPU hours in the result; the page says 'under 0.01'
    rather than 'GPU hours: 0', as the justification says 'less than 0.1'."""
    answers = [
        (key, "0.001" if key == "inference_tokens" else value)
        for key, value in walks.INFERENCE_110M
    ]
    advisor_session, page = walk_to_result(client, answers)
    assert advisor_session.estimate_result["recommendation"]["gpu_hours"] == 0
    assertContains(page, '<span id="gpu-hours">under 0.01 GPU hours</span>', html=True)
    assertNotContains(page, '<span id="gpu-hours">0 GPU hours</span>', html=True)
