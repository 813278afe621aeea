"""Why a recipe (recipe.RecipeSearch's choice): what each memory-saving knob buys and how the
global batch is made up, in the practitioner's terms, with the words for the knobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.engine import constants as c
from advisor.engine.tensor_parallel import split as split_layout
from advisor.engine.words import plural

if TYPE_CHECKING:
    from advisor.engine.recipe import Choice, RecipeSearch

LEVEL_WORDS = {
    "none": "no activation checkpointing",
    "selective": "selective recomputation",
    "full": "full activation checkpointing",
}
OPTIMIZER_WORDS = {
    "adamw": "AdamW",
    "adamw_8bit": "8-bit AdamW",
    "paged_adamw": "paged AdamW",
    "paged_adamw_8bit": "paged 8-bit AdamW",
    "sgd": "SGD",
}


def recipe_reasons(
    search: RecipeSearch,
    choice: Choice,
    strategy: str,
    n: int,
    extra: float = 0.0,
    capacity: float | None = None,
    headroom_limit: float | None = None,
) -> list[str]:
    """Why this recipe: what each memory-saving knob buys, in the practitioner's terms.
    `capacity` and `headroom_limit`: the bytes per GPU it had, whole and with the memory
    margin kept free (without `extra`); a recipe within the margin was sized for it."""
    if not search.training:
        return []
    out = []
    gpus = f"{n} GPUs" if n > 1 else "one GPU"
    fits = capacity is None or choice.total <= capacity * 1.0001
    if choice.level != "none":
        why = _checkpointing_reason(
            search, choice, strategy, n, extra, capacity, headroom_limit, gpus, fits
        )
        if why is not None:
            out.append(why)
    elif search.default_level != "none" and "none" in search.levels:
        # Said as a share of the checkpointed run's compute: recomputation adds 50 % to a
        # LoRA step (4N -> 6N per token), so turning it off saves a third, not half.
        saved = 1 - search.flops["none"] / search.flops[search.default_level]
        out.append(
            f"{search.framework.name} turns on {LEVEL_WORDS[search.default_level]} by default; "
            f"it fits without, which saves about {saved:.0%} of the compute (turn it off)."
        )
    if fits and choice.optimizer == "adamw_8bit" and (len(search.optimizers) > 1):
        plain = search.model.linear(strategy, n, choice.level, "adamw")
        need = plain[0] + choice.micro * plain[1] + extra
        out.append(
            f"8-bit AdamW (bitsandbytes) makes it fit; AdamW would need {need / 1e9:.0f} GB "
            "per GPU."
        )
    if choice.accumulation > 1 or search.global_batch != choice.global_batch:
        out.append(_batch_reason(search, choice, strategy, n))
    if choice.efficiency < 0.95:
        wl = search.wl
        tokens = (
            f"{wl.seq_len} tokens"
            if wl.sequences_per_sample == 1
            else (f"{wl.sequences_per_sample} x {wl.seq_len} tokens (a pair's sequences)")
        )
        out.append(
            f"micro-batch {choice.micro} x {tokens} keeps the GPU about "
            f"{choice.efficiency:.0%} as busy as a large one (included in the GPU hours)."
        )
    return out


def _checkpointing_reason(
    search: RecipeSearch,
    choice: Choice,
    strategy: str,
    n: int,
    extra: float,
    capacity: float | None,
    headroom_limit: float | None,
    gpus: str,
    fits: bool,
) -> str | None:
    """What the recipe's recomputation buys: a fit, a larger micro-batch, the memory margin;
    or, where nothing fits, how far even the leanest recipe is off. None: nothing to say."""
    without = search.model.linear(strategy, n, "none", choice.optimizer)
    need = without[0] + choice.micro * without[1] + extra
    more = choice.flops_per_token / search.flops["none"] - 1
    limit = capacity
    if headroom_limit is not None and choice.total <= headroom_limit * 1.0001:
        limit = headroom_limit
    fits_without = limit is None or without[0] + without[1] <= limit
    smallest = without[0] + without[1] + extra
    if search.pinned_level:
        return _pinned_level_reason(search, choice, need, extra, limit, fits_without, more)
    if search.pinned_micro and need > (choice.total + extra) * 1.0001 and fits:
        return (
            f"{LEVEL_WORDS[choice.level]} makes your micro-batch of {choice.micro} fit "
            f"{gpus} at +{more:.0%} compute; without it it needs {need / 1e9:.0f} GB "
            "per GPU."
        )
    if choice.micro > 1 and fits_without and limit is not None and not search.pinned_micro:
        # Chosen for speed: without recomputation only a smaller micro-batch fits,
        # and the search found it slower even with the recomputation added.
        largest = max(int((limit - without[0]) // max(without[1], 1.0)), 1)
        return (
            f"{LEVEL_WORDS[choice.level]} lets micro-batch {choice.micro} fit, which "
            f"runs faster even at +{more:.0%} compute than micro-batch {largest}, the "
            "largest that fits without it."
        )
    if limit is not None and limit != capacity and smallest - extra <= capacity:
        # It would fit without, but into the margin the sizing keeps free.
        card = (capacity + extra) / 1e9
        return (
            f"{LEVEL_WORDS[choice.level]} keeps {c.MEMORY_MARGIN.value:.0%} of the "
            f"memory free on {gpus} at +{more:.0%} compute; without it "
            + ("even a micro-batch of 1 " if choice.micro > 1 else "it ")
            + f"needs {smallest / 1e9:.1f} of the {card:.0f} GB per GPU, too close to "
            "the limit to run safely."
        )
    if not fits:
        # Nothing fits: this is the leanest recipe, and the option says it does not fit.
        lean = "" if choice.optimizer == "adamw" else f" and {OPTIMIZER_WORDS[choice.optimizer]}"
        return (
            f"even with {LEVEL_WORDS[choice.level]} (+{more:.0%} compute){lean} it needs "
            f"{(choice.total + extra) / 1e9:.0f} GB per GPU on {gpus}; without "
            f"checkpointing {need / 1e9:.0f} GB."
        )
    if need > (choice.total + extra) * 1.0001:
        return f"{LEVEL_WORDS[choice.level]} makes it fit {gpus} at +{more:.0%} compute; " + (
            f"without it even a micro-batch of 1 needs {smallest / 1e9:.0f} GB per GPU."
            if choice.micro > 1
            else f"without it it needs {need / 1e9:.0f} GB per GPU."
        )
    return None


def _pinned_level_reason(
    search: RecipeSearch,
    choice: Choice,
    need: float,
    extra: float,
    limit: float | None,
    fits_without: bool,
    more: float,
) -> str:
    """The researcher asked for the checkpointing: say what it costs and what it saves."""
    if limit is not None and need - extra <= limit:
        fit_words = "it fits without, and would run faster (gradient_checkpointing false)"
    elif fits_without and not search.pinned_micro:
        fit_words = (
            f"without it micro-batch {choice.micro} needs {need / 1e9:.0f} GB per "
            "GPU but a smaller one fits (leave gradient_checkpointing open and the "
            "estimate weighs the two)"
        )
    else:
        fit_words = f"without it it needs {need / 1e9:.0f} GB per GPU"
    return f"{LEVEL_WORDS[choice.level]} as you asked, at +{more:.0%} compute; " + fit_words + "."


def _batch_reason(search: RecipeSearch, choice: Choice, strategy: str, n: int) -> str:
    """How the global batch is made up (micro-batch x accumulation x ranks), and why it is
    larger than the one asked for or assumed where it is."""
    ranks = choice.global_batch // max(choice.micro * choice.accumulation, 1)
    # A tensor-parallel group shares its micro-batches: count data-parallel ranks.
    rank = "GPU" if split_layout(strategy, n)[1] == 1 else "data-parallel rank"
    why = ""
    if choice.global_batch > search.global_batch:
        asked = f"{search.batch_words} {search.global_batch}"
        if ranks > search.global_batch:
            why = f" ({asked}: every {rank} needs at least one sample)."
        elif search.pinned_micro and choice.micro * ranks > search.global_batch:
            why = f" ({asked}: every {rank} runs the micro-batch of {choice.micro} pinned)."
        else:
            why = (
                f" ({asked}, which {plural(ranks, rank)} cannot share evenly: each "
                "takes the same whole number of sequences)."
            )
    return (
        f"global batch {choice.global_batch} = micro-batch {choice.micro} x "
        f"{plural(choice.accumulation, 'accumulation step')} x {plural(ranks, rank)}" + (why or ".")
    )
