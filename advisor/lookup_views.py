"""Pages for Hugging Face model lookups: start one, watch it, search-as-you-type.

Kept apart from views.py (the flowchart) so the flowchart can embed the card with
`{% include "advisor/lookup.html#hf-lookup" with lookup=lookup %}` (see the template).
"""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from advisor import hub
from advisor.models import HfModelLookup
from advisor.selectors import SUGGESTION_MIN_LENGTH, hf_model_suggestion_list
from advisor.services import hf_model_lookup_request
from config.ratelimits import rate_limited
from web.partials import render_page


class ModelLookupForm(forms.Form):
    repo_id = forms.CharField(
        label="Hugging Face model id",
        max_length=200,
        help_text="For example meta-llama/Llama-3.2-1B: the part of the model page's address "
        "after huggingface.co/.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Search-as-you-type, layered on a field that works without it.
        self.fields["repo_id"].widget.attrs.update(
            {
                "list": "model-suggestion-options",
                "hx-get": reverse("advisor:model-suggest"),
                "hx-trigger": f"input changed delay:300ms[this.value.trim().length >= "
                f"{SUGGESTION_MIN_LENGTH}]",
                "hx-target": "#model-suggestions",
                "hx-swap": "outerHTML",
                "hx-sync": "this:replace",
            }
        )

    def clean_repo_id(self) -> str:
        value = self.cleaned_data["repo_id"]
        try:
            return hub.validate_repo_id(value)
        except hub.InvalidRepoIdError as exc:
            raise forms.ValidationError(exc.message, code="invalid_repo_id") from exc


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@rate_limited("lookup")
def lookup_start(request: HttpRequest) -> HttpResponse:
    form = ModelLookupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        lookup = hf_model_lookup_request(repo_id=form.cleaned_data["repo_id"])
        if request.htmx:
            context = {"lookup": lookup}
            response = render_page(request, "advisor/lookup.html", context, partial="hf-lookup")
            return push_url(response, lookup_url(lookup))
        return redirect(lookup.get_absolute_url())
    context = {"form": form, "min_length": SUGGESTION_MIN_LENGTH}
    return render_page(request, "advisor/lookup_start.html", context, partial="lookup-form")


@require_GET
@vary_on_headers("HX-Request")
def lookup_detail(request: HttpRequest, token) -> HttpResponse:
    lookup = get_object_or_404(HfModelLookup, token=token)
    return render_page(request, "advisor/lookup.html", {"lookup": lookup}, partial="hf-lookup")


@require_GET
@vary_on_headers("HX-Request")
@rate_limited("suggest", methods=("GET",))
def model_suggest(request: HttpRequest) -> HttpResponse:
    query = (request.GET.get("q") or request.GET.get("repo_id") or "")[:200]
    suggestions, note = hf_model_suggestion_list(query=query)
    return render_page(
        request,
        "advisor/model_suggestions.html",
        {
            "query": query,
            "suggestions": suggestions,
            "note": note,
            "min_length": SUGGESTION_MIN_LENGTH,
        },
        partial="model-suggestions",
    )


def lookup_url(lookup: HfModelLookup) -> str:
    return lookup.get_absolute_url()
