"""One form per flowchart question, built from the chart's node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from advisor.chart_walk import AnswerError, clean_answer, is_required
from advisor.flowchart import Node


class StepForm(forms.Form):
    """Asks one question; cleaning uses the chart's own rules so the form and the walk agree."""

    def __init__(
        self,
        *args,
        node: Node,
        earlier: Mapping[str, Any] | None = None,
        autofocus_errors: bool = True,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.node = node
        self.autofocus_errors = autofocus_errors
        self.earlier = dict(earlier or {})
        self.fields["answer"] = _field_for(node, required=self._required())

    def _required(self) -> bool:
        return is_required(self.node, self.earlier)

    def clean_answer(self):
        raw = (
            self.data.getlist(self.add_prefix("answer"))
            if self.node.type == "multiple"
            else self.data.get(self.add_prefix("answer"), "")
        )
        try:
            return clean_answer(self.node, raw, self.earlier)
        except AnswerError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from exc

    def full_clean(self):
        super().full_clean()
        if (
            self.autofocus_errors
            and self.is_bound
            and self.errors
            and self.node.type not in ("single", "multiple")
        ):
            # Without JavaScript nothing else can move focus to the field that needs fixing
            # (radio groups would repeat autofocus on every button, so flow.js does those; after
            # an htmx swap flow.js moves focus to the message itself).
            self.fields["answer"].widget.attrs["autofocus"] = True


def _field_for(node: Node, *, required: bool) -> forms.Field:
    required_message = {
        "single": "Choose one option.",
        "multiple": "Choose at least one option.",
    }.get(node.type or "", "This question needs an answer.")
    common = {
        "label": node.title,
        "help_text": node.help,
        "required": required,
        "error_messages": {
            "required": required_message,
            "invalid_choice": "Choose one of the options listed.",
        },
    }
    attrs: dict[str, Any] = {}
    if node.placeholder:
        attrs["placeholder"] = node.placeholder
    if node.type == "single":
        return forms.ChoiceField(
            choices=[(c.value, c.label) for c in node.choices],
            widget=forms.RadioSelect,
            **common,
        )
    if node.type == "multiple":
        return forms.MultipleChoiceField(
            choices=[(c.value, c.label) for c in node.choices],
            widget=forms.CheckboxSelectMultiple,
            **common,
        )
    if node.type == "number":
        # A text box with a numeric keyboard: the server's message ("Enter at most 2,000
        # billion parameters.") is clearer than each browser's own.
        attrs.update({"inputmode": "decimal", "autocomplete": "off", "class": "number-input"})
        return forms.CharField(widget=forms.TextInput(attrs=attrs), **common)
    if node.type == "date":
        return forms.CharField(widget=forms.DateInput(attrs={**attrs, "type": "date"}), **common)
    if node.type == "model_id":
        attrs.update({"autocomplete": "off", "spellcheck": "false", "maxlength": 96})
        return forms.CharField(widget=forms.TextInput(attrs=attrs), **common)
    attrs["maxlength"] = 2000
    return forms.CharField(widget=forms.Textarea(attrs={**attrs, "rows": 4}), **common)
