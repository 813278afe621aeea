"""What every option on one accelerator and one node type shares, worked out once per estimate:
the compute type and its reasons, the utilisation, the GPU counts a node type's partition
allows and the reasons that rule a node type out whatever the strategy (a mixin of
recommend.Evaluation, whose caches and request terms it reads)."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine import ranking, software
from advisor.engine.compute import compute_dtype_for, fp16_note, peak_tflops
from advisor.engine.device_memory import capacity_text, device_bytes
from advisor.engine.layouts import counts_for
from advisor.engine.models import AcceleratorSpec, NodeTypeSpec, PartitionSpec, SystemSpec
from advisor.engine.options import AcceleratorFacts, NodeFacts, Stack
from advisor.engine.roofline import eager_score_bytes, loss_traffic
from advisor.engine.speed import prefill_utilisation, training_utilisation


class FactGathering:
    """Mixin for recommend.Evaluation: `on_accelerator`, `layout` and `node_facts`."""

    def on_accelerator(self, acc: AcceleratorSpec, flash: bool = True) -> AcceleratorFacts:
        """What every node type with `acc` shares, worked out once per estimate; `flash`
        False: on a stack without a fused attention kernel (attention_fallback)."""
        key = (acc.name, flash)
        found = self.per_accelerator.get(key)
        if found is not None:
            return found
        wl = self.wl
        dtype = compute_dtype_for(acc, wl)
        no_dtype = None
        if dtype is None:
            no_dtype = f"no {wl.compute_dtype} on {acc.display_name}" + (
                "."
                if wl.compute_dtype != "bf16"
                else f", and {self.framework.name} does not train in fp16 (its recipes refuse it)."
                if self.training and not self.framework.fp16
                else " (use fp16)."
            )
        capacity = device_bytes(acc)
        legacy = acc.vendor.lower() == "nvidia" and not acc.bf16_supported
        fused = (
            wl.flash_attention and flash and not self.shape.eager_attention
        ) or self.framework.fused_softmax
        util = training_utilisation(
            acc,
            self.shape,
            flash_attention=wl.flash_attention and flash,
            distances=self.distances_by_generation.get(self.generations[acc.name].key, ()),
            compiled=wl.compiled,
            matmul_peak_tflops=peak_tflops(acc, dtype) if dtype == "fp32" else None,
            score_bytes=0.0 if fused else self.eager_score_bytes(dtype),
            loss_bytes=self.loss_bytes(dtype),
        )
        if not self.training:
            util = prefill_utilisation(util)
        dtype_note = None
        if dtype == "fp16" and wl.fp16_where_no_bf16:  # bf16 asked of a GPU without it
            dtype_note = fp16_note(acc, self.training)
        peak = peak_tflops(acc, dtype) if dtype else 0.0
        timed = bool(self.tokens is not None and peak)
        assumes = None
        if timed and util.calibrated:
            # The full citation is in the result's assumptions; the option names its source.
            assumes = _assumes(util.value, dtype, util.label, prompts=not self.training)
        found = self.per_accelerator[key] = AcceleratorFacts(
            dtype,
            no_dtype,
            capacity,
            capacity / (1 + self.margin),
            capacity_text(acc),
            util,
            peak,
            timed,
            assumes,
            self.legacy_extra if legacy else 0.0,
            dtype_note,
        )
        return found

    def layout(self, node: NodeTypeSpec, partition: PartitionSpec | None) -> tuple:
        """(GPU counts, those a single-GPU job may use, tensor parallelism within the node,
        multi-GPU data parallelism) for the node type in its partition; node types of the
        same shape share them."""
        key = (
            node.gpus_per_node,
            node.count,
            partition.max_nodes_per_job if partition is not None else None,
            partition.max_gpus_per_job if partition is not None else None,
        )
        found = self.layouts.get(key)
        if found is None:
            counts = counts_for(node, partition, self.limit)
            num_gpus = self.request.num_gpus
            if num_gpus is not None:
                counts = [k for k in counts if k == num_gpus] or [num_gpus]
            gpn = node.gpus_per_node
            found = self.layouts[key] = (
                counts,
                (1,) if 1 in counts else (),
                tuple(k for k in counts if 1 < k <= gpn),
                tuple(k for k in counts if k > 1),
            )
        return found

    def node_facts(
        self,
        system: SystemSpec,
        node: NodeTypeSpec,
        acc: AcceleratorSpec,
        sys_reasons: list[str],
        partitions: dict[str, PartitionSpec],
    ) -> NodeFacts:
        reasons = list(sys_reasons)
        if node.status == "retired":
            reasons.append(f"{node.name} on {system.display_name} is retired.")
        if self.request.accelerator is not None and acc.name != self.request.accelerator:
            reasons.append(f"You asked for {self.request.accelerator}.")
        gen = self.generations[acc.name]
        supported, software_reasons = software.check(
            system, acc, gen, self.tools_needed, weight_format=self.wl.weight_format
        )
        attention_note = None
        if not supported:
            attention_note = self.attention_fallback(system, acc, gen)
            if attention_note is not None:
                supported, software_reasons = True, []
        reasons.extend(software_reasons)
        flash = attention_note is None
        facts = self.on_accelerator(acc, flash)
        if facts.no_dtype is not None:
            reasons.append(facts.no_dtype)
        partition = partitions.get(node.name)
        counts, one, within_node, several = self.layout(node, partition)
        limited = None
        if system.status == "limited":
            note = system.status_note.split(". ")[0].rstrip(".")
            limited = f"{system.display_name} has limited availability" + (
                f" ({note})." if note else "."
            )
        queue = system.typical_queue_wait_hours
        return NodeFacts(
            system,
            node,
            acc,
            reasons,
            supported,
            software_reasons,
            software.PLATFORM_CHANGES.get(gen.platform),
            ranking.charge_rate(system, node, acc, self.profile_rates, self.currency),
            facts.dtype,
            facts.capacity,
            facts.headroom_limit,
            facts.capacity_gb,
            facts.util,
            facts.peak,
            facts.timed,
            facts.assumes,
            facts.extra,
            partition,
            counts,
            one,
            within_node,
            several,
            node.price_per_gpu_hour or system.price_per_gpu_hour,
            system.kind == "cloud",
            24 if queue is None else queue,
            limited,
            system.trial_gpu_hours,
            facts.dtype_note,
            Stack(self.training and software.eight_bit_optimizers(system, acc, gen), flash),
            attention_note,
        )

    def eager_score_bytes(self, dtype: str | None) -> float:
        """What eager attention moves over its scores per token and layer for this job
        (roofline.eager_score_bytes): softmax and dropout run in fp32 under autocast."""
        wl = self.wl
        element = 4 if wl.autocast or dtype == "fp32" else wl.act_bytes
        dropout = self.training and self.shape.family in c.DROPOUT_FAMILIES
        return eager_score_bytes(
            self.shape, wl.seq_len, element, dropout=dropout, training=self.training
        )

    def loss_bytes(self, dtype: str | None) -> float:
        """What this training job's loss moves per token and layer beyond a fused one
        (roofline.LossTraffic.beyond_fused)."""
        traffic = loss_traffic(self.shape, self.wl, dtype)
        return traffic.beyond_fused(self.shape) if traffic is not None else 0.0

    def attention_fallback(self, system: SystemSpec, acc: AcceleratorSpec, gen) -> str | None:
        """Why a training job without a fused attention kernel on this node runs with eager
        attention instead, where that kernel is all it lacks: PyTorch's
        scaled_dot_product_attention falls back to its math kernel on any GPU, keeping the
        scores for backward (sized by the eager-attention search). None where the job needs
        no fused kernel or lacks something else too."""
        if software.FLASH not in self.tools_needed:
            return None
        others = tuple(tool for tool in self.tools_needed if tool != software.FLASH)
        if not software.check(system, acc, gen, others, weight_format=self.wl.weight_format)[0]:
            return None
        source = software.cell(system, gen, software.FLASH).source
        return (
            f"No fused attention kernel on {acc.display_name} ({source}): sized and timed with "
            "eager attention, whose scores each layer keeps for the backward pass."
        )


def _assumes(
    util: float, dtype: str | None, label: str, *, plain: bool = False, prompts: bool = False
) -> str:
    if prompts:
        return (
            f"assumes prompts run at {util:.0%} of the {dtype} dense peak, as training's "
            f"matmuls do ({label})."
        )
    without = " without recomputation" if plain else ""
    return f"assumes {util:.0%} of the {dtype} dense peak{without} ({label})."


def utilisation_reason(f: NodeFacts, level: str) -> str:
    """The option's calibrated-utilisation reason for a recipe at checkpointing `level`: the
    node's (`NodeFacts.assumes`, the runs' executed-FLOP figure) unless the recipe does not
    recompute and is credited with another figure (speed.Utilisation.for_recipe)."""
    util = f.util
    value = util.for_recipe(level)
    if f.assumes is None or (value == util.value and not util.no_recompute_label):
        return f.assumes
    return _assumes(value, f.dtype, util.label_for_recipe(level), plain=True)
