"""What the engine tests estimate from: the real model configurations kept beside them
(tests/engine/configs) and the default catalog as the app loads it (the data file with the
shared benchmarks, bench/engine_rankings.catalog_from_file)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from bench.engine_rankings import catalog_from_file

CONFIGS = Path(__file__).resolve().parent / "configs"


def config(name: str) -> dict:
    """config.json of a model kept in tests/engine/configs ("owner__name")."""
    return json.loads((CONFIGS / name / "config.json").read_text())


@cache
def default_catalog():
    return catalog_from_file()
