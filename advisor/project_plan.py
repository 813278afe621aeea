"""GPU hours for a project, not one clean run: runs, sweep, evaluation and development.

Pure Python (no Django): the engine sizes one run (compute plus its contingency); a project runs
it several times, tunes it first and evaluates it, and someone has to write and debug the code
on a GPU. `project_plan` builds the request from those lines, each with its arithmetic and its
assumption, so the researcher, the justification and the reviewer read the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from catalog_schema import TASK_LABELS

TRAINING_TASKS = set(TASK_LABELS) - {"inference"}

# An evaluation pass is a forward pass only: about 2N FLOPs per token against about 6N for a
# training step (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
# arXiv:2001.08361, section 2.1), so a third of the training cost per token.
FORWARD_SHARE = 1 / 3
# The held-out set is taken as a tenth of one epoch's tokens (a 90/10 train/validation split).
# An assumption, stated on the line; a researcher who knows their split changes the passes.
EVAL_SET_FRACTION = 0.10


@dataclass(frozen=True)
class PlanDefaults:
    full_runs: int
    sweep_trials: int
    sweep_fraction: float
    eval_passes_per_run: float  # per full run, per epoch (training) or per run (inference)
    dev_gpu_hours: float
    why: dict[str, str]


# Defaults a newcomer can accept, by task. Sources and reasons are shown with each line.
_FINETUNE = PlanDefaults(
    full_runs=3,
    sweep_trials=6,
    sweep_fraction=0.25,
    eval_passes_per_run=1,
    dev_gpu_hours=40,
    why={
        "full_runs": "three seeds: fine-tuning results vary enough with the random seed that a "
        "single run misleads (Dodge et al. 2020, arXiv:2002.06305)",
        "sweep": "3 learning rates x 2 batch sizes, the grid BERT's authors recommend for "
        "fine-tuning (Devlin et al. 2019, arXiv:1810.04805, appendix A.3), each trial stopped "
        "after a quarter of a run once the loss curves separate",
        "eval": "one validation pass per epoch of each full run",
        "dev": "a working week on one GPU (5 days x 8 hours) to write and debug the code",
    },
)
_PRETRAIN = PlanDefaults(
    full_runs=1,
    sweep_trials=8,
    sweep_fraction=0.02,
    eval_passes_per_run=3,
    dev_gpu_hours=40,
    why={
        "full_runs": "one full pre-training run: repeating pre-training is rarely affordable",
        "sweep": "8 short trials (2 % of the run each) to choose the learning rate and batch "
        "size before the full run",
        "eval": "three validation passes per epoch (start, middle, end)",
        "dev": "a working week on one GPU (5 days x 8 hours) to write and debug the code",
    },
)
_INFERENCE = PlanDefaults(
    full_runs=1,
    sweep_trials=0,
    sweep_fraction=0.1,
    eval_passes_per_run=0,
    dev_gpu_hours=8,
    why={
        "full_runs": "one pass over all the inputs",
        "sweep": "no sweep: inference has no training hyper-parameters",
        "eval": "no separate evaluation: scoring the outputs needs no GPU",
        "dev": "a day on one GPU (8 hours) to try prompts, batch sizes and the pipeline",
    },
)


def plan_defaults(task: str) -> PlanDefaults:
    if task == "pretrain":
        return _PRETRAIN
    if task in TRAINING_TASKS:
        return _FINETUNE
    return _INFERENCE


@dataclass(frozen=True)
class PlanLine:
    key: str  # runs, sweep, eval, dev, minimum
    label: str
    gpu_hours: float
    arithmetic: str  # "3 x 12.4 GPU hours"
    why: str


@dataclass(frozen=True)
class ProjectPlan:
    per_run_compute: float
    per_run_contingency: float
    per_run_requested: float
    lines: list[PlanLine]
    total_gpu_hours: int  # whole hours, rounded up, at least the site's minimum
    trial_gpu_hours: float | None
    suggest_trial: bool
    minimum_gpu_hours: float | None
    assumptions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "per_run_compute": self.per_run_compute,
            "per_run_contingency": self.per_run_contingency,
            "per_run_requested": self.per_run_requested,
            "lines": [line.__dict__ for line in self.lines],
            "total_gpu_hours": self.total_gpu_hours,
            "trial_gpu_hours": self.trial_gpu_hours,
            "suggest_trial": self.suggest_trial,
            "minimum_gpu_hours": self.minimum_gpu_hours,
            "assumptions": list(self.assumptions),
        }

    def text(self) -> str:
        """The plan as plain lines, for the justification and the request form."""
        return plan_text(self.as_dict())


def plan_text(plan: Mapping[str, Any]) -> str:
    """A plan (ProjectPlan.as_dict, as stored on the session) as the lines a justification
    lists."""
    rows = [
        f"One run: {_h(plan['per_run_compute'])} GPU hours of compute + "
        f"{_h(plan['per_run_contingency'])} contingency = "
        f"{_h(plan['per_run_requested'])} GPU hours."
    ]
    rows += [
        f"{line['label']}: {line['arithmetic']} = {_h(line['gpu_hours'])} GPU hours "
        f"({line['why']})."
        for line in plan["lines"]
    ]
    rows.append(f"Total requested: {plan['total_gpu_hours']:,} GPU hours.")
    return "\n".join(rows)


def _h(hours: float) -> str:
    if hours >= 100:
        return f"{hours:,.0f}"
    if hours >= 1:
        return f"{hours:,.1f}"
    return f"{hours:.2g}"


def project_plan(
    *,
    task: str,
    per_run_compute: float,
    contingency_rate: float,
    epochs: float = 1,
    full_runs: int | None = None,
    sweep_trials: int | None = None,
    sweep_fraction: float | None = None,
    eval_passes: float | None = None,
    dev_gpu_hours: float | None = None,
    trial_gpu_hours: float | None = None,
    minimum_gpu_hours: float | None = None,
) -> ProjectPlan:
    """The project's GPU hours, line by line, from one run's compute.

    Lines left as None take the task's default (`plan_defaults`). Each full run and each
    sweep trial carries the run's contingency (restarts, failed jobs); evaluation passes are
    forward passes over a held-out set; development is GPU time at face value. The total is
    rounded up to whole hours and never below the site's minimum allocation.
    """
    if per_run_compute < 0 or contingency_rate < 0:
        raise ValueError("GPU hours and the contingency rate cannot be negative")
    defaults = plan_defaults(task)
    runs = defaults.full_runs if full_runs is None else int(full_runs)
    trials = defaults.sweep_trials if sweep_trials is None else int(sweep_trials)
    fraction = defaults.sweep_fraction if sweep_fraction is None else float(sweep_fraction)
    epochs = max(float(epochs or 1), 1e-9)
    training = task in TRAINING_TASKS
    per_pass_unit = max(math.ceil(epochs), 1) if training else 1
    passes = (
        defaults.eval_passes_per_run * runs * per_pass_unit if eval_passes is None else eval_passes
    )
    dev = defaults.dev_gpu_hours if dev_gpu_hours is None else float(dev_gpu_hours)
    if min(runs, trials, fraction, passes, dev) < 0:
        raise ValueError("a plan line cannot be negative")

    contingency = per_run_compute * contingency_rate
    per_run = per_run_compute + contingency
    given = {
        "full_runs": full_runs is not None,
        "sweep": sweep_trials is not None or sweep_fraction is not None,
        "eval": eval_passes is not None,
        "dev": dev_gpu_hours is not None,
    }
    # One evaluation pass: forward only over the held-out tenth of one epoch's tokens; for
    # inference an evaluation pass re-runs the inputs.
    per_pass = (
        per_run_compute / epochs * EVAL_SET_FRACTION * FORWARD_SHARE
        if training
        else per_run_compute
    )
    lines = _plan_lines(
        why={k: "your figure" if given[k] else "suggested: " + defaults.why[k] for k in given},
        runs=runs,
        trials=trials,
        fraction=fraction,
        passes=passes,
        dev=dev,
        per_run=per_run,
        per_pass=per_pass,
    )
    total = _total_with_minimum(lines, minimum_gpu_hours)
    return ProjectPlan(
        per_run_compute=per_run_compute,
        per_run_contingency=contingency,
        per_run_requested=per_run,
        lines=lines,
        total_gpu_hours=total,
        trial_gpu_hours=trial_gpu_hours,
        suggest_trial=trial_gpu_hours is not None and total <= trial_gpu_hours,
        minimum_gpu_hours=minimum_gpu_hours,
        assumptions=_assumptions(contingency_rate, evaluates_training=bool(training and passes)),
    )


def _total_with_minimum(lines: list[PlanLine], minimum_gpu_hours: float | None) -> int:
    """The plan's whole GPU hours, rounded up; below the site's minimum allocation, a line
    raises them to it."""
    raw_total = sum(line.gpu_hours for line in lines)
    total = max(1, math.ceil(raw_total - 1e-9))
    if minimum_gpu_hours and total < minimum_gpu_hours:
        lines.append(
            PlanLine(
                "minimum",
                "Raised to the site's minimum allocation",
                minimum_gpu_hours - raw_total,
                f"{minimum_gpu_hours:g} - {_h(raw_total)} GPU hours",
                "the site does not allocate less",
            )
        )
        total = math.ceil(minimum_gpu_hours)
    return total


def _plan_lines(
    *,
    why: dict[str, str],
    runs: int,
    trials: int,
    fraction: float,
    passes: float,
    dev: float,
    per_run: float,
    per_pass: float,
) -> list[PlanLine]:
    """The plan's lines before any raise to the site's minimum: runs, sweep, evaluation, dev."""
    lines = [
        PlanLine(
            "runs",
            "Full runs (seeds, ablations, the final run)",
            runs * per_run,
            f"{runs} x {_h(per_run)} GPU hours",
            why["full_runs"],
        )
    ]
    if trials:
        lines.append(
            PlanLine(
                "sweep",
                "Hyper-parameter sweep",
                trials * fraction * per_run,
                f"{trials} trials x {fraction:.0%} of a run x {_h(per_run)} GPU hours",
                why["sweep"],
            )
        )
    if passes:
        lines.append(
            PlanLine(
                "eval",
                "Evaluation passes",
                passes * per_pass,
                f"{passes:g} passes x {_h(per_pass)} GPU hours",
                why["eval"],
            )
        )
    if dev:
        lines.append(
            PlanLine("dev", "Development and debugging", dev, f"{dev:g} GPU hours", why["dev"])
        )
    return lines


def _assumptions(contingency_rate: float, *, evaluates_training: bool) -> list[str]:
    assumptions = [
        f"Each full run and sweep trial includes the run's {contingency_rate:.0%} contingency "
        "for restarts and failed jobs.",
    ]
    if evaluates_training:
        assumptions.append(
            "An evaluation pass is a forward pass (a third of a training step's FLOPs per "
            "token, Kaplan et al. 2020) over a held-out tenth of one epoch's tokens."
        )
    return assumptions
