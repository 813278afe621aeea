"""The decoder-only family table: one row per transformers model_type the engine counts exactly.

Each row says how transformers' modeling_<family>.py builds the model; defaults follow its
configuration_<family>.py (github.com/huggingface/transformers, src/transformers/models/). The
published counts each row is checked against are in tests/engine/test_architecture.py and the
bundled configs' index (advisor/model_configs/index.json).

The rows live beside the adjustments only their families use, one module per group that changes
together: `dense` (Llama's line), `moe` (mixture-of-experts), `deepseek` (latent attention and
sparse attention), `deltanet` (Qwen3.5 and Qwen3-Next's linear attention) and `gpt` (GPT-2 and
the decoders of its era, and Fuyu).
"""

from __future__ import annotations

from advisor.engine.architecture.decoders import Decoder
from advisor.engine.architecture.families import deepseek, deltanet, dense, gpt, moe
from advisor.engine.architecture.families.gpt import fuyu_blueprint

DECODERS: dict[str, Decoder] = {
    **dense.DECODERS,
    **moe.DECODERS,
    **deepseek.DECODERS,
    **deltanet.DECODERS,
    **gpt.DECODERS,
}

__all__ = ["DECODERS", "fuyu_blueprint"]
