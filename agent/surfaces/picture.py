"""Graph pictures offline: a Sugiyama layout (grandalf, pure Python) drawn with matplotlib into a PNG.

LangGraph's ``draw_mermaid_png()`` calls an online service and ``draw_png()`` needs Graphviz's C library; this needs
neither. Subgraph nodes (``diva:verify`` under ``xray``) are drawn inside their method's frame.
"""

from __future__ import annotations

import io
from typing import Any

from agent.errors import ConfigError

BOX_W, BOX_H, X_GAP, Y_GAP = 150.0, 34.0, 30.0, 46.0  # layout units: points at 72 dpi


def _layout(nodes: list[str], edges: list[tuple[str, str, bool]]) -> dict[str, tuple[float, float]]:
    try:
        from grandalf.graphs import Edge, Graph, Vertex
        from grandalf.layouts import SugiyamaLayout
    except ImportError:
        raise ConfigError("graph pictures need the PyPI package 'grandalf': pip install grandalf") from None

    class View:
        w, h = BOX_W, BOX_H
        xy = (0.0, 0.0)

    vertices = {name: Vertex(name) for name in nodes}
    for vertex in vertices.values():
        vertex.view = View()
    graph = Graph(list(vertices.values()), [Edge(vertices[a], vertices[b]) for a, b, _ in edges])
    positions: dict[str, tuple[float, float]] = {}
    x_offset = 0.0
    for component in graph.C:  # each connected component side by side
        layout = SugiyamaLayout(component)
        layout.xspace, layout.yspace = X_GAP, Y_GAP
        layout.init_all(roots=[v for v in component.sV if not v.e_in()], optimize=True)
        layout.draw()
        xs = [v.view.xy[0] for v in component.sV]
        for v in component.sV:
            positions[v.data] = (v.view.xy[0] - min(xs) + x_offset, v.view.xy[1])
        x_offset += max(xs) - min(xs) + BOX_W + X_GAP
    return positions


def graph_png(graph: Any, title: str = "") -> bytes:
    """A PNG of a LangGraph drawable graph (``compiled.get_graph(xray=True)``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = list(graph.nodes)
    edges = [(e.source, e.target, bool(e.conditional)) for e in graph.edges]
    xy = _layout(nodes, edges)
    xs, ys = [p[0] for p in xy.values()], [p[1] for p in xy.values()]
    width, height = max(xs) - min(xs) + 2 * BOX_W, max(ys) - min(ys) + 3 * BOX_H
    fig = plt.figure(figsize=(width / 72, height / 72), dpi=110)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(min(xs) - BOX_W, max(xs) + BOX_W)
    ax.set_ylim(max(ys) + 1.5 * BOX_H, min(ys) - 1.5 * BOX_H)  # y grows downward: START at the top
    ax.axis("off")
    _draw_frames(ax, nodes, xy)
    _draw_edges(ax, edges, xy)
    _draw_nodes(ax, nodes, xy)
    if title:
        ax.text(min(xs) - BOX_W + 8, min(ys) - BOX_H, title, fontsize=11, weight="bold", va="center")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _draw_frames(ax: Any, nodes: list[str], xy: dict[str, tuple[float, float]]) -> None:
    """A dashed frame around each subgraph's nodes (``method:node``), behind them, named after the subgraph."""
    from matplotlib.patches import Rectangle

    groups: dict[str, list[tuple[float, float]]] = {}
    for name in nodes:
        if ":" in name:
            groups.setdefault(name.split(":", 1)[0], []).append(xy[name])
    for group, points in groups.items():
        gx, gy = [p[0] for p in points], [p[1] for p in points]
        x0, y0 = min(gx) - BOX_W / 2 - 8, min(gy) - BOX_H / 2 - 18
        ax.add_patch(
            Rectangle(
                (x0, y0),
                max(gx) - min(gx) + BOX_W + 16,
                max(gy) - min(gy) + BOX_H + 26,
                facecolor="#f3f6fb",
                edgecolor="#9aaccc",
                linestyle="--",
            )
        )
        ax.text(x0 + 6, y0 + 12, group, fontsize=8, color="#4a5f8a", style="italic")


def _draw_edges(ax: Any, edges: list[tuple[str, str, bool]], xy: dict[str, tuple[float, float]]) -> None:
    """Arrows from the bottom of a box to the top of the next; conditional edges dashed, back edges curved."""
    from matplotlib.patches import FancyArrowPatch

    for source, target, conditional in edges:
        (x1, y1), (x2, y2) = xy[source], xy[target]
        ax.add_patch(
            FancyArrowPatch(
                (x1, y1 + BOX_H / 2),
                (x2, y2 - BOX_H / 2),
                arrowstyle="-|>",
                mutation_scale=10,
                linestyle="--" if conditional else "-",
                color="#555555",
                connectionstyle="arc3,rad=0.08" if y2 <= y1 else "arc3",
            )
        )


def _draw_nodes(ax: Any, nodes: list[str], xy: dict[str, tuple[float, float]]) -> None:
    """A rounded box per node with its name (a subgraph's nodes without the prefix); START and END in grey."""
    from matplotlib.patches import FancyBboxPatch

    for name in nodes:
        x, y = xy[name]
        terminal = name in ("__start__", "__end__")
        ax.add_patch(
            FancyBboxPatch(
                (x - BOX_W / 2 + 4, y - BOX_H / 2 + 4),
                BOX_W - 8,
                BOX_H - 8,
                boxstyle="round,pad=3",
                facecolor="#e8e8e8" if terminal else "#dbe7ff",
                edgecolor="#333333",
            )
        )
        ax.text(x, y, name.split(":", 1)[-1].strip("_"), ha="center", va="center", fontsize=8)
