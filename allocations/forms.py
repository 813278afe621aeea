"""Forms for the researcher's request and the staff decisions; rules live in services."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from allocations.facilities import facility_choices
from allocations.models import AllocationRequest
from allocations.services import EDITABLE_FIELDS, CheckedFields, allocation_request_validate
from catalog_schema import PRECISION_LABELS


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
        fields = EDITABLE_FIELDS
        labels = {
            "caller_name": "Your name",
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
        }

    def __init__(self, *args, for_submission: bool = False, extra_facilities=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.for_submission = for_submission
        self.checked: CheckedFields | None = None
        current = [self.initial.get("facility") or getattr(self.instance, "facility", "")]
        self.fields["facility"].choices = [("", "---------")] + facility_choices(
            extra=[*current, *extra_facilities]
        )
        self.fields["pi_email"].widget.input_type = "email"
        self.fields[
            "gpu_hours"
        ].help_text = "Whole GPU hours, including the estimate's contingency."

    def clean(self):
        cleaned = super().clean()
        values = {field: cleaned.get(field) for field in EDITABLE_FIELDS}
        # Fields that already failed their own validation are not checked again.
        for field in self.errors:
            values.pop(field, None)
        try:
            # Services take this instead of checking the same fields again.
            self.checked = allocation_request_validate(
                values=values, for_submission=self.for_submission
            )
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
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
