"""The per-layer roofline that moves a measured utilisation to another model and chip: each
layer's matmuls run at the peak and its elementwise work moves E x width bytes per token at the
memory bandwidth (c.ELEMENTWISE_BYTES_PER_WIDTH, set from llm-foundry's 125M and 7B rows), so a
layer spends `1 / (1 + E x h x peak / (6 x p_layer x bandwidth))` of its time in matmuls; under
torch.compile the elementwise bytes shrink to c.COMPILE_ELEMENTWISE_SHARE of the eager ones
(speed.py reads both). Attention without a fused kernel adds its scores' traffic
(eager_score_bytes), an unfused loss its logits' (loss_traffic), and an fp32 job's
matmuls run at the fp32 peak."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine import constants as c
from advisor.engine.memory_terms import Workload, logits_never_formed
from advisor.engine.models import AcceleratorSpec
from advisor.engine.shape import ModelShape


def roofline_factor(
    shape: ModelShape,
    acc: AcceleratorSpec,
    peak_tflops: float | None = None,
    score_bytes: float = 0.0,
) -> float:
    """Fraction of a layer's time spent in matmuls: matmuls at peak, elementwise bytes at the
    memory bandwidth (c.ELEMENTWISE_BYTES_PER_WIDTH). `peak_tflops`: the peak of the dtype the
    job's matmuls run in, where it is not the 16-bit tensor peak (fp32 matmuls run at a
    fraction of it, so the same elementwise bytes cost them relatively less). `score_bytes`:
    what eager attention moves over its scores per token and layer (eager_score_bytes)."""
    return roofline(layer_width(shape), layer_params(shape), acc, peak_tflops, score_bytes)


def eager_score_bytes(
    shape: ModelShape, seq_len: int, element_bytes: int, *, dropout: bool, training: bool
) -> float:
    """Bytes eager attention moves over its heads x keys scores per token and layer
    (c.EAGER_SCORE_PASSES passes in a training step, 4 fewer without attention dropout, half
    for a forward pass alone), averaged over the layers, of which only the softmax-attention
    ones score."""
    passes = c.EAGER_SCORE_PASSES.value - (0 if dropout else 4)
    if not training:
        passes /= 2
    share = shape.softmax_layers / max(shape.total_layers, 1)
    return passes * element_bytes * shape.num_attention_heads * seq_len * share


# The fp32 cast of 16-bit logits and its backward (c.LOSS_TRAFFIC_BYTES): read 2, write 4 bytes
# per entry, then read 4, write 2; fp32 logits skip both.
_CAST_BYTES = 12.0


@dataclass(frozen=True, slots=True)
class LossTraffic:
    """What a training job's loss moves over its logits, per token (loss_traffic)."""

    per_entry: float  # bytes per scored token and vocabulary entry, forward + backward
    scored_share: float  # of the tokens, those whose logits are formed

    def bytes_per_token(self, shape: ModelShape) -> float:
        return self.per_entry * shape.vocab_size * self.scored_share

    def beyond_fused(self, shape: ModelShape) -> float:
        """Bytes per token and layer beyond the fused loss of the calibration runs
        (c.FUSED_LOSS_TRAFFIC_BYTES), spread over the layers as `layer_params` spreads the LM
        head's matmul: what the per-layer roofline adds. Next to a layer's own elementwise
        traffic it is small for a 7B model (Llama 2's 32,000 entries add about 3 %) and large
        for a small one with a large vocabulary (GPT-2 124M's 50,257 add about half)."""
        per_layer = _beyond_fused(self.per_entry, shape.vocab_size, shape.total_layers)
        return per_layer * self.scored_share


def loss_bytes_per_entry(*, fp32_logits: bool) -> float:
    """c.LOSS_TRAFFIC_BYTES, less the two casts where the logits are fp32 already."""
    return c.LOSS_TRAFFIC_BYTES.value - (_CAST_BYTES if fp32_logits else 0.0)


def _beyond_fused(per_entry: float, vocab_size: int, layers: float) -> float:
    """Bytes per token and layer a loss of `per_entry` moves beyond a fused one."""
    extra = per_entry - c.FUSED_LOSS_TRAFFIC_BYTES.value
    if extra <= 0 or vocab_size <= 0:
        return 0.0
    return extra * vocab_size / max(layers, 1)


def loss_traffic(shape: ModelShape, wl: Workload, dtype: str | None) -> LossTraffic | None:
    """What a training job's loss moves over its logits: the fp32 loss of 16-bit logits
    (c.LOSS_TRAFFIC_BYTES), without the two casts where the logits are fp32 already; None
    where nothing is moved beyond a fused loss (inference, a model without a vocabulary head,
    a loss that never forms the logits whole: Liger's fused linear cross-entropy, Unsloth's
    Cut Cross-Entropy). Only a GRPO completion's tokens are scored, and an encoder-decoder's
    target."""
    never_formed = logits_never_formed(wl.logits_per_entry, wl.loss_chunk_tokens)
    if not wl.training or not shape.vocab_head or never_formed:
        return None
    per_entry = loss_bytes_per_entry(fp32_logits=dtype == "fp32" or wl.act_bytes != 2)
    scored = 1.0
    if wl.rollout is not None:
        scored = wl.rollout.completion_tokens / max(wl.seq_len, 1)
    elif wl.decoder_len and wl.encoder_len:
        scored = min(wl.decoder_len / max(wl.seq_len, 1), 1.0)
    return LossTraffic(per_entry, scored)


def run_loss_bytes(
    vocab_size: int | None, layers: float, fused: bool | None, *, fp32: bool = False
) -> float:
    """What a measured run's own loss moved per token and layer beyond a fused one
    (LossTraffic.beyond_fused for the run): none unless its benchmark says the loss was not
    fused and gives the vocabulary (an institute's trial run under the Transformers Trainer;
    Megatron-LM 2019's fp32 vocab-parallel cross-entropy), so that a job with the same loss
    is not charged it twice."""
    if fused is not False or not vocab_size:
        return 0.0
    return _beyond_fused(loss_bytes_per_entry(fp32_logits=fp32), vocab_size, layers)


def unfused_loss_share(shape: ModelShape, acc: AcceleratorSpec, loss_bytes: float) -> float:
    """The share of a layer's time (and so of the GPU hours) that `loss_bytes` of an unfused
    loss (LossTraffic.beyond_fused) take on `acc`: what a fused loss would save."""
    if loss_bytes <= 0:
        return 0.0
    return 1 - roofline_factor(shape, acc, None, loss_bytes) / roofline_factor(shape, acc)


COMPILE_WHY = "torch.compile fusing the elementwise kernels between matmuls"


def compile_gain(
    shape: ModelShape,
    acc: AcceleratorSpec,
    peak_tflops: float | None = None,
    loss_bytes: float = 0.0,
) -> float:
    """How much faster a layer runs when torch.compile fuses its elementwise work: the per-layer
    roofline with c.COMPILE_ELEMENTWISE_SHARE of the eager elementwise bytes, over the eager
    one (the catalog's measurements ran eager). Most for small models on chips with little
    bandwidth per FLOP: about 1.10 for Llama 3.2 3B on an A100, 1.16 for Llama 3.1 8B on an
    H100 with 2.4 TB/s, the pair the constant was set from. `loss_bytes`: an unfused loss's
    traffic (LossTraffic.beyond_fused), whose cast and log-softmax chain Inductor fuses the same way
    (the loss is compiled with the model where the model's forward computes it, and torchtune
    compiles its loss function too)."""
    eager = roofline_factor(shape, acc, peak_tflops, loss_bytes)
    ratio = 1 / eager - 1
    return (1 + ratio) / (1 + ratio * c.COMPILE_ELEMENTWISE_SHARE.value)


def layer_width(shape: ModelShape) -> int:
    return max(shape.hidden_size, 1)


def layer_params(shape: ModelShape) -> float:
    layers = max(shape.total_layers, 1)
    return max(shape.flop_params / layers, 1.0)


def roofline(
    width: float,
    layer_params: float,
    acc: AcceleratorSpec,
    peak_tflops: float | None = None,
    score_bytes: float = 0.0,
) -> float:
    sixteen_bit = acc.bf16_tflops or acc.fp16_tflops or acc.fp16_nontensor_tflops or 1.0
    peak = (peak_tflops or sixteen_bit) * 1e12
    bandwidth = max(acc.memory_bandwidth_gb_s, 1.0) * 1e9
    elementwise = c.ELEMENTWISE_BYTES_PER_WIDTH.value * width + score_bytes
    ratio = elementwise * peak / (6 * layer_params * bandwidth)
    return 1 / (1 + ratio)


def reference_roofline(width: int, acc: AcceleratorSpec) -> float:
    """The factor for a dense decoder of `width` (12 x width^2 matmul parameters per layer)."""
    return roofline(width, 12.0 * width * width, acc)
