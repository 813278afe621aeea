"""The one way browser tests keep screenshots: PNG files in test-artifacts/screenshots/.

The folder is ignored by git (.gitignore: /test-artifacts/); keep it as a run's artifact, so a
reviewer can see each page a test looked at. A name says which test, step and viewport it shows
("16-azure-result-phone-no-js"); a later run overwrites it.
"""

from __future__ import annotations

import re
from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def save_screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """Save what `page` shows as test-artifacts/screenshots/<name>.png and return the path."""
    if not _SAFE_NAME.fullmatch(name):
        raise ValueError(f"screenshot names are letters, digits, '.', '_' and '-': {name!r}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=path, full_page=full_page)
    return path
