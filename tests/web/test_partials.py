"""One partial-rendering helper: htmx swaps get a fragment, history restores get the page."""

from __future__ import annotations

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

pytestmark = pytest.mark.django_db

SWAP = {"HX-Request": "true"}
# What htmx sends when a page is missing from its history cache (back button, reload): it
# swaps the answer in place of the whole <body>, so it needs the full page.
RESTORE = {"HX-Request": "true", "HX-History-Restore-Request": "true"}


def _pages(client) -> dict[str, str]:
    advisor_session = client.post(reverse("advisor:start"))
    step_url = advisor_session["Location"]
    return {
        "catalog-table": reverse("catalog:systems") + "?sort=memory",
        "lookup-form": reverse("advisor:lookup-start"),
        "advisor-step": step_url,
    }


@pytest.mark.parametrize("partial", ["catalog-table", "lookup-form", "advisor-step"])
def test_history_restore_gets_the_whole_page(client, default_catalog, partial):
    url = _pages(client)[partial]

    swap = client.get(url, headers=SWAP)
    restore = client.get(url, headers=RESTORE)

    assert swap.status_code == restore.status_code == 200
    assertNotContains(swap, "<html")
    assert f'id="{partial}"' in swap.content.decode().split(">", 1)[0]
    assertContains(restore, "<html")
    assertContains(restore, f'id="{partial}"')
    for response in (swap, restore):
        assert "HX-Request" in response["Vary"]
        assert "HX-History-Restore-Request" in response["Vary"]
