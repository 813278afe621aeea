"""An assumption's source as a reader wants it: the web addresses it cites are links and the
code it quotes (between backticks) is set as code, instead of one run of plain text."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# `code`, or a web address written with or without its scheme (pytorch.org/docs/...,
# github.com/org/repo/issues/1): a host of dotted names ending in a known top-level domain.
_CITED = re.compile(
    r"`(?P<code>[^`]+)`"
    r"|(?P<url>\b(?:https?://)?(?:[a-z0-9-]+\.)+(?:org|com|io|ai|dev|net|co|uk|edu)"
    r"(?:/[^\s,;)'`]*[^\s,;)'`.])?)"
)


@register.filter
def source_html(text) -> SafeString:
    """Escaped text with <a href> for each cited address and <code> for each quoted snippet."""
    text = "" if text is None else str(text)
    parts: list[str] = []
    last = 0
    for match in _CITED.finditer(text):
        parts.append(escape(text[last : match.start()]))
        if match.group("code") is not None:
            parts.append(format_html("<code>{}</code>", match.group("code")))
        else:
            url = match.group("url")
            href = url if url.startswith(("http://", "https://")) else f"https://{url}"
            parts.append(format_html('<a href="{}">{}</a>', href, url))
        last = match.end()
    parts.append(escape(text[last:]))
    return mark_safe("".join(parts))  # noqa: S308 - every part above is escaped
