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

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

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
    # The file version it was parsed from (load_chart): what a page rendered from it is keyed on.
    _file_version: int = PrivateAttr(default=0)

    @property
    def file_version(self) -> int:
        return self._file_version

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

    @functools.cached_property
    def by_id(self) -> dict[str, Node]:
        """Nodes by step id, built once per loaded chart (charts are frozen and cached)."""
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
    chart = parse_chart(file.read_text(encoding="utf-8"), name=file.name)
    chart._file_version = mtime_ns
    return chart


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
