"""The `Constant` record every engine constant is, and the unit sizes they share."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.models import Assumption, trusted


@dataclass(frozen=True, slots=True)
class Constant:
    name: str
    value: float
    unit: str
    source: str
    why: str

    def assumption(self, value_text: str | None = None) -> Assumption:
        text = value_text if value_text is not None else f"{self.value:g} {self.unit}".strip()
        return trusted(
            Assumption, {"name": self.name, "value": f"{text} ({self.why})", "source": self.source}
        )


GIB = 1024**3
MIB = 1024**2

# --- Bytes per element ------------------------------------------------------------------------

BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
