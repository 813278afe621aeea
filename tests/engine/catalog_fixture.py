"""The catalog the engine's tests rank against, loaded the way every catalog reaches the engine.

The figures live in tests/engine/data/engine_catalog.json, a catalog data file like
catalog/data/*.json: checked by the same schema (catalog.data_schema, sources required) and
turned into the engine's specs by the same `CatalogFile.to_spec()` the ranking bench uses,
which builds what advisor.engine_catalog.engine_catalog() builds after loading the file.
Retired entries are kept, so tests can check that the engine says why it passes them over.
It is smaller and older than the real catalogs on purpose: the tests pin exact outcomes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from advisor.engine.models import CatalogSpec
from catalog.data_file import validate_catalog_file

DATA_FILE = Path(__file__).resolve().parent / "data" / "engine_catalog.json"


@cache
def catalog() -> CatalogSpec:
    return validate_catalog_file(DATA_FILE).to_spec(include_retired=True)


ACCELERATORS = catalog().accelerators
SYSTEMS = catalog().systems
BENCHMARKS = catalog().benchmarks
