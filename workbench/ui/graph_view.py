"""The rollout graph of a rollout document, laid out per root and drawn with plotly.

Structure comes from the document's `turns[]` parent links (networkx); each root gets its own
horizontal lane, depth runs left to right, and siblings spread within the lane, so a long
terminus-2 chain reads as a line and a fork opens into branches.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import plotly.graph_objects as go

ROLE_COLOURS = {"agent": "#2563eb", "aux": "#f59e0b"}
EDGE_COLOUR = "#94a3b8"
DRIFT_COLOUR = "#dc2626"
DISCARDED_OPACITY = 0.25
LANE_GAP = 1.0  # vertical space between two roots' lanes, in sibling slots


def rollout_graph(doc: Mapping[str, Any]) -> nx.DiGraph:
    """One node per turn (keyed by turn id, attributes = the turn's summary), edges parent→child."""
    g = nx.DiGraph()
    for turn in doc.get("turns", []):
        g.add_node(turn["id"], **_summary(turn))
    for turn in doc.get("turns", []):
        if turn.get("parent") is not None:
            g.add_edge(turn["parent"], turn["id"])
    for node in g:
        g.nodes[node]["fork"] = g.out_degree(node) > 1
    return g


def _summary(turn: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "role": turn.get("role", "agent"),
        "discarded": bool(turn.get("discarded")),
        "dialect": turn.get("dialect", "?"),
        "prompt_tokens": turn.get("prompt_len", len(turn.get("prompt_token_ids") or ())),
        "completion_tokens": len(turn.get("completion_token_ids") or ()),
        "finish_reason": turn.get("finish_reason"),
        "drift": turn.get("drift"),
    }


def layered_layout(g: nx.DiGraph) -> dict[Any, tuple[float, float]]:
    """x = depth below the root; y = a slot in the root's lane (leaves get consecutive slots,
    a parent sits at the mean of its children). Roots are laid out in arrival order, top down."""
    pos: dict[Any, tuple[float, float]] = {}
    next_slot = 0.0
    roots = [n for n in g if g.in_degree(n) == 0]
    for root in roots:
        depth = nx.single_source_shortest_path_length(g, root)
        # Post-order: children are placed before their parent.
        for node in nx.dfs_postorder_nodes(g, root):
            children = list(g.successors(node))
            if children:
                y = sum(pos[c][1] for c in children) / len(children)
            else:
                y = next_slot
                next_slot += 1.0
            pos[node] = (float(depth[node]), y)
        next_slot += LANE_GAP
    # Top-down reading order: the first root's lane at the top.
    return {n: (x, -y) for n, (x, y) in pos.items()}


def hover_text(node: Any, attrs: Mapping[str, Any]) -> str:
    lines = [
        f"<b>turn {node}</b> · {attrs['role']}{' · discarded' if attrs['discarded'] else ''}",
        f"dialect: {attrs['dialect']}",
        f"prompt tokens: {attrs['prompt_tokens']}",
        f"completion tokens: {attrs['completion_tokens']}",
        f"finish: {attrs['finish_reason'] or '—'}",
    ]
    if attrs["fork"]:
        lines.append("fork: several continuations")
    if attrs["drift"]:
        lines.append(f"drift: {_drift_text(attrs['drift'])}")
    return "<br>".join(lines)


def _drift_text(drift: Mapping[str, Any]) -> str:
    """`drift` as the document states it: {turn, index, token, expected}."""
    return (
        f"shares a prefix with turn {drift.get('turn')} up to token {drift.get('index')} "
        f"(id {drift.get('token')} where {drift.get('expected')} was expected)"
    )


def _edge_trace(
    edges: Sequence[tuple[Any, Any]], pos: Mapping[Any, tuple[float, float]], name: str, dash: str
) -> go.Scatter:
    xs: list[float | None] = []
    ys: list[float | None] = []
    for a, b in edges:
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        line={"color": EDGE_COLOUR, "width": 1.5, "dash": dash},
        hoverinfo="skip",
        name=name,
        showlegend=False,
    )


def _node_trace(
    nodes: Sequence[Any], g: nx.DiGraph, pos: Mapping[Any, tuple[float, float]], name: str
) -> go.Scatter:
    attrs = [g.nodes[n] for n in nodes]
    discarded = bool(attrs) and attrs[0]["discarded"]
    role = attrs[0]["role"] if attrs else "agent"
    return go.Scatter(
        x=[pos[n][0] for n in nodes],
        y=[pos[n][1] for n in nodes],
        mode="markers+text",
        name=name,
        text=[str(n) for n in nodes],
        textposition="top center",
        textfont={"size": 10, "color": "#475569"},
        customdata=list(nodes),
        hovertext=[hover_text(n, a) for n, a in zip(nodes, attrs, strict=True)],
        hoverinfo="text",
        opacity=DISCARDED_OPACITY if discarded else 1.0,
        marker={
            "size": [16 if a["fork"] else 12 for a in attrs],
            "symbol": ["diamond" if a["fork"] else "circle" for a in attrs],
            "color": ROLE_COLOURS.get(role, "#64748b"),
            "line": {
                "color": [DRIFT_COLOUR if a["drift"] else "#ffffff" for a in attrs],
                "width": [3 if a["drift"] else 1 for a in attrs],
            },
        },
    )


def graph_figure(doc: Mapping[str, Any], selected: Any = None) -> go.Figure:
    """The plotly figure: one marker per turn (every turn of the document, discarded included)."""
    g = rollout_graph(doc)
    pos = layered_layout(g)
    live_edges = [(a, b) for a, b in g.edges if not g.nodes[b]["discarded"]]
    dead_edges = [(a, b) for a, b in g.edges if g.nodes[b]["discarded"]]
    traces: list[go.Scatter] = [
        _edge_trace(live_edges, pos, "edges", "solid"),
        _edge_trace(dead_edges, pos, "discarded edges", "dot"),
    ]
    # One trace per (role, discarded) so the legend explains the colours.
    for role in ("agent", "aux"):
        for discarded in (False, True):
            nodes = [
                n for n in g if g.nodes[n]["role"] == role and g.nodes[n]["discarded"] == discarded
            ]
            if nodes:
                name = f"{role} (discarded)" if discarded else role
                traces.append(_node_trace(nodes, g, pos, name))
    fig = go.Figure(traces)
    if selected is not None and selected in pos:
        x, y = pos[selected]
        fig.add_shape(
            type="circle",
            x0=x - 0.3,
            x1=x + 0.3,
            y0=y - 0.3,
            y1=y + 0.3,
            line={"color": "#0f172a", "width": 1.5, "dash": "dot"},
        )
    for node in g:
        if g.nodes[node]["drift"]:
            x, y = pos[node]
            fig.add_annotation(
                x=x, y=y, text="drift", showarrow=False, yshift=-16, font={"color": DRIFT_COLOUR}
            )
    max_depth = max((x for x, _ in pos.values()), default=0)
    lanes = len({y for _, y in pos.values()})
    fig.update_layout(
        height=max(240, min(560, 140 + 60 * lanes)),
        margin={"l": 10, "r": 10, "t": 36, "b": 10},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        hovermode="closest",
        legend={"orientation": "h", "y": 1.0, "x": 0.0, "yanchor": "bottom", "xanchor": "left"},
        xaxis={
            "title": {"text": "depth"},
            "range": [-0.6, max_depth + 0.6],
            "zeroline": False,
            "showgrid": False,
            "dtick": 1,
        },
        yaxis={"visible": False, "scaleanchor": None},
        uirevision=(doc.get("ids") or {}).get("rollout"),
    )
    return fig


def turn_choices(doc: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(label, turn id) pairs for the turn selector."""
    choices = []
    for turn in doc.get("turns", []):
        s = _summary(turn)
        flag = " · discarded" if s["discarded"] else ""
        label = (
            f"turn {turn['id']} · {s['role']} · {s['prompt_tokens']}+"
            f"{s['completion_tokens']} tok{flag}"
        )
        choices.append((label, turn["id"]))
    return choices
