"""The engine's version, which every result carries (EstimateResult.engine_version)."""

ENGINE_VERSION = "1.44.0"
