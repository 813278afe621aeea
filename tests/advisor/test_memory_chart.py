"""The memory chart: one template draws it, escaping what it shows, and says in words what fits."""

from __future__ import annotations

from django.template import Context, Template

from advisor.memory_svg import MemoryBar, memory_chart_svg

A100 = MemoryBar(
    label="NVIDIA A100 80GB x 1 (Baskerville)",
    capacity_bytes=80_000_000_000,
    components={"weights": 14_000_000_000, "optimizer_states": 70_000_000_000},
)


def test_the_chart_says_in_words_whether_each_bar_fits():
    roomy = MemoryBar(label="H200 x 1", capacity_bytes=141_000_000_000, components=A100.components)
    svg = memory_chart_svg(bars=[A100, roomy])
    assert svg.startswith('<svg role="img" xmlns="http://www.w3.org/2000/svg" class="memory-chart"')
    assert "needs 84.0 GB of 80.0 GB: does NOT fit (dashed line: capacity)" in svg
    assert "needs 84.0 GB of 141.0 GB: fits (dashed line: capacity)" in svg
    # Each component has its pattern once, whatever the number of bars.
    assert svg.count('<pattern id="mem-weights"') == 1
    assert svg.count('fill="url(#mem-optimizer_states)"') == 3  # two bars and the legend


def test_labels_and_titles_are_escaped():
    hostile = MemoryBar(label='<script>alert("x")</script>', capacity_bytes=None, components={})
    svg = memory_chart_svg(bars=[hostile], title="Memory & <b>more</b>")
    assert "<script>" not in svg
    assert "<b>" not in svg
    assert "&lt;script&gt;" in svg
    assert "Memory &amp; &lt;b&gt;more&lt;/b&gt;" in svg


def test_no_bars_draw_nothing():
    assert memory_chart_svg(bars=[]) == ""


def test_the_gigabytes_filter_is_the_one_byte_format():
    rendered = Template(
        "{% load catalog_format %}{{ a|gigabytes }}|{{ b|gigabytes:2 }}|{{ c|gigabytes }}"
    ).render(Context({"a": 80_000_000_000, "b": 1_234_567_890_123, "c": None}))
    assert rendered == "80.0 GB|1,234.57 GB|"
