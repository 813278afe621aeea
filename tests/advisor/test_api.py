"""POST /api/estimate and `manage.py estimate`: the same JSON in and out, field errors on bad
input, never a 500."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from advisor.engine import ENGINE_VERSION

CONFIGS = Path(__file__).resolve().parents[1] / "engine" / "configs"
LLAMA2_7B = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf" / "config.json").read_text())
GOOD = {"config": LLAMA2_7B, "task": "lora", "precision": "bf16", "tokens": 50_000_000}


def post(client, body, content_type="application/json"):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(reverse("advisor:api-estimate"), data=data, content_type=content_type)


def test_api_url_is_named():
    assert reverse("advisor:api-estimate") == "/api/estimate"


def test_api_returns_the_estimate(client, default_catalog):
    response = post(client, GOOD)
    assert response.status_code == 200
    result = response.json()
    assert result["engine_version"] == ENGINE_VERSION
    assert result["params_total"] == 6_738_415_616
    assert result["recommendation"]["fits"] is True
    assert result["recommendation"]["system"] != "jade2"
    jade = [o for o in result["options"] if o["system"] == "jade2"]
    assert jade
    assert all(o["eligible"] is False for o in jade)
    assert jade[0]["reasons"][0].startswith("JADE 2 is retired (")


def test_api_serves_a_model_over_nodes_in_fp8(client, default_catalog):
    """Llama 3.1 405B in fp8 with vLLM, pinned to Stanage's 4-GPU A100 nodes: split over two
    nodes (405 GB of weights), with the Ray launcher in the script."""
    from advisor.model_configs import find_bundled

    body = {
        "config": find_bundled("meta-llama/Llama-3.1-405B").config,
        "task": "inference",
        "precision": "fp8",
        "framework": "vllm",
        "tokens": 100_000_000,
        "system": "stanage",
        "accelerator": "a100-80-sxm4",
    }
    response = post(client, body)
    assert response.status_code == 200
    best = response.json()["recommendation"]
    assert best["nodes"] >= 2
    assert best["num_gpus"] == 4 * best["nodes"]
    assert "--pipeline-parallel-size" in response.json()["slurm_script"]


def test_api_field_errors_are_400(client, default_catalog):
    response = post(client, {"params": -5, "task": "inference", "precision": "fp64"})
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {"field": "params", "message": "must be greater than 0; got -5."},
            {
                "field": "precision",
                "message": "must be one of 'fp32', 'fp16', 'bf16', 'fp8', 'int8' or 'int4'; "
                "got 'fp64'.",
            },
        ]
    }


def test_api_contradiction_is_400_naming_the_field(client, default_catalog):
    response = post(client, {"params": 7_000_000_000, "task": "qlora", "precision": "fp32"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "precision"


def test_api_generation_from_an_encoder_is_400_naming_new_tokens(client, default_catalog):
    bert = json.loads((CONFIGS / "google-bert__bert-base-uncased" / "config.json").read_text())
    response = post(client, {"config": bert, "task": "inference", "new_tokens": 64})
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "new_tokens"
    assert error["message"].startswith("This is an encoder-only model (bert)")


def test_api_config_that_is_not_one_is_400(client, default_catalog):
    response = post(client, {"config": {"architectures": 5}, "task": "inference"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"].startswith("config")


def test_api_unlooked_model_id_is_400(client, default_catalog):
    response = post(client, {"model_id": "meta-llama/Llama-2-7b-hf", "task": "inference"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "model_id"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        ("{not json", "application/json", 400, "The body is not valid JSON"),
        ("[1, 2]", "application/json", 400, "The request must be a JSON object."),
        ("task=inference", "application/x-www-form-urlencoded", 415, "Content-Type"),
        ("x" * (300 * 1024), "application/json", 413, "limited to 256 KB"),
    ],
)
def test_api_rejects_bad_bodies(client, default_catalog, body, content_type, status, message):
    response = post(client, body, content_type=content_type)
    assert response.status_code == status
    assert message in response.json()["errors"][0]["message"]


def test_api_get_is_405(client):
    response = client.get(reverse("advisor:api-estimate"))
    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_api_needs_no_csrf_token(default_catalog):
    from django.test import Client

    response = post(Client(enforce_csrf_checks=True), GOOD)
    assert response.status_code == 200


def test_command_prints_the_same_result_as_the_api(client, default_catalog, tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(GOOD))
    out = io.StringIO()
    call_command("estimate", "--input", str(path), stdout=out)
    assert json.loads(out.getvalue()) == post(client, GOOD).json()


def test_command_bad_input_names_the_field(default_catalog, tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"params": 7_000_000_000, "task": "pretrain", "precision": "int8"}))
    with pytest.raises(CommandError) as caught:
        call_command("estimate", "--input", str(path), stdout=io.StringIO())
    assert str(caught.value).startswith("Bad input:\n  precision: int8 pretrain is not possible")


def test_command_missing_file_is_a_clear_error(db):
    with pytest.raises(CommandError, match=r"Cannot read /nonexistent\.json"):
        call_command("estimate", "--input", "/nonexistent.json")


def test_command_schema_prints_both_schemas():
    out = io.StringIO()
    call_command("estimate", "--schema", stdout=out)
    schemas = json.loads(out.getvalue())
    assert schemas["request"]["title"] == "EstimateRequest"
    assert schemas["result"]["title"] == "EstimateResult"
    assert "lora_target_modules" in schemas["request"]["properties"]


def test_command_reads_stdin_and_exits_non_zero_on_bad_input(default_catalog, transactional_db):
    done = subprocess.run(
        [sys.executable, "manage.py", "estimate", "--input", "-"],
        input=json.dumps({"params": 7_000_000_000, "task": "guess"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "task: must be one of" in done.stderr


def test_api_estimates_a_model_id_from_its_stored_hub_lookup(
    client, default_catalog, fake_hub, django_capture_on_commit_callbacks
):
    from advisor.services import hf_model_lookup_request

    with django_capture_on_commit_callbacks(execute=True):  # the task runs in-process here
        hf_model_lookup_request(repo_id="Qwen/Qwen2.5-0.5B")
    response = post(client, {"model_id": "qwen/qwen2.5-0.5b", "task": "inference"})
    assert response.status_code == 200, response.json()
    assert response.json()["params_total"] == 494_032_768
