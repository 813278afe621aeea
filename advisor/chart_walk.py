"""A researcher's answers against a chart: cleaning each answer and walking the path.

Pure Python (no Django), like the chart's schema in `advisor.flowchart`. The walk follows the
answers from the start until a question is unanswered or an outcome is reached; decisions are
answered by the function the caller passes (`advisor.flow_decisions.decider`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.flowchart import TEXT_MAX_LENGTH, Flowchart, FlowchartError, Node
from advisor.hub import InvalidRepoIdError, validate_repo_id
from advisor.quantities import QuantityError, in_units, parse_quantity


class AnswerError(ValueError):
    """An answer that does not fit its question; the message is shown next to the field."""


def is_required(node: Node, answers: Mapping[str, Any]) -> bool:
    """Whether `node` needs an answer, given the earlier answers (and decisions) on the path."""
    if not node.required:
        return False
    if node.required_unless and answers.get(node.required_unless) not in (None, "", []):
        return False
    return not (node.optional_when and all(c.holds(answers) for c in node.optional_when))


def clean_answer(node: Node, raw: Any, answers: Mapping[str, Any] | None = None) -> Any:
    """Turn what was posted into the stored answer, or raise AnswerError with a plain message.

    `answers` are the earlier answers on the path, for `required_unless`.
    """
    required = is_required(node, answers or {})
    if node.type == "multiple":
        values = [str(v) for v in (raw if isinstance(raw, list) else [raw]) if str(v) != ""]
        unknown = [v for v in values if v not in node.choice_labels]
        if unknown:
            raise AnswerError("Choose from the options listed.")
        if required and not values:
            raise AnswerError("Choose at least one option.")
        return values
    text = "" if raw is None else str(raw).strip()
    if text == "":
        if required:
            raise AnswerError(
                "Choose one option." if node.type == "single" else "This question needs an answer."
            )
        return None
    if node.type == "single":
        if text not in node.choice_labels:
            raise AnswerError("Choose one of the options listed.")
        return text
    if node.type == "number":
        return _clean_number(node, text)
    if node.type == "model_id":
        # The one repo-id check (huggingface_hub's rules), with its reason in words.
        try:
            return validate_repo_id(text)
        except InvalidRepoIdError as exc:
            raise AnswerError(f"That is not a Hugging Face model id. {exc.message}") from exc
    if node.type == "date":
        try:
            return dt.date.fromisoformat(text).isoformat()
        except ValueError as exc:
            raise AnswerError("Enter a date as YYYY-MM-DD, for example 2027-03-31.") from exc
    if len(text) > TEXT_MAX_LENGTH:
        raise AnswerError(f"Keep this under {TEXT_MAX_LENGTH} characters.")
    return text


def _clean_number(node: Node, text: str) -> float | int:
    try:
        value, suffixed = parse_quantity(text)
    except QuantityError as exc:
        extra = " Sizes may also be typed as 8B, 125M or 1.3e9." if _scale(node) >= 1e6 else ""
        raise AnswerError(f"Enter a number, for example 8.{extra}") from exc
    number = in_units(value, suffixed, scale=_scale(node), maximum=node.max, minimum=node.min)
    unit = f" {node.unit}" if node.unit else ""
    if node.min is not None and number < node.min:
        raise AnswerError(f"Enter at least {_plain(node.min)}{unit}.")
    if node.max is not None and number > node.max:
        raise AnswerError(f"Enter at most {_plain(node.max)}{unit}.")
    if node.integer:
        if number != int(number):
            raise AnswerError("Enter a whole number.")
        return int(number)
    return int(number) if number == int(number) else number


def _scale(node: Node) -> float:
    return node.estimate.scale if node.estimate is not None else 1


def _plain(number: float) -> str:
    return f"{number:,.0f}" if number == int(number) else f"{number:,}"


# --- The path ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    value: str
    explanation: str


Decide = Callable[[Node, Mapping[str, Any]], Decision]


@dataclass
class Walk:
    """Where the answers lead: the steps visited, where the researcher stands, what was decided."""

    steps: list[str] = field(default_factory=list)  # questions, decisions and the outcome
    current: str | None = None  # the first unanswered question; None when an outcome is reached
    outcome: str | None = None
    decisions: dict[str, Decision] = field(default_factory=dict)

    @property
    def questions(self) -> list[str]:
        return [step for step in self.steps if step != self.outcome and step not in self.decisions]


def walk(chart: Flowchart, answers: Mapping[str, Any], decide: Decide) -> Walk:
    """Follow the answers from the start until a question is unanswered or an outcome is reached.

    Answers to steps that are no longer on the path stay stored (the researcher may switch back)
    but take no part in conditions: only answers on the path count.
    """
    by_id = chart.by_id
    result = Walk()
    effective: dict[str, Any] = {}
    step = chart.start
    for _ in range(len(chart.nodes) + 1):
        node = by_id[step]
        result.steps.append(step)
        if node.kind == "outcome":
            result.outcome = step
            return result
        if node.kind == "decision":
            decision = decide(node, effective)
            result.decisions[step] = decision
            effective[step] = decision.value
        else:
            if step not in answers:
                result.current = step
                return result
            try:
                effective[step] = clean_answer(node, _raw(answers[step]), effective)
            except AnswerError:
                result.current = step  # a stored answer the chart no longer accepts: ask again
                return result
        step = next(edge.to for edge in node.next if edge.taken(effective))
    raise FlowchartError(f"chart {chart.key!r}: the path loops at {step!r}")


def _raw(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list):
        return value
    return str(value)


def effective_answers(chart: Flowchart, answers: Mapping[str, Any], path: Walk) -> dict[str, Any]:
    """The answers that count: those to questions on the path, cleaned."""
    by_id = chart.by_id
    effective: dict[str, Any] = {}
    for step in path.questions:
        if step in answers:
            effective[step] = clean_answer(by_id[step], _raw(answers[step]), effective)
    return effective


# --- From answers to the estimate's fields ----------------------------------------------------


def answer_fields(chart: Flowchart, answers: Mapping[str, Any]) -> dict[str, Any]:
    """What the answers say, by field: the one place a chart's `estimate` mappings are read.

    `answers` are the effective answers (cleaned, on the path, in path order). A choice's
    `sets` apply before the question's own mapping; a later question overrides an earlier one.
    A field mapped to None is left unset (removed).
    """
    by_id = chart.by_id
    fields: dict[str, Any] = {}
    for step, value in answers.items():
        node = by_id.get(step)
        if node is None or node.kind != "question" or value in (None, "", []):
            continue
        if node.type == "single":
            choice = next((c for c in node.choices if c.value == value), None)
            if choice is not None:
                fields.update(choice.sets)
        mapping = node.estimate
        if mapping is None:
            continue
        if node.type == "number":
            converted: Any = value * mapping.scale
        elif node.type == "single" and value in mapping.map:
            converted = mapping.map[value]
        else:
            converted = value
        if converted is None:
            fields.pop(mapping.field, None)
        else:
            fields[mapping.field] = converted
    return fields
