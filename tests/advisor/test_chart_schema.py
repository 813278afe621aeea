"""Charts are data: answers reach the estimate through the chart's own mappings (issue 15).

A chart is refused at load when a mapping names an unknown field, when a question can lead back
to itself, when a node cannot be reached, and (at activation and in the admin) when an outcome
names a retired system; the message names the node and the field. A copy of the Turing chart
with every step renamed gives the same estimates, so no code depends on a step's id.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from advisor import flow_decisions, flow_requests, flow_services, flowchart
from advisor.chart_walk import answer_fields, effective_answers, walk
from advisor.engine import estimate
from advisor.engine_catalog import engine_catalog
from advisor.flowchart import FlowchartError, load_chart, parse_chart

ADVISOR_ROOT = Path(flowchart.__file__).resolve().parent

MINIMAL = """
key: tiny
title: Tiny
institute: Test
start: kind
nodes:
  - id: kind
    kind: question
    type: single
    title: What kind?
    estimate: {field: task}
    choices:
      - {value: inference, label: Inference}
      - {value: lora, label: LoRA}
    next:
      - {to: size}
  - id: size
    kind: question
    type: number
    title: How big?
    estimate: {field: params, unit: billion parameters, scale: 1.0e+9}
    next:
      - {to: done}
  - id: done
    kind: outcome
    advice: gpu_estimate
    title: Done
"""


def edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_a_minimal_chart_maps_answers_to_fields_with_their_scale():
    chart = parse_chart(MINIMAL)
    assert answer_fields(chart, {"kind": "lora", "size": 7}) == {
        "task": "lora",
        "params": 7e9,
    }


def test_an_unknown_field_is_refused_with_the_node_and_field_named():
    text = edited(MINIMAL, "estimate: {field: task}", "estimate: {field: taks}")
    with pytest.raises(
        FlowchartError, match=r"node 'kind': estimate\.field: 'taks' is not a field"
    ):
        parse_chart(text)


def test_an_unknown_key_on_a_node_is_refused():
    text = edited(MINIMAL, "    title: How big?\n", "    title: How big?\n    estimate_feild: x\n")
    with pytest.raises(FlowchartError, match=r"node 'size': estimate_feild"):
        parse_chart(text)


def test_a_question_that_leads_back_to_itself_is_refused():
    text = edited(
        MINIMAL,
        "      - {to: done}\n",
        "      - {to: kind, when: [{step: size, lt: 1}]}\n      - {to: done}\n",
    )
    with pytest.raises(
        FlowchartError, match=r"node 'kind': next: leads back to itself \(kind -> size -> kind\)"
    ):
        parse_chart(text)


def test_an_unreachable_node_is_refused():
    text = (
        MINIMAL
        + """  - id: orphan
    kind: outcome
    advice: cloud
    title: Nobody comes here
"""
    )
    with pytest.raises(FlowchartError, match=r"\['orphan'\] cannot be reached"):
        parse_chart(text)


def test_a_choice_mapped_to_null_leaves_the_field_unset():
    chart = load_chart("default")
    fields = answer_fields(chart, {"work_kind": "cpu", "data_sensitivity": "public"})
    assert "task" not in fields
    assert fields["constraints.data_sensitivity"] == "public"
    assert answer_fields(chart, {"work_kind": "notebooks"})["task"] == "inference"


def test_a_preset_choice_sets_the_plan_lines():
    chart = load_chart("default")
    fields = answer_fields(chart, {"project_plan": "single"})
    assert fields == {"plan.full_runs": 1, "plan.sweep_trials": 0, "plan.dev_gpu_hours": 0}


def test_no_code_reads_an_answer_by_step_id():
    """The answers reach the estimate only through `answer_fields`: no answers.get("<step>")."""
    step_ids = {
        node.id for key in ("default", "lancaster", "uva") for node in load_chart(key).nodes
    }
    pattern = re.compile(r"""answers(?:\.get\(|\[)\s*["']([a-z_]+)["']""")
    offenders = []
    for path in [*ADVISOR_ROOT.rglob("*.py"), *(ADVISOR_ROOT.parent / "allocations").rglob("*.py")]:
        for match in pattern.finditer(path.read_text()):
            if match.group(1) in step_ids:
                offenders.append(f"{path.name}: {match.group(0)}")
    assert offenders == []


# --- Renamed steps: the same estimates -----------------------------------------------------


def renamed_copy(key: str) -> tuple[str, dict[str, str]]:
    """The chart's YAML with every step id renamed, and the old -> new names."""
    text = (ADVISOR_ROOT / "flowcharts" / f"{key}.yaml").read_text()
    raw = yaml.safe_load(text)
    names = {node["id"]: f"s{n:02d}_{node['id'][::-1]}"[:60] for n, node in enumerate(raw["nodes"])}
    for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<=(id|to|ep|rt): ){old}\b", new, text)
    return text.replace(f"key: {key}", "key: renamed", 1), names


WALKS = {
    "lora_7b": {
        "azure": "no",
        "work_kind": "lora",
        "model": "",
        "model_params": "7",
        "precision": "bf16",
        "framework_training": "hf_trainer",
        "training_objective": "not_sure",
        "batch_size": "4",
        "seq_len": "2048",
        "dataset_tokens": "20",
        "epochs": "3",
        "num_gpus": "",
        "project_plan": "custom",
        "plan_runs": "2",
        "plan_sweep_trials": "4",
        "plan_sweep_percent": "10",
        "plan_eval_passes": "",
        "plan_dev_hours": "16",
        "data_sensitivity": "public",
        "timeline": "",
        "hpc_experience": "some",
        "notebooks": "no",
    },
    "bert_inference": {
        "azure": "no",
        "work_kind": "inference",
        "model": "",
        "model_params": "125M",
        "precision": "fp16",
        "framework_inference": "vllm",
        "batch_size": "32",
        "seq_len": "512",
        "new_tokens": "",
        "inference_tokens": "50",
        "project_plan": "suggested",
        "data_sensitivity": "confidential",
        "timeline": "",
        "hpc_experience": "none",
    },
}


@pytest.mark.django_db
@pytest.mark.parametrize("walk_name", sorted(WALKS))
def test_a_chart_with_renamed_steps_gives_the_same_estimate(walk_name):
    call_command("load_catalog", "default", verbosity=0)
    catalog = engine_catalog()
    original = load_chart("default")
    text, names = renamed_copy("default")
    renamed = parse_chart(text, name="renamed.yaml")
    assert not set(names) & {node.id for node in renamed.nodes}

    answers = WALKS[walk_name]
    results = []
    for chart, keyed in (
        (original, answers),
        (renamed, {names[step]: value for step, value in answers.items()}),
    ):
        path = walk(chart, keyed, flow_decisions.decider(chart, catalog, {}))
        assert path.outcome is not None, path.current
        fields = answer_fields(chart, effective_answers(chart, keyed, path))
        outcome = chart.by_id[path.outcome]
        request = flow_requests.estimate_request_for(fields=fields, outcome=outcome)
        result = estimate(flow_requests.sizing_request(request, outcome, catalog), catalog)
        plan = flow_requests.plan_for(
            fields=fields, result=result, outcome=outcome, catalog=catalog
        )
        results.append(
            (
                outcome.title,
                dict(fields),
                request.model_dump(mode="json"),
                result.recommendation.model_dump(mode="json"),
                plan.as_dict(),
            )
        )
    assert results[0] == results[1]
    title, fields, request, _, plan = results[0]
    assert request["params"] in (7_000_000_000, 125_000_000)
    if walk_name == "lora_7b":
        assert fields["plan.sweep_fraction"] == pytest.approx(0.1)
        assert [line["key"] for line in plan["lines"]] == ["runs", "sweep", "eval", "dev"]
    else:
        assert title == "Use the Turing's Trusted Research Environment"


# --- Retired systems: refused at activation and shown in the admin ------------------------


@pytest.fixture
def charts_copy(tmp_path, monkeypatch):
    for path in flowchart.CHARTS_DIR.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(flowchart, "CHARTS_DIR", tmp_path)
    return tmp_path


@pytest.mark.django_db
def test_activating_a_chart_that_routes_to_a_retired_system_is_refused(charts_copy):
    call_command("load_catalog", "default", verbosity=0)
    stale = (charts_copy / "default.yaml").read_text()
    stale = re.sub(
        r"(  - id: hpc_a100\n(?:    .*\n)*?)    systems: \[[^\]]*\]",
        r"\1    systems: [jade2]",
        stale,
    )
    (charts_copy / "stale.yaml").write_text(stale.replace("key: default", "key: stale", 1))
    with pytest.raises(FlowchartError, match=r"node 'hpc_a100': systems: 'jade2' is retired"):
        flow_services.active_flowchart_set(chart="stale")
    assert flow_services.active_chart_key() == "default"


@pytest.mark.django_db
def test_the_admin_refuses_a_broken_chart_naming_node_and_field(admin_client, charts_copy):
    call_command("load_catalog", "default", verbosity=0)
    broken = (charts_copy / "default.yaml").read_text()
    broken = broken.replace("estimate: {field: deadline}", "estimate: {field: dedline}", 1)
    (charts_copy / "broken.yaml").write_text(broken.replace("key: default", "key: broken", 1))
    response = admin_client.get("/admin/advisor/activeflowchart/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "node &#x27;timeline&#x27;: estimate.field: &#x27;dedline&#x27;" in body
