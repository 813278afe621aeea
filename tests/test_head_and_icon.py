"""HEAD answers wherever GET does (monitors and link checkers use it), and the site has an icon."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/chart/", "/catalog/", "/accounts/login/", "/healthz"])
def test_head_answers_like_get_without_a_body(client, path):
    get = client.get(path)
    head = client.head(path)
    assert head.status_code == get.status_code
    assert head.status_code != 405
    assert head.content == b""
    assert head["Content-Type"] == get["Content-Type"]
    assert int(head["Content-Length"]) == len(get.content)


@pytest.mark.django_db
def test_head_of_a_missing_page_is_404(client):
    assert client.head("/no-such-page/").status_code == 404


@pytest.mark.django_db
def test_post_only_views_still_refuse_head(client, django_user_model):
    # Only GET's views answer HEAD: a view that takes POST alone still says 405.
    assert client.get("/accounts/logout/").status_code == 405
    assert client.head("/accounts/logout/").status_code == 405


@pytest.mark.django_db
def test_favicon_ico_points_at_the_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("/img/favicon.svg")
    page = client.get("/")
    assert b'rel="icon"' in page.content
