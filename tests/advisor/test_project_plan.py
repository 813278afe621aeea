"""A request sized for a project: runs, sweep, evaluation and development (issue 15)."""

from __future__ import annotations

import pytest

from advisor.project_plan import project_plan


def lines(plan):
    return {line.key: line for line in plan.lines}


def test_fine_tuning_defaults_add_seeds_a_sweep_evaluation_and_a_week_of_development():
    plan = project_plan(task="lora", per_run_compute=10, contingency_rate=0.2, epochs=3)
    by_key = lines(plan)
    assert plan.per_run_requested == pytest.approx(12)
    assert by_key["runs"].gpu_hours == pytest.approx(3 * 12)
    assert by_key["sweep"].gpu_hours == pytest.approx(6 * 0.25 * 12)
    # One validation pass per epoch of each full run: 9 passes of a third of a tenth of an epoch.
    assert by_key["eval"].gpu_hours == pytest.approx(9 * 10 / 3 * 0.1 / 3)
    assert by_key["dev"].gpu_hours == 40
    assert plan.total_gpu_hours == 36 + 18 + 1 + 40  # 95.0 rounded up
    assert "Dodge et al. 2020" in by_key["runs"].why
    assert "Devlin et al. 2019" in by_key["sweep"].why


def test_a_tiny_run_is_still_a_request_a_reviewer_can_grant_and_suggests_a_trial():
    # BERT-base fine-tuning: a run of a minute or two.
    plan = project_plan(
        task="full_finetune",
        per_run_compute=0.02,
        contingency_rate=0.2,
        epochs=3,
        trial_gpu_hours=400,
    )
    assert 40 < plan.total_gpu_hours < 45
    assert plan.suggest_trial


def test_the_researchers_own_lines_replace_the_suggestions():
    plan = project_plan(
        task="lora",
        per_run_compute=100,
        contingency_rate=0.2,
        full_runs=1,
        sweep_trials=0,
        eval_passes=0,
        dev_gpu_hours=0,
        trial_gpu_hours=400,
    )
    assert [line.key for line in plan.lines] == ["runs"]
    assert lines(plan)["runs"].why == "your figure"
    assert plan.total_gpu_hours == 120
    assert plan.suggest_trial  # 120 <= 400


def test_inference_has_no_sweep_or_evaluation_by_default():
    plan = project_plan(task="inference", per_run_compute=5, contingency_rate=0.2)
    assert [line.key for line in plan.lines] == ["runs", "dev"]
    assert plan.total_gpu_hours == 6 + 8


def test_never_below_the_sites_minimum_allocation():
    plan = project_plan(
        task="inference",
        per_run_compute=1,
        contingency_rate=0.2,
        dev_gpu_hours=0,
        minimum_gpu_hours=1000,
    )
    assert plan.total_gpu_hours == 1000
    assert lines(plan)["minimum"].gpu_hours == pytest.approx(1000 - 1.2)
    assert not plan.suggest_trial


def test_pretraining_runs_once_after_a_short_sweep():
    plan = project_plan(task="pretrain", per_run_compute=10_000, contingency_rate=0.2)
    by_key = lines(plan)
    assert by_key["runs"].gpu_hours == pytest.approx(12_000)
    assert by_key["sweep"].gpu_hours == pytest.approx(8 * 0.02 * 12_000)
    assert plan.text().endswith(f"Total requested: {plan.total_gpu_hours:,} GPU hours.")


def test_negative_lines_are_refused():
    with pytest.raises(ValueError):
        project_plan(task="lora", per_run_compute=1, contingency_rate=0.2, full_runs=-1)
