"""The public /catalog/ page: plain page, htmx partial, server-side sorting, escaping."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from catalog.models import System

pytestmark = pytest.mark.django_db

CSRF_TOKEN = re.compile(r'"X-CSRFToken": "([^"]+)"')


def row_headers(html: str) -> list[str]:
    """The system names of the table's rows, in order."""
    return [
        re.sub(r"<br>.*", "", cell, flags=re.S).strip()
        for cell in re.findall(r'<th scope="row" data-label="System">(.*?)</th>', html, re.S)
    ]


def gpu_cells(html: str) -> list[str]:
    return re.findall(r'<td data-label="GPU">(.*?)</td>', html, re.S)


def test_page_compares_systems_with_units(client, default_catalog):
    response = client.get(reverse("catalog:systems"))
    assert response.status_code == 200
    assert "HX-Request" in response["Vary"]
    assertContains(
        response,
        "<caption>The Alan Turing Institute (HPC Days 2024 talk): 18 system "
        "and GPU combinations</caption>",
        html=True,
    )
    assertContains(response, '<th scope="col" aria-sort="ascending">', count=1)
    assertContains(response, "756 TFLOP/s")  # H100 PCIe BF16, dense
    assertContains(response, "2,039 GB/s")
    assertContains(response, "80 GB")
    assertContains(response, "Not supported")  # V100 BF16
    assertContains(response, '<strong class="status-word">Retired</strong>', html=True)
    assertContains(response, '<strong class="status-word">Limited</strong>', html=True)
    assertContains(response, "access ended 2025-01-06")
    assertContains(response, "Supported: PyTorch, Lightning, DeepSpeed, FSDP, MPI.")
    assertContains(response, "0.526 to 1.088 USD per GPU-hour")
    assertContains(response, "<html")


def test_htmx_request_gets_only_the_table(client, default_catalog):
    response = client.get(
        reverse("catalog:systems") + "?sort=-memory", headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="catalog-table"')
    assert "<html" not in html
    assert "HX-Request" in response["Vary"]


def test_sort_links_work_without_javascript(client, default_catalog):
    response = client.get(reverse("catalog:systems"))
    # Each sortable heading is a real link; the htmx attributes repeat it.
    assertContains(response, 'href="?sort=memory" hx-get="?sort=memory"')
    assertContains(response, 'href="?sort=-system"')  # sorted column flips direction

    by_memory = client.get(reverse("catalog:systems") + "?sort=-memory").content.decode()
    assert gpu_cells(by_memory)[0] == "NVIDIA H200 SXM 141GB"
    # The two 16 GB GPUs tie and keep GPU-name order.
    assert gpu_cells(by_memory)[-2:] == ["NVIDIA T4 16GB", "NVIDIA Tesla V100 PCIe 16GB"]
    assert 'aria-sort="descending"' in by_memory

    by_bf16 = client.get(reverse("catalog:systems") + "?sort=-bf16").content.decode()
    # No BF16 (V100, T4) sorts last whichever the direction.
    assert gpu_cells(by_bf16)[-1] in {
        "NVIDIA T4 16GB",
        "NVIDIA Tesla V100 SXM2 32GB",
        "NVIDIA Tesla V100 PCIe 16GB",
    }
    assert gpu_cells(by_bf16)[0] in {
        "NVIDIA H100 80GB SXM5",
        "NVIDIA H200 SXM 141GB",
        "NVIDIA GH200 Grace Hopper Superchip (H100 96GB)",
    }

    by_name = client.get(reverse("catalog:systems") + "?sort=system").content.decode()
    systems = row_headers(by_name)
    assert systems == sorted(systems, key=str.lower)
    assert systems[0] == "Baskerville"


def test_unknown_sort_falls_back_and_unknown_profile_is_404(client, default_catalog):
    response = client.get(reverse("catalog:systems") + "?sort=<script>")
    assert response.status_code == 200
    assertNotContains(response, "<script>")
    assert client.get(reverse("catalog:systems") + "?profile=nowhere").status_code == 404


def test_other_profiles_are_one_link_away(client, default_catalog):
    from django.core.management import call_command

    call_command("load_catalog", "uva", "--no-activate", stdout=None)
    response = client.get(reverse("catalog:systems"))
    assertContains(
        response, '<a href="?profile=uva">University of Virginia Research Computing</a>', html=True
    )
    uva = client.get(reverse("catalog:systems") + "?profile=uva")
    assertContains(uva, "UVA HPC (Rivanna and Afton)")
    assertContains(uva, "50.89 SU per GPU-hour")
    assertContains(uva, 'href="?sort=memory&amp;profile=uva"')


def test_text_from_the_catalog_is_escaped(client, default_catalog):
    System.objects.filter(name="dawn").update(
        display_name="Dawn <script>alert(1)</script>", access_route="<b>bold</b>"
    )
    response = client.get(reverse("catalog:systems"))
    assertContains(response, "Dawn &lt;script&gt;alert(1)&lt;/script&gt;")
    assertContains(response, "&lt;b&gt;bold&lt;/b&gt;")
    assertNotContains(response, "<script>alert(1)")


def test_page_without_a_catalog_says_how_to_load_one(client, db):
    response = client.get(reverse("catalog:systems"))
    assert response.status_code == 200
    assertContains(response, "No catalog has been loaded yet.")


def test_page_takes_a_fixed_number_of_queries(client, default_catalog, django_assert_num_queries):
    # Profiles, systems, node types with accelerators, partitions and their node types, tooling,
    # and the profile's secure environments (issue 15: listed for sensitive data).
    with django_assert_num_queries(7):
        client.get(reverse("catalog:systems") + "?sort=-fp16")


def test_the_page_is_kept_until_the_catalog_changes(
    client, default_catalog, django_assert_max_num_queries
):
    url = reverse("catalog:systems") + "?sort=-fp16"
    first = client.get(url).content.decode()
    with django_assert_max_num_queries(1):  # the profiles, with the catalog's stamp
        again = client.get(url).content.decode()
    # The same page, each response with a freshly masked CSRF token.
    assert CSRF_TOKEN.sub("", again) == CSRF_TOKEN.sub("", first)
    System.objects.filter(name="dawn").update(display_name="Dawn Renamed")
    assertContains(client.get(url), "Dawn Renamed")
    dawn = System.objects.get(name="dawn")
    dawn.display_name = "Dawn Saved"
    dawn.save()
    assertContains(client.get(url), "Dawn Saved")


def test_a_kept_page_carries_each_visitors_own_csrf_token(default_catalog):
    from django.conf import settings
    from django.middleware.csrf import _does_token_match
    from django.test import Client

    visitors = [Client(), Client()]
    pages = [visitor.get(reverse("catalog:systems")).content.decode() for visitor in visitors]
    secrets = [visitor.cookies[settings.CSRF_COOKIE_NAME].value for visitor in visitors]
    assert secrets[0] != secrets[1]
    for page, secret in zip(pages, secrets, strict=True):
        assert _does_token_match(CSRF_TOKEN.search(page).group(1), secret)


def test_the_table_and_the_whole_page_are_kept_apart(client, default_catalog):
    url = reverse("catalog:systems")
    assert "<html" in client.get(url).content.decode()
    table = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert table.lstrip().startswith('<div id="catalog-table"')
    assert "<html" in client.get(url).content.decode()
