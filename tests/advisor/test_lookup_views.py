"""Lookup pages: full pages without JavaScript, named partials for htmx."""

from __future__ import annotations

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from advisor.models import HfModelLookup

pytestmark = pytest.mark.django_db
HX = {"HX-Request": "true"}


@pytest.fixture
def done_lookup(fake_hub, django_capture_on_commit_callbacks):
    from advisor.services import hf_model_lookup_request

    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="meta-llama/Llama-3.2-1B")
    lookup.refresh_from_db()
    return lookup


def test_start_page_has_a_labelled_field_that_works_without_javascript(client):
    response = client.get(reverse("advisor:lookup-start"))

    assertContains(response, '<form id="lookup-form" method="post" action="/lookups/">')
    assertContains(response, '<label for="id_repo_id">Hugging Face model id:</label>', html=True)
    assertContains(response, 'hx-get="/models/suggest"')
    assertContains(response, "delay:300ms")
    assertContains(response, 'list="model-suggestion-options"')


def test_post_redirects_to_the_lookup_page(client, fake_hub, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("advisor:lookup-start"), {"repo_id": " gpt2 "})

    lookup = HfModelLookup.objects.get()
    assert response.status_code == 302
    assert response["Location"] == lookup.get_absolute_url()
    assert len(callbacks) == 1
    assert lookup.requested_id == "gpt2"


def test_pending_lookup_polls_and_has_a_plain_refresh_link(client, fake_hub):
    lookup = HfModelLookup.objects.create(repo_id="gpt2", requested_id="gpt2")
    url = lookup.get_absolute_url()

    page = client.get(url)
    fragment = client.get(url, headers=HX)

    assertContains(page, "<html")
    assertContains(page, f'<a href="{url}">Refresh</a>')
    for response in (page, fragment):
        assertContains(response, 'hx-trigger="every 2s"')
        assertContains(response, f'hx-get="{url}"')
        assertContains(response, "Waiting to start")
    assertNotContains(fragment, "<html")
    assert fragment.content.decode().lstrip().startswith('<section id="hf-lookup"')
    assert "HX-Request" in fragment["Vary"]


def test_done_lookup_shows_the_summary_card_and_stops_polling(client, done_lookup):
    fragment = client.get(done_lookup.get_absolute_url(), headers=HX)

    assertNotContains(fragment, "hx-trigger")
    assertContains(fragment, "<dt>Parameters</dt>", html=True)
    assertContains(fragment, "1.24 B")
    assertContains(fragment, "BF16: 1.24 B elements, 2.47 GB")
    assertContains(fragment, "<dd>llama3.2</dd>", html=True)
    assertContains(fragment, "yes (manual approval)")
    assertContains(fragment, "text-generation (transformers)")
    assertContains(fragment, "Request access on the model")
    assertContains(fragment, f'href="{fake_hub_url(done_lookup)}"')


def fake_hub_url(lookup):
    from django.conf import settings

    return f"{settings.HF_ENDPOINT}/meta-llama/Llama-3.2-1B"


def test_failed_lookup_offers_close_matches_as_buttons(
    client, fake_hub, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("advisor:lookup-start"), {"repo_id": "acme/slow-modle"})
    lookup = HfModelLookup.objects.get()

    response = client.get(lookup.get_absolute_url())

    assertNotContains(response, "hx-trigger")
    assertContains(response, "Check the spelling")
    assertContains(
        response, '<input type="hidden" name="repo_id" value="acme/slow-model">', html=True
    )


def test_invalid_id_is_explained_and_nothing_is_stored(client, fake_hub):
    response = client.post(reverse("advisor:lookup-start"), {"repo_id": "org/name/extra"})

    assert response.status_code == 200
    assertContains(response, "A model id has at most one &#x27;/&#x27;")
    assert HfModelLookup.objects.count() == 0


def test_user_text_is_escaped(client, fake_hub):
    response = client.post(reverse("advisor:lookup-start"), {"repo_id": "<script>x</script>"})

    assertNotContains(response, "<script>x</script>")
    assertContains(response, "&lt;script&gt;x&lt;/script&gt;")


def test_htmx_post_returns_the_card_and_pushes_its_url(
    client, fake_hub, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("advisor:lookup-start"), {"repo_id": "gpt2"}, headers=HX)

    lookup = HfModelLookup.objects.get()
    assert response.status_code == 200
    assert response["HX-Push-Url"] == lookup.get_absolute_url()
    assertContains(response, 'id="hf-lookup"')


def test_missing_lookup_is_a_404(client):
    assert client.get("/lookups/999999/").status_code == 404


def test_suggestions_come_from_the_hub_and_are_cached(client, fake_hub):
    first = client.get("/models/suggest", {"q": "qwen"}, headers=HX)
    second = client.get("/models/suggest", {"q": "QWEN"}, headers=HX)

    assertContains(first, '<option value="Qwen/Qwen2.5-0.5B">', count=1)
    assert first.content == second.content
    assert fake_hub.requests_for("/api/models") == 1
    assert first.content.decode().lstrip().startswith('<div id="model-suggestions"')


def test_suggestions_need_two_characters(client, fake_hub):
    response = client.get("/models/suggest", {"q": "q"}, headers=HX)

    assertNotContains(response, "<option")
    assert fake_hub.requests_for() == 0


def test_suggestions_degrade_to_a_note_when_the_hub_is_down(client, fake_hub, settings):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"

    response = client.get("/models/suggest", {"q": "llama"}, headers=HX)

    assert response.status_code == 200
    assertContains(response, "Suggestions from the Hub are unavailable right now")


def test_suggestions_are_bounded_in_time(client, fake_hub, settings):
    import time

    settings.HF_SEARCH_TIMEOUT_SECONDS = 0.3
    fake_hub.latency = 2.0

    started = time.monotonic()
    response = client.get("/models/suggest", {"q": "llama"}, headers=HX)

    assert time.monotonic() - started < 1.5
    assertContains(response, "unavailable right now")


def test_suggestion_page_without_javascript_lists_the_models(client, fake_hub):
    response = client.get("/models/suggest", {"q": "mistral"})

    assertContains(response, "<html")
    assertContains(response, "<li>mistralai/Mistral-7B-v0.1 (text-generation)</li>", html=True)


def test_card_is_embeddable_with_include(done_lookup):
    from django.template import Context, Template

    html = Template(
        '{% include "advisor/lookup.html#hf-lookup" with lookup=lookup refresh_url="/flow/x" %}'
    ).render(Context({"lookup": done_lookup}))

    assert html.lstrip().startswith('<section id="hf-lookup"')
    assert "meta-llama/Llama-3.2-1B" in html
