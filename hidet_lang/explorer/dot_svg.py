"""A small DAG in Graphviz's DOT (what `FlowGraph.to_dot()` writes: nodes with labels and shapes, `cluster_*`
subgraphs, edges) drawn as SVG without Graphviz: nodes in layers by their longest path from a source, clusters as
rounded boxes around their members."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape

_TOKEN = re.compile(r'\s*(?:(->)|("(?:[^"\\]|\\.)*")|([A-Za-z0-9_%.]+)|([{}\[\];=,]))')
CHAR_W, NODE_H, GAP_X, GAP_Y, PAD = 7.2, 34, 24, 46, 12


@dataclass
class DotGraph:
    """Nodes (id -> attributes, in order of appearance), edges, and clusters (label, member ids)."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    clusters: list[tuple[str, list[str]]] = field(default_factory=list)


def _tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    text = re.sub(r"//[^\n]*", "", text)
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip():
                raise ValueError(f"DOT text not understood near {text[pos:pos + 30]!r}")
            break
        tokens.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
    return tokens


def _unquote(token: str) -> str:
    if token.startswith('"'):
        return token[1:-1].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
    return token


def parse_dot(text: str) -> DotGraph:
    """The nodes, edges and clusters of DOT `text` (graph, node and edge defaults are read and ignored)."""
    tokens, graph, i = _tokens(text), DotGraph(), 0
    stack: list[tuple[str, list[str]] | None] = []

    def attributes() -> dict[str, str]:
        nonlocal i
        attrs: dict[str, str] = {}
        if i < len(tokens) and tokens[i] == "[":
            i += 1
            while tokens[i] != "]":
                key = _unquote(tokens[i])
                attrs[key] = _unquote(tokens[i + 2]) if tokens[i + 1] == "=" else "true"
                i += 3 if tokens[i + 1] == "=" else 1
                if tokens[i] in (",", ";"):
                    i += 1
            i += 1
        return attrs

    def add_node(name: str, attrs: dict[str, str]) -> None:
        graph.nodes.setdefault(name, {}).update(attrs)
        for cluster in stack:
            if cluster is not None and name not in cluster[1]:
                cluster[1].append(name)

    while i < len(tokens):
        token = tokens[i]
        if token in ("digraph", "graph", "strict"):
            i = tokens.index("{", i) + 1
        elif token == ";":
            i += 1
        elif token == "subgraph":
            name = _unquote(tokens[i + 1])
            stack.append((name, []) if name.startswith("cluster") else None)
            if stack[-1] is not None:
                graph.clusters.append(("", stack[-1][1]))
            i += 3
        elif token == "}":
            stack.pop() if stack else None
            i += 1
        elif token in ("node", "edge") and i + 1 < len(tokens) and tokens[i + 1] == "[":
            i += 1
            attributes()
        elif i + 1 < len(tokens) and tokens[i + 1] == "=":
            if token == "label" and stack and stack[-1] is not None:
                index = next(k for k, c in enumerate(graph.clusters) if c[1] is stack[-1][1])
                graph.clusters[index] = (_unquote(tokens[i + 2]), stack[-1][1])
            i += 3
        else:
            chain = [_unquote(token)]
            i += 1
            while i < len(tokens) and tokens[i] == "->":
                chain.append(_unquote(tokens[i + 1]))
                i += 2
            attrs = attributes()
            for name in chain:
                add_node(name, attrs if len(chain) == 1 else {})
            graph.edges += list(zip(chain, chain[1:]))
    return graph


def _layers(graph: DotGraph) -> dict[str, int]:
    """Each node's layer: the length of the longest path reaching it from a node with no predecessors."""
    layer = dict.fromkeys(graph.nodes, 0)
    for _ in range(len(graph.nodes)):
        changed = False
        for a, b in graph.edges:
            if layer[b] < layer[a] + 1:
                layer[b], changed = layer[a] + 1, True
        if not changed:
            break
    return layer


def dot_to_svg(text: str) -> str:
    """The DAG of DOT `text` as an SVG drawing (top to bottom; clusters boxed and labelled)."""
    graph = parse_dot(text)
    layer = _layers(graph)
    cluster_of = {name: k for k, (_, members) in enumerate(graph.clusters) for name in members}
    rows: dict[int, list[str]] = {}
    for name in sorted(graph.nodes, key=lambda n: (cluster_of.get(n, -1), list(graph.nodes).index(n))):
        rows.setdefault(layer[name], []).append(name)
    labels = {n: graph.nodes[n].get("label", n).split("\n") for n in graph.nodes}
    widths = {n: max(len(line) for line in labels[n]) * CHAR_W + 2 * PAD for n in graph.nodes}
    heights = {n: NODE_H + 14 * (len(labels[n]) - 1) for n in graph.nodes}
    row_heights = {r: max(heights[n] for n in names) for r, names in rows.items()}
    total_w = max(sum(widths[n] for n in names) + GAP_X * (len(names) - 1) for names in rows.values()) + 4 * PAD
    box: dict[str, tuple[float, float, float, float]] = {}
    y = 2 * PAD + 16
    for r in sorted(rows):
        names = rows[r]
        x = (total_w - (sum(widths[n] for n in names) + GAP_X * (len(names) - 1))) / 2
        for n in names:
            box[n] = (x, y, widths[n], heights[n])
            x += widths[n] + GAP_X
        y += row_heights[r] + GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{y:.0f}" '
             'font-family="monospace" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for label, members in graph.clusters:
        if not members:
            continue
        x0 = min(box[m][0] for m in members) - PAD
        y0 = min(box[m][1] for m in members) - PAD - 14
        x1 = max(box[m][0] + box[m][2] for m in members) + PAD
        y1 = max(box[m][1] + box[m][3] for m in members) + PAD
        parts.append(f'<rect class="cluster" x="{x0:.0f}" y="{y0:.0f}" width="{x1 - x0:.0f}" height="{y1 - y0:.0f}" '
                     f'rx="10" fill="#f3f7ff" stroke="#7a9ad6"/><text x="{x0 + 8:.0f}" y="{y0 + 14:.0f}" '
                     f'fill="#34568b">{escape(label)}</text>')
    for a, b in graph.edges:
        ax, ay, aw, ah = box[a]
        bx, by, bw, _ = box[b]
        parts.append(f'<line x1="{ax + aw / 2:.0f}" y1="{ay + ah:.0f}" x2="{bx + bw / 2:.0f}" y2="{by:.0f}" '
                     'stroke="#555" marker-end="url(#arrow)"/>')
    for n, (x, y0, w, h) in box.items():
        shape = graph.nodes[n].get("shape", "box")
        radius = h / 2 if shape == "ellipse" else 3
        fill = "none" if shape == "plaintext" else "#fff"
        stroke = "none" if shape == "plaintext" else "#333"
        parts.append(f'<g class="node"><rect x="{x:.0f}" y="{y0:.0f}" width="{w:.0f}" height="{h:.0f}" '
                     f'rx="{radius:.0f}" fill="{fill}" stroke="{stroke}"/>')
        for k, line in enumerate(labels[n]):
            parts.append(f'<text x="{x + PAD:.0f}" y="{y0 + 21 + 14 * k:.0f}">{escape(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
