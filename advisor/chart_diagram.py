"""A flowchart drawn as a Mermaid graph, with the researcher's path marked in words."""

from __future__ import annotations

import re

from advisor.flowchart import Edge, Flowchart, Node


def chart_mermaid(chart: Flowchart, *, highlight: list[str] | None = None) -> str:
    """The chart as a Mermaid graph; steps in `highlight` are drawn as the researcher's path."""
    lines = ["graph TD"]
    on_path_set = set(highlight or [])
    for node in chart.nodes:
        # The path is marked in words too, never by line weight or colour alone.
        label = ("Your path: " if node.id in on_path_set else "") + _mermaid_text(node.title)
        if node.kind == "question":
            lines.append(f'  {node.id}["{label}"]')
        elif node.kind == "decision":
            lines.append(f'  {node.id}{{"{label}"}}')
        else:
            lines.append(f'  {node.id}(["{label}"])')
    edge_index = 0
    path_edges: list[int] = []
    on_path = highlight or []
    pairs = set(zip(on_path, on_path[1:], strict=False))
    for node in chart.nodes:
        for edge in node.next:
            text = _mermaid_text(edge.label or edge_label(node, edge, chart.by_id))
            arrow = f' -- "{text}" --> ' if text else " --> "
            lines.append(f"  {node.id}{arrow}{edge.to}")
            if (node.id, edge.to) in pairs:
                path_edges.append(edge_index)
            edge_index += 1
    lines.append("  classDef onpath stroke-width:4px,stroke-dasharray:0,font-weight:bold")
    if on_path:
        lines.append(f"  class {','.join(on_path)} onpath")
    for index in path_edges:
        lines.append(f"  linkStyle {index} stroke-width:4px")
    return "\n".join(lines)


def edge_label(node: Node, edge: Edge, by_id: dict[str, Node]) -> str:
    if not edge.when:
        return "otherwise" if len(node.next) > 1 else ""
    parts = []
    for condition in edge.when:
        source = by_id[condition.step]
        values = [condition.equals] if condition.equals is not None else (condition.in_ or [])
        if values:
            labels = [source.choice_labels.get(v) or source.outcomes.get(v) or v for v in values]
            # Long choice labels read badly on an arrow: keep the part before the colon.
            parts.append(" or ".join(label.split(":")[0] for label in labels))
        elif condition.answered is not None:
            given = "given" if condition.answered else "blank"
            parts.append(f"{source.title.rstrip('?')}: {given}")
        else:
            parts.append(source.title)
    return ", ".join(parts)


def _mermaid_text(text: str) -> str:
    # Mermaid labels sit inside double quotes; keep them to characters it never misreads.
    return re.sub(r'["<>{}\[\]#;`]', " ", text).strip()
