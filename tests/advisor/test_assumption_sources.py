"""An assumption's source reads as a citation: its web addresses are links and the code it
quotes is set as code, never a doc slug or a snippet run into the prose."""

import pytest
from pytest_django.asserts import assertContains, assertNotContains

from advisor.templatetags.sources import source_html
from tests.advisor.test_flow_results import walk_to_result
from tests.support import walks


@pytest.mark.parametrize(
    ("source", "html"),
    [
        (
            "HF docs (huggingface.co/docs/transformers/model_memory_anatomy): a page",
            'HF docs (<a href="https://huggingface.co/docs/transformers/model_memory_anatomy">'
            "huggingface.co/docs/transformers/model_memory_anatomy</a>): a page",
        ),
        (
            "see https://pytorch.org/docs/stable/notes/cuda.html.",
            'see <a href="https://pytorch.org/docs/stable/notes/cuda.html">'
            "https://pytorch.org/docs/stable/notes/cuda.html</a>.",
        ),
        ("after `torch.ones((1, 1))` runs", "after <code>torch.ones((1, 1))</code> runs"),
        ("<script>x</script> `<b>`", "&lt;script&gt;x&lt;/script&gt; <code>&lt;b&gt;</code>"),
        ("measured by staff", "measured by staff"),
        (None, ""),
    ],
)
def test_a_source_shows_links_and_code_and_escapes_the_rest(source, html):
    assert source_html(source) == html


@pytest.mark.django_db
def test_the_result_page_cites_the_cuda_context_source_by_its_address(client):
    from django.core.management import call_command

    call_command("load_catalog", "default", verbosity=0)
    _session, page = walk_to_result(client, walks.INFERENCE_110M)  # a T4 or V100: pre-Ampere
    assertContains(page, '<a href="https://huggingface.co/docs/transformers/model_memory_anatomy">')
    assertContains(page, "<code>torch.ones((1, 1)).to(&#x27;cuda&#x27;)</code>")
    assertNotContains(page, "(model_memory_anatomy)")
