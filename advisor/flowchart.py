"""Flowcharts as data: the schema, the loader and the path through a chart.

Pure Python and pydantic (no Django), so a chart can be validated and walked anywhere. A chart
is a YAML file in advisor/flowcharts/ with three kinds of node:

- question: asked of the researcher (single or multiple choice, number with unit and range,
  free text, Hugging Face model id, date), with a short explanation under it;
- decision: answered by a named check ("are V100s sufficient?"), never by the researcher; the
  caller supplies the function that runs checks (the engine lives behind it);
- outcome: a leaf. Its `advice` says what kind of result page follows: a GPU estimate limited
  to `systems`, or advice for CPU or cloud work.

Edges leave a node in order; the first whose condition holds is taken, and an edge without a
condition is the default. Loading errors name the node and the field at fault.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from advisor.hub import InvalidRepoIdError, validate_repo_id
from advisor.quantities import QuantityError, in_units, parse_quantity

CHARTS_DIR = Path(__file__).resolve().parent / "flowcharts"
STEP_ID = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
TEXT_MAX_LENGTH = 2000

QuestionType = Literal["single", "multiple", "number", "text", "model_id", "date"]
# secure: a Trusted Research Environment (or the institute's equivalent) for sensitive data.
Advice = Literal["gpu_estimate", "cpu_interactive", "cpu_batch", "cloud", "secure"]

# --- What answers feed ------------------------------------------------------------------------
# A question's `estimate` names the field its answer sets. Engine fields are EstimateRequest's
# own (and "constraints.<name>"); the rest are read by the advisor around the engine. Fields
# are derived from the engine's models, so a field the engine gains is usable in a chart at once.
ADVISOR_FIELDS = {
    "deadline": "the date results are needed by (ISO date)",
    "hpc_experience": "none, some or lots: how much help the result page gives",
    "cpu_data_gb": "data handled by CPU-only work, in GB",
    "cpu_interactive": "true when CPU-only work must be watched as it runs",
    "plan.full_runs": "full runs of the work (seeds, ablations, final runs)",
    "plan.sweep_trials": "hyper-parameter sweep trials",
    "plan.sweep_fraction": "the fraction of a full run each sweep trial takes",
    "plan.eval_passes": "evaluation passes",
    "plan.dev_gpu_hours": "GPU hours for development and debugging",
    "project_title": "the project's title, for the allocation request",
    "project_pays": "true when the project or programme pays (a brief request)",
    "hosting": "true for a web service or app that stays up (priced by the month)",
    "hosting_months": "months an always-on service stays up",
}
# Set by the chart's outcomes or filled in from a lookup, never by a question.
_NOT_FROM_ANSWERS = {"hub", "config", "constraints", "constraints.systems"}


def known_fields() -> set[str]:
    from advisor.engine.models import Constraints, EstimateRequest

    fields = set(EstimateRequest.model_fields) | {
        f"constraints.{name}" for name in Constraints.model_fields
    }
    return (fields | set(ADVISOR_FIELDS)) - _NOT_FROM_ANSWERS


class FlowchartError(ValueError):
    """A chart file that cannot be used, with the node and field named."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Condition(_Strict):
    """A test on an earlier answer (or a decision's result). Exactly one test per condition."""

    step: str
    equals: str | None = None
    in_: list[str] | None = Field(default=None, alias="in")
    not_in: list[str] | None = None
    contains: str | None = None  # multiple-choice answers
    lt: float | None = None
    gte: float | None = None
    answered: bool | None = None  # optional questions: was anything given?

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one_test(self) -> Condition:
        tests = [
            self.equals,
            self.in_,
            self.not_in,
            self.contains,
            self.lt,
            self.gte,
            self.answered,
        ]
        if sum(t is not None for t in tests) != 1:
            raise ValueError("needs exactly one of equals, in, not_in, contains, lt, gte, answered")
        return self

    def holds(self, answers: Mapping[str, Any]) -> bool:
        value = answers.get(self.step)
        if self.answered is not None:
            return (value not in (None, "", [])) is self.answered
        if value is None:
            return False
        if self.equals is not None:
            return str(value) == self.equals
        if self.in_ is not None:
            return str(value) in self.in_
        if self.not_in is not None:
            return str(value) not in self.not_in
        if self.contains is not None:
            return isinstance(value, list) and self.contains in value
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        if self.lt is not None:
            return number < self.lt
        return number >= self.gte  # type: ignore[operator]


class Edge(_Strict):
    to: str
    when: list[Condition] = Field(default_factory=list)  # all must hold; empty: default edge
    label: str = ""

    def taken(self, answers: Mapping[str, Any]) -> bool:
        return all(condition.holds(answers) for condition in self.when)


class Choice(_Strict):
    value: str
    label: str
    help: str = ""
    # Fields this choice sets as a whole (a preset: "a typical project" sets the plan's lines).
    sets: dict[str, Any] = Field(default_factory=dict)


class EstimateMapping(_Strict):
    """How an answer feeds the estimate: the field, the answer's unit and the scale to apply.

    A number answer is multiplied by `scale` (billions of parameters: 1e9). A choice answer is
    looked up in `map` first (a value mapped to null leaves the field unset); unmapped values
    pass through as they are.
    """

    field: str
    unit: str = ""
    scale: float = Field(default=1, gt=0)
    map: dict[str, Any] = Field(default_factory=dict)


class Node(_Strict):
    id: str
    kind: Literal["question", "decision", "outcome"]
    title: str
    help: str = ""  # the short explanation under a question, or what an outcome means
    next: list[Edge] = Field(default_factory=list)

    # Questions
    type: QuestionType | None = None
    choices: list[Choice] = Field(default_factory=list)
    required: bool = True
    # Optional when this earlier step has an answer (a size is needed only without a Hub id).
    required_unless: str = ""
    unit: str = ""
    min: float | None = None
    max: float | None = None
    integer: bool = False
    placeholder: str = ""
    # Which field the answer feeds; `estimate_field: x` is short for `estimate: {field: x}`.
    estimate: EstimateMapping | None = None
    # Optional while all these hold (e.g. while the model's size is still being looked up).
    optional_when: list[Condition] = Field(default_factory=list)

    # Decisions
    check: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    outcomes: dict[str, str] = Field(default_factory=dict)  # check value -> short label

    # Outcomes
    advice: Advice | None = None
    systems: list[str] = Field(default_factory=list)  # catalog keys this leaf points at
    needs_cloud: bool | None = None
    needs_notebooks: bool = False
    note: str = ""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "estimate_field" in raw:
            raw = dict(raw)
            field_name = raw.pop("estimate_field")
            if "estimate" in raw:
                raise ValueError("give estimate or estimate_field, not both")
            raw["estimate"] = {"field": field_name}
        return raw

    @model_validator(mode="after")
    def _kind_fields(self) -> Node:
        if not STEP_ID.match(self.id):
            raise ValueError("id must be lower_snake_case letters, digits and _")
        if self.kind == "question":
            if self.type is None:
                raise ValueError("a question needs a type")
            if self.type in ("single", "multiple") and len(self.choices) < 2:
                raise ValueError("a choice question needs at least two choices")
            if self.type not in ("single", "multiple") and self.choices:
                raise ValueError("only single and multiple choice questions have choices")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError("min is larger than max")
            if not self.next:
                raise ValueError("a question needs at least one edge in next")
            if self.required_unless == self.id:
                raise ValueError("required_unless cannot name the question itself")
        elif self.kind == "decision":
            if self.estimate is not None:
                raise ValueError("only questions feed the estimate")
            if not self.check:
                raise ValueError("a decision needs a check")
            if not self.next:
                raise ValueError("a decision needs at least one edge in next")
        else:
            if self.advice is None:
                raise ValueError("an outcome needs advice")
            if self.estimate is not None:
                raise ValueError("only questions feed the estimate")
            if self.next:
                raise ValueError("an outcome is a leaf and has no next")
        return self

    @property
    def choice_labels(self) -> dict[str, str]:
        return {choice.value: choice.label for choice in self.choices}


class Flowchart(_Strict):
    key: str
    title: str
    institute: str
    description: str = ""
    source: str = ""
    start: str
    nodes: list[Node]

    @model_validator(mode="after")
    def _graph(self) -> Flowchart:
        seen: set[str] = set()
        for node in self.nodes:
            if node.id in seen:
                raise ValueError(f"node {node.id!r}: id is used twice")
            seen.add(node.id)
        if self.start not in seen:
            raise ValueError(f"start: no node {self.start!r}")
        by_id = {node.id: node for node in self.nodes}
        for node in self.nodes:
            for index, edge in enumerate(node.next):
                if edge.to not in seen:
                    raise ValueError(f"node {node.id!r}: next[{index}].to: no node {edge.to!r}")
                for condition in edge.when:
                    if condition.step not in seen:
                        raise ValueError(
                            f"node {node.id!r}: next[{index}].when: no step {condition.step!r}"
                        )
            if node.required_unless and node.required_unless not in seen:
                raise ValueError(
                    f"node {node.id!r}: required_unless: no step {node.required_unless!r}"
                )
            if node.kind != "outcome" and node.next[-1].when:
                raise ValueError(
                    f"node {node.id!r}: next: the last edge must have no condition (the default)"
                )
            if node.kind == "question" and node.type == "single":
                values = set(node.choice_labels)
                for index, edge in enumerate(node.next):
                    for condition in edge.when:
                        if condition.step != node.id:
                            continue
                        wanted = (
                            [condition.equals]
                            if condition.equals
                            else (condition.in_ or condition.not_in or [])
                        )
                        for value in wanted:
                            if value not in values:
                                raise ValueError(
                                    f"node {node.id!r}: next[{index}].when: {value!r} is not "
                                    "one of its choices"
                                )
        for node in self.nodes:
            for index, condition in enumerate(node.optional_when):
                if condition.step not in seen:
                    raise ValueError(
                        f"node {node.id!r}: optional_when[{index}]: no step {condition.step!r}"
                    )
        self._check_fields()
        unreachable = seen - self._reachable(by_id)
        if unreachable:
            raise ValueError(f"nodes {sorted(unreachable)} cannot be reached from start")
        loop = self._loop(by_id)
        if loop:
            raise ValueError(
                f"node {loop[0]!r}: next: leads back to itself ({' -> '.join(loop)}); "
                "a chart must not loop"
            )
        return self

    def _check_fields(self) -> None:
        fields = known_fields()
        for node in self.nodes:
            mapping = node.estimate
            if mapping is not None:
                if mapping.field not in fields:
                    raise ValueError(
                        f"node {node.id!r}: estimate.field: {mapping.field!r} is not a field "
                        f"the estimate reads (known: {', '.join(sorted(fields))})"
                    )
                for value in mapping.map:
                    if value not in node.choice_labels:
                        raise ValueError(
                            f"node {node.id!r}: estimate.map: {value!r} is not one of its choices"
                        )
                if mapping.scale != 1 and node.type != "number":
                    raise ValueError(
                        f"node {node.id!r}: estimate.scale: only number answers are scaled"
                    )
            for choice in node.choices:
                for name in choice.sets:
                    if name not in fields:
                        raise ValueError(
                            f"node {node.id!r}: choices[{choice.value}].sets: {name!r} is not a "
                            "field the estimate reads"
                        )

    def _loop(self, by_id: dict[str, Node]) -> list[str]:
        """A path that leads from a node back to itself, or [] when the chart has none."""
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        stack: list[str] = []

        def visit(step: str) -> list[str]:
            state[step] = 1
            stack.append(step)
            for edge in by_id[step].next:
                if state.get(edge.to) == 1:
                    return stack[stack.index(edge.to) :] + [edge.to]
                if edge.to not in state:
                    found = visit(edge.to)
                    if found:
                        return found
            stack.pop()
            state[step] = 2
            return []

        return visit(self.start)

    def _reachable(self, by_id: dict[str, Node]) -> set[str]:
        todo, found = [self.start], set()
        while todo:
            current = todo.pop()
            if current in found:
                continue
            found.add(current)
            todo.extend(edge.to for edge in by_id[current].next)
        return found

    @property
    def by_id(self) -> dict[str, Node]:
        return {node.id: node for node in self.nodes}

    def node(self, step: str) -> Node | None:
        return self.by_id.get(step)

    def questions(self) -> list[Node]:
        return [node for node in self.nodes if node.kind == "question"]

    def min_questions_to_outcome(self, step: str) -> int:
        """The fewest questions from `step` (itself included) to any outcome, for progress."""
        by_id = self.by_id
        best: dict[str, int] = {}
        frontier = [(0, step)]
        while frontier:
            frontier.sort()
            cost, current = frontier.pop(0)
            if current in best:
                continue
            best[current] = cost
            node = by_id[current]
            if node.kind == "outcome":
                return cost
            step_cost = 1 if node.kind == "question" else 0
            frontier.extend((cost + step_cost, edge.to) for edge in node.next)
        return 0

    def step_for_field(self, field_name: str) -> str | None:
        """The first question whose answer feeds `field_name` (for links back to it)."""
        for node in self.nodes:
            if node.estimate is not None and node.estimate.field == field_name:
                return node.id
        return None

    def questions_ahead(self, step: str, answers: Mapping[str, Any]) -> int:
        """The questions from `step` (itself included) to an outcome on the likely path.

        Edges whose conditions the known answers (and decisions) settle are followed as the walk
        would; an edge that depends on something not yet known is skipped for the default, the
        path a chart's author marks as the usual one. Counts what this researcher will be
        asked, not the shortest route through the chart.
        """
        by_id = self.by_id
        count, seen, current = 0, set(), step
        while current not in seen:
            seen.add(current)
            node = by_id[current]
            if node.kind == "outcome":
                break
            if node.kind == "question":
                count += 1
            known = [
                edge
                for edge in node.next
                if edge.when and all(c.step in answers for c in edge.when) and edge.taken(answers)
            ]
            current = known[0].to if known else node.next[-1].to
        return count

    def outcome_systems(self) -> set[str]:
        return {system for node in self.nodes if node.kind == "outcome" for system in node.systems}

    def mermaid(self, *, highlight: list[str] | None = None) -> str:
        """The chart as a Mermaid graph; steps in `highlight` are drawn as the researcher's path."""
        lines = ["graph TD"]
        on_path_set = set(highlight or [])
        for node in self.nodes:
            # The path is marked in words too, never by line weight or colour alone.
            label = ("Your path: " if node.id in on_path_set else "") + _mermaid_text(node.title)
            if node.kind == "question":
                lines.append(f'  {node.id}["{label}"]')
            elif node.kind == "decision":
                lines.append(f'  {node.id}{{"{label}"}}')
            else:
                lines.append(f'  {node.id}(["{label}"])')
        edge_index = 0
        path_edges: list[int] = []
        on_path = highlight or []
        pairs = set(zip(on_path, on_path[1:], strict=False))
        for node in self.nodes:
            for edge in node.next:
                text = _mermaid_text(edge.label or _edge_label(node, edge, self.by_id))
                arrow = f' -- "{text}" --> ' if text else " --> "
                lines.append(f"  {node.id}{arrow}{edge.to}")
                if (node.id, edge.to) in pairs:
                    path_edges.append(edge_index)
                edge_index += 1
        lines.append("  classDef onpath stroke-width:4px,stroke-dasharray:0,font-weight:bold")
        if on_path:
            lines.append(f"  class {','.join(on_path)} onpath")
        for index in path_edges:
            lines.append(f"  linkStyle {index} stroke-width:4px")
        return "\n".join(lines)


def _edge_label(node: Node, edge: Edge, by_id: dict[str, Node]) -> str:
    if not edge.when:
        return "otherwise" if len(node.next) > 1 else ""
    parts = []
    for condition in edge.when:
        source = by_id[condition.step]
        values = [condition.equals] if condition.equals is not None else (condition.in_ or [])
        if values:
            labels = [source.choice_labels.get(v) or source.outcomes.get(v) or v for v in values]
            # Long choice labels read badly on an arrow: keep the part before the colon.
            parts.append(" or ".join(label.split(":")[0] for label in labels))
        elif condition.answered is not None:
            given = "given" if condition.answered else "blank"
            parts.append(f"{source.title.rstrip('?')}: {given}")
        else:
            parts.append(source.title)
    return ", ".join(parts)


def _mermaid_text(text: str) -> str:
    # Mermaid labels sit inside double quotes; keep them to characters it never misreads.
    return re.sub(r'["<>{}\[\]#;`]', " ", text).strip()


# --- Loading ----------------------------------------------------------------------------------


def available_charts() -> list[str]:
    return sorted(path.stem for path in CHARTS_DIR.glob("*.yaml"))


def load_chart(key: str) -> Flowchart:
    if not STEP_ID.match(key):
        raise FlowchartError(f"chart {key!r}: not a chart name")
    path = CHARTS_DIR / f"{key}.yaml"
    if not path.exists():
        raise FlowchartError(f"chart {key!r}: no file {path.name} in {CHARTS_DIR}")
    # Parsed once per file version: every request walks the chart, YAML parsing is the slow part.
    return _load_file(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _load_file(path: str, mtime_ns: int) -> Flowchart:
    file = Path(path)
    return parse_chart(file.read_text(encoding="utf-8"), name=file.name)


def parse_chart(text: str, *, name: str = "<chart>") -> Flowchart:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FlowchartError(f"{name}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise FlowchartError(f"{name}: the chart must be a mapping with key, start and nodes")
    try:
        return Flowchart.model_validate(raw)
    except ValidationError as exc:
        raise FlowchartError(
            f"{name}: " + "; ".join(_describe(error, raw) for error in exc.errors())
        ) from exc


def _describe(error: Mapping[str, Any], raw: dict) -> str:
    """Name the node (by id) and the field, not just a list index."""
    loc = list(error["loc"])
    where = []
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = raw.get("nodes") or []
        node_id = (
            nodes[loc[1]].get("id")
            if loc[1] < len(nodes) and isinstance(nodes[loc[1]], dict)
            else None
        )
        where.append(f"node {node_id!r}" if node_id else f"nodes[{loc[1]}]")
        loc = loc[2:]
    field_path = ".".join(str(part) for part in loc)
    if field_path:
        where.append(field_path)
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{': '.join(where)}: {message}" if where else message


# --- Answers ----------------------------------------------------------------------------------


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
