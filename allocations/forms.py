"""Forms for the researcher's request and the staff decisions; rules live in services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from allocations.facilities import (
    Facility,
    facilities_asking_more,
    facility_choices,
    facility_list,
)
from allocations.models import AllocationRequest
from allocations.services import (
    EDITABLE_FIELDS,
    FACILITY_FIELD_MAX_CHARS,
    CheckedFields,
    allocation_request_validate,
)
from catalog_schema import PRECISION_LABELS


def form_add_errors(form: forms.Form, exc: ValidationError) -> None:
    """A service's refusal on the form: beside each field it names, else at the top."""
    if hasattr(exc, "error_dict"):
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


# The secure environments' own questions are form fields of their own, not a JSON box.
MODEL_FORM_FIELDS = tuple(f for f in EDITABLE_FIELDS if f != "facility_fields")


def _facility_field(field) -> forms.Field:
    if field.choices:
        return forms.ChoiceField(
            label=field.label,
            choices=[("", "---------"), *((c, c) for c in field.choices)],
            required=False,
            help_text=field.help,
        )
    return forms.CharField(
        label=field.label, required=False, max_length=FACILITY_FIELD_MAX_CHARS, help_text=field.help
    )


class AllocationRequestForm(forms.ModelForm):
    """The institute's form. Saving a draft checks values; submitting also checks completeness."""

    facility = forms.ChoiceField(label="Which facility?", required=False)
    # Not a model field: it becomes the resubmission event's message. A form field, so it is
    # checked like every other text (length, no NUL characters) and kept when the form fails.
    resubmit_message = forms.CharField(
        label="Note to staff with your resubmission (optional)",
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    class Meta:
        model = AllocationRequest
        fields = MODEL_FORM_FIELDS
        labels = {
            "caller_name": "Your name",
            "research_purpose": "What is the research for?",
            "caller_branch": "Branch",
            "service": "Which service?",
            "allocation_kind": "New or existing allocation",
            "trial": "Trial access (light justification, limited GPU hours)",
        }
        widgets = {
            # <input type="date"> takes ISO dates only, whatever the site's locale.
            "start_date": forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
            "end_date": forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
            "cpu_hours": forms.NumberInput(attrs={"min": 0, "step": 1}),
            "gpu_hours": forms.NumberInput(attrs={"min": 0, "step": 1}),
            "allocation_kind": forms.RadioSelect,
            "justification": forms.Textarea(attrs={"rows": 8}),
            "research_purpose": forms.Textarea(attrs={"rows": 3}),
        }

    def __init__(self, *args, for_submission: bool = False, extra_facilities=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.for_submission = for_submission
        self.checked: CheckedFields | None = None
        current = [self.initial.get("facility") or getattr(self.instance, "facility", "")]
        facilities = facility_list()  # read once: the choices and the secure systems' fields
        self.fields["facility"].choices = [("", "---------")] + facility_choices(
            extra=[*current, *extra_facilities], facilities=facilities
        )
        self.fields["pi_email"].widget.input_type = "email"
        self.fields[
            "gpu_hours"
        ].help_text = "Whole GPU hours, including the estimate's contingency."
        self._add_facility_fields(facilities)

    def _add_facility_fields(self, facilities: list[Facility]) -> None:
        """Each secure environment's own questions, shown for it alone; without JavaScript
        every one is on the page, under its system's name, and only the chosen one counts."""
        self.facility_groups: list[tuple[Facility, list[str]]] = []
        stored = {
            item.get("label"): item.get("value", "")
            for item in (getattr(self.instance, "facility_fields", None) or [])
            if isinstance(item, dict)
        }
        for facility in facilities_asking_more(facilities):
            names = []
            for position, asked in enumerate(facility.request_fields):
                name = f"{facility.name}__{position}"
                self.fields[name] = _facility_field(asked)
                if self.instance.facility == facility.name and asked.label in stored:
                    self.initial.setdefault(name, stored[asked.label])
                names.append(name)
            self.facility_groups.append((facility, names))

    @property
    def chosen_facility(self) -> str:
        if self.is_bound:
            return str(self.data.get(self.add_prefix("facility")) or "")
        return str(self["facility"].value() or "")

    @property
    def facility_field_groups(self) -> list[dict]:
        """For the template: each secure system, its fields, and whether they are required."""
        return [
            {
                "facility": facility,
                "fields": [self[name] for name in names],
                "chosen": facility.name == self.chosen_facility,
            }
            for facility, names in self.facility_groups
        ]

    def _facility_answers(self, facility_name: str) -> list[dict[str, str]]:
        answers = []
        for facility, names in self.facility_groups:
            if facility.name != facility_name:
                continue
            for name in names:
                value = self.cleaned_data.get(name) or ""
                if self.for_submission and not value and name not in self.errors:
                    self.add_error(name, f"{facility.display_name} needs this before you submit.")
                answers.append({"label": self.fields[name].label, "value": value})
        return answers

    def clean(self):
        cleaned = super().clean()
        values = {field: cleaned.get(field) for field in EDITABLE_FIELDS}
        values["facility_fields"] = self._facility_answers(cleaned.get("facility") or "")
        # Fields that already failed their own validation are not checked again.
        for field in self.errors:
            values.pop(field, None)
        try:
            # Services take this instead of checking the same fields again.
            self.checked = allocation_request_validate(
                values=values, for_submission=self.for_submission
            )
        except ValidationError as exc:
            own = any(name in self.errors for _f, names in self.facility_groups for name in names)
            for field, messages in exc.message_dict.items():
                if field == "facility_fields" and own:
                    continue  # already said beside each of the facility's own fields
                if field not in self.errors:
                    self.add_error(field if field in self.fields else None, messages)
        return cleaned

    def _post_clean(self):
        # The model's own full_clean runs in the service; here it would only repeat messages.
        pass


class DecisionForm(forms.Form):
    message = forms.CharField(
        label="Message to the researcher",
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
    )
    note = forms.CharField(
        label="Internal note (staff only)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
    )


class ApproveForm(DecisionForm):
    granted_gpu_hours = forms.IntegerField(
        label="GPU hours granted",
        min_value=1,
        help_text="May differ from the hours requested.",
    )
    slurm_account = forms.CharField(
        label="Slurm account",
        max_length=100,
        required=False,
        help_text="The account the researcher charges jobs to (sbatch --account); the "
        "approval e-mail tells them, and imported accounting is matched to this request by it.",
    )
    field_order = ["granted_gpu_hours", "slurm_account", "message", "note"]


class RequestChangesForm(DecisionForm):
    message = forms.CharField(
        label="What should the researcher change?", widget=forms.Textarea(attrs={"rows": 5})
    )


class RejectForm(DecisionForm):
    message = forms.CharField(
        label="Reason for the rejection", widget=forms.Textarea(attrs={"rows": 5})
    )


PRECISIONS = [("", "unchanged"), *((p, p) for p in PRECISION_LABELS)]


class EstimateRerunForm(forms.Form):
    """Change one assumption and see the estimate again, side by side with the frozen one."""

    epochs = forms.FloatField(label="Epochs", required=False, min_value=0.01)
    accelerator = forms.CharField(
        label="GPU (catalog accelerator key)", required=False, max_length=100
    )
    precision = forms.ChoiceField(label="Precision", choices=PRECISIONS, required=False)

    def clean(self):
        cleaned = super().clean()
        changed = {k: v for k, v in cleaned.items() if v not in (None, "")}
        if len(changed) != 1:
            raise ValidationError("Change exactly one assumption to compare like with like.")
        cleaned["changes"] = changed
        return cleaned


class TrialRunUploadForm(forms.Form):
    """The helper's JSON file. Size is checked here; content in the service."""

    file = forms.FileField(
        label="Trial-run measurement (the JSON file trial_run.py wrote)",
        max_length=200,
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
    )

    def upload(self, *, allocation_request, uploaded_by) -> bool:
        """Store the valid form's file through the service (researcher page and admin alike);
        False, with every problem on the form, when the service refuses it."""
        from allocations.measurement_services import trial_measurement_upload
        from allocations.trial_runs import MAX_FILE_BYTES

        upload = self.cleaned_data["file"]
        try:
            trial_measurement_upload(
                allocation_request=allocation_request,
                uploaded_by=uploaded_by,
                raw=upload.read(MAX_FILE_BYTES + 1),
                file_name=upload.name,
            )
        except ValidationError as exc:
            form_add_errors(self, exc)
            return False
        return True

    def clean_file(self):
        from allocations.trial_runs import MAX_FILE_BYTES

        upload = self.cleaned_data["file"]
        if upload.size > MAX_FILE_BYTES:
            raise ValidationError(
                f"The file is {upload.size:,} bytes; a trial-run file is at most "
                f"{MAX_FILE_BYTES:,} bytes."
            )
        return upload


class MeasurementAcceptForm(forms.Form):
    accelerator = forms.ChoiceField(label="GPU the run measured (catalog)")
    params = forms.IntegerField(
        label="Model parameters",
        required=False,
        min_value=1,
        help_text="Leave empty to use the count the helper recorded or the estimate's.",
    )
    note = forms.CharField(
        label="Internal note", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args, accelerators=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["accelerator"].choices = [("", "---------"), *accelerators]


class MeasurementRejectForm(forms.Form):
    note = forms.CharField(
        label="Why it should not calibrate the engine",
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class SlurmAccountForm(forms.Form):
    slurm_account = forms.CharField(
        label="Slurm account",
        max_length=100,
        required=False,
        help_text="The account jobs are charged to (sbatch --account); usage is matched by it.",
    )
