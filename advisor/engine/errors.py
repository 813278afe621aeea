"""Errors the engine raises for bad input; each names what was wrong so the UI can say so."""

from __future__ import annotations


class EstimateError(ValueError):
    """Input the engine cannot estimate from; the message is meant for the researcher."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ConfigError(EstimateError):
    """A config.json that is not one, or whose named field is missing or malformed."""
