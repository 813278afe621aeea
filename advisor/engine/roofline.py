"""The per-layer roofline that moves a measured utilisation to another model and chip: each
layer's matmuls run at the peak and its elementwise work moves E x width bytes per token at the
memory bandwidth (c.ELEMENTWISE_BYTES_PER_WIDTH, set from llm-foundry's 125M and 7B rows), so a
layer spends `1 / (1 + E x h x peak / (6 x p_layer x bandwidth))` of its time in matmuls; under
torch.compile the elementwise bytes shrink to c.COMPILE_ELEMENTWISE_SHARE of the eager ones
(speed.py reads both). Attention without a fused kernel adds its scores' traffic
(eager_score_bytes), and an fp32 job's matmuls run at the fp32 peak."""

from __future__ import annotations

from advisor.engine import constants as c
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


COMPILE_WHY = "torch.compile fusing the elementwise kernels between matmuls"


def compile_gain(
    shape: ModelShape, acc: AcceleratorSpec, peak_tflops: float | None = None
) -> float:
    """How much faster a layer runs when torch.compile fuses its elementwise work: the per-layer
    roofline with c.COMPILE_ELEMENTWISE_SHARE of the eager elementwise bytes, over the eager
    one (the catalog's measurements ran eager). Most for small models on chips with little
    bandwidth per FLOP: about 1.10 for Llama 3.2 3B on an A100, 1.16 for Llama 3.1 8B on an
    H100 with 2.4 TB/s, the pair the constant was set from."""
    eager = roofline_factor(shape, acc, peak_tflops)
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
