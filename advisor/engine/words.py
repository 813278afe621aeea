"""Numbers and names as a person reads them: "1 GPU", "2 GPUs", "an Intel", "1.3 billion
parameters", "less than 0.1 GPU hours", "tensor parallelism" (never "tensor_parallel")."""

from __future__ import annotations

import math

STRATEGY_WORDS = {
    "single": "on a single GPU",
    "ddp": "with data parallelism (DDP)",
    "fsdp": "with fully sharded data parallelism (FSDP)",
    "zero1": "with ZeRO stage 1",
    "zero2": "with ZeRO stage 2",
    "zero3": "with ZeRO stage 3",
    "zero3_offload": "with ZeRO stage 3 and CPU offload",
    "tensor_parallel": "with tensor parallelism",
    "pipeline_parallel": "with vLLM's pipeline parallelism (a stage of the layers per GPU)",
}
STRATEGY_NAMES = {
    "single": "one GPU",
    "ddp": "data parallel (DDP)",
    "fsdp": "fully sharded (FSDP)",
    "zero1": "ZeRO stage 1",
    "zero2": "ZeRO stage 2",
    "zero3": "ZeRO stage 3",
    "zero3_offload": "ZeRO stage 3 with CPU offload",
    "tensor_parallel": "tensor parallel",
    "pipeline_parallel": "pipeline parallel",
}
# Acronyms read letter by letter that start with a vowel sound: "an NVIDIA", "an HPC", "an MI210".
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")


def plural(count: float, word: str, words: str | None = None) -> str:
    """ "1 GPU", "2 GPUs", "1.5 epochs", "1,024 sequences"."""
    number = f"{count:,}" if isinstance(count, int) else f"{count:,.6g}"
    return f"{number} {word if count == 1 else (words or word + 's')}"


def article(name: str) -> str:
    """ "a" or "an" before a name: "an Intel", "an NVIDIA", "an A100", "a Graphcore"."""
    first = name.split()[0] if name.split() else name
    if not first:
        return "a"
    if first.isupper() or first[0].isdigit() or (len(first) > 1 and first[1].isdigit()):
        return "an" if first[0].upper() in _VOWEL_SOUND_LETTERS or first[0] == "8" else "a"
    return "an" if first[0].lower() in "aeiou" else "a"


def with_article(name: str) -> str:
    return f"{article(name)} {name}"


def hours(value: float | None, unit: str = "GPU hours") -> str:
    """Never "0.0": small figures say "less than 0.1"; one hour is singular."""
    if value is None:
        return f"unknown {unit}"
    if value == 0:
        return f"0 {unit}"
    if value < 0.1:
        return f"less than 0.1 {unit}"
    text = f"{value:,.1f}" if value < 10 else f"{value:,.0f}"
    if text in ("1.0", "1"):
        return f"1 {unit.replace('hours', 'hour')}"
    return f"{text} {unit}"


def about_hours(value: float | None, unit: str = "GPU hours") -> str:
    """`hours` with "about" before a figure ("about 3.0 hours"); a figure rounded to nothing
    is "less than 0.1 hours"."""
    if value is not None and value <= 0:
        return f"less than 0.1 {unit}"
    text = hours(value, unit)
    return text if text.startswith(("less than", "unknown")) else f"about {text}"


def whole_hours(value: float, unit: str = "GPU hours") -> str:
    """A request asks for whole hours, rounded up, at least one."""
    count = max(1, math.ceil(value))
    return f"{count:,} {unit.replace('hours', 'hour') if count == 1 else unit}"


def quantity(count: float, unit: str) -> str:
    """A large count in words: "48 billion FLOPs", "1.3 billion parameters", "3 trillion"."""
    for scale, name in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if count >= scale:
            return f"{count / scale:,.3g} {name} {unit}"
    return f"{count:,.3g} {unit}"


def gigabytes(n_bytes: float) -> str:
    """Memory as the vendors count it (1 GB = 1e9 bytes): "40.0 GB", "1,128.0 GB"; never
    "0.0 GB": a part too small to show at this precision says so."""
    if 0 < n_bytes < 0.05e9:
        return "under 0.1 GB"
    return f"{n_bytes / 1e9:,.1f} GB"


def parameters(count: int) -> str:
    """ "7 billion parameters", "1.3 billion parameters", "110 million parameters"."""
    if count >= 1e6:
        return quantity(count, "parameters")
    return plural(int(count), "parameter")


def strategy_words(strategy: str) -> str:
    return STRATEGY_WORDS.get(strategy, strategy.replace("_", " "))


def gpus_and_strategy(num_gpus: int, strategy: str, nodes: int = 1, serving: bool = False) -> str:
    """'a single GPU', or '4 GPUs' followed by the strategy in words; a model served over
    `nodes` nodes says how it is split."""
    if strategy == "single" and num_gpus == 1:
        return "a single GPU"
    if serving and strategy == "tensor_parallel" and nodes > 1:
        return (
            f"{plural(num_gpus, 'GPU')} on {nodes} nodes (tensor parallel within each node, a "
            "pipeline stage per node)"
        )
    return f"{plural(num_gpus, 'GPU')} {strategy_words(strategy)}"
