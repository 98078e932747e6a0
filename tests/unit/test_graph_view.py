"""The rollout graph figure drawn from a hand-built rollout document."""

import plotly.graph_objects as go

from capture.document import DocumentMeta, build_document, validate_document
from capture.graph import RolloutGraph
from capture.turns import Turn
from workbench.ui.graph_view import (
    DISCARDED_OPACITY,
    DRIFT_COLOUR,
    graph_figure,
    layered_layout,
    rollout_graph,
    turn_choices,
)


def turn(i, parent, *, root, role="agent", discarded=False, prompt=3, completion=2, drift=None):
    return {
        "id": i,
        "parent": parent,
        "root": root,
        "role": role,
        "discarded": discarded,
        "dialect": "chat",
        "prompt_token_ids": list(range(prompt)),
        "completion_token_ids": list(range(completion)),
        "logprobs": [-0.5] * completion,
        "finish_reason": "stop",
        "drift": drift,
    }


def document():
    # 0 -> 1 -> {2, 3 (discarded retry of 2)}; 4 is an aux root; 5 a drifted root.
    return {
        "ids": {"rollout": "r-1"},
        "turns": [
            turn(0, None, root=0),
            turn(1, 0, root=0, prompt=5),
            turn(2, 1, root=0, prompt=9, completion=4),
            turn(3, 1, root=0, prompt=9, discarded=True),
            turn(4, None, root=4, role="aux", prompt=2, completion=1),
            turn(5, None, root=5, drift={"turn": 2, "index": 7, "token": 11, "expected": 12}),
        ],
    }


def node_traces(fig: go.Figure) -> list[go.Scatter]:
    return [t for t in fig.data if "markers" in (t.mode or "")]


def test_graph_has_one_node_per_turn_and_parent_edges():
    g = rollout_graph(document())
    assert sorted(g.nodes) == [0, 1, 2, 3, 4, 5]
    assert sorted(g.edges) == [(0, 1), (1, 2), (1, 3)]
    assert g.nodes[1]["fork"] and not g.nodes[2]["fork"]


def test_layout_puts_depth_on_x_and_each_root_in_its_own_lane():
    pos = layered_layout(rollout_graph(document()))
    assert [pos[i][0] for i in range(6)] == [0, 1, 2, 2, 0, 0]
    # The fork's parent sits between its two children.
    assert min(pos[2][1], pos[3][1]) < pos[1][1] < max(pos[2][1], pos[3][1])
    # Lanes are stacked top-down in arrival order and do not overlap.
    lane0 = [pos[i][1] for i in range(4)]
    assert min(lane0) > pos[4][1] > pos[5][1]


def test_figure_draws_every_turn_once_with_role_colours_and_dimmed_discards():
    fig = graph_figure(document())
    traces = node_traces(fig)
    drawn = sorted(n for t in traces for n in t.customdata)
    assert drawn == [0, 1, 2, 3, 4, 5]
    by_name = {t.name: t for t in traces}
    assert set(by_name) == {"agent", "agent (discarded)", "aux"}
    assert list(by_name["agent (discarded)"].customdata) == [3]
    assert by_name["agent (discarded)"].opacity == DISCARDED_OPACITY
    assert by_name["agent"].marker.color != by_name["aux"].marker.color


def test_forks_and_drift_are_marked():
    fig = graph_figure(document())
    agent = next(t for t in node_traces(fig) if t.name == "agent")
    ids = list(agent.customdata)
    assert agent.marker.symbol[ids.index(1)] == "diamond"
    assert agent.marker.symbol[ids.index(0)] == "circle"
    assert agent.marker.line.color[ids.index(5)] == DRIFT_COLOUR
    assert [a.text for a in fig.layout.annotations] == ["drift"]


def test_hover_shows_index_dialect_tokens_and_finish_reason():
    fig = graph_figure(document())
    agent = next(t for t in node_traces(fig) if t.name == "agent")
    hover = agent.hovertext[list(agent.customdata).index(2)]
    for part in ("turn 2", "dialect: chat", "prompt tokens: 9", "completion tokens: 4", "stop"):
        assert part in hover
    drift_hover = agent.hovertext[list(agent.customdata).index(5)]
    assert "turn 2 up to token 7" in drift_hover


def test_empty_document_draws_an_empty_figure():
    fig = graph_figure({"turns": []})
    assert node_traces(fig) == []


def test_turn_choices_label_each_turn():
    choices = turn_choices(document())
    assert [v for _, v in choices] == [0, 1, 2, 3, 4, 5]
    assert choices[3][0] == "turn 3 · agent · 9+2 tok · discarded"
    assert choices[4][0].startswith("turn 4 · aux")


def test_a_real_rollout_document_draws_one_node_per_turn():
    """Built by capture.document from real Turns: a chain, a resample (discards the first try)
    and an aux root without tools."""
    graph = RolloutGraph()
    call = {"has_tools": True, "finish_reason": "tool_calls"}
    graph.add(Turn([1, 2, 3], [4, 5], [-0.1, -0.2], **call))
    graph.add(Turn([1, 2, 3, 4, 5, 6], [7], [-0.3], **call))
    graph.add(Turn([1, 2, 3, 4, 5, 6], [8], [-0.4], **call))
    graph.add(Turn([9, 9], [10], [-0.5], finish_reason="stop"))
    doc = build_document(graph, [], DocumentMeta(ids={"rollout": "r-2"}))
    validate_document(doc)
    fig = graph_figure(doc)
    drawn = sorted(n for t in node_traces(fig) for n in t.customdata)
    assert drawn == [0, 1, 2, 3]
    by_name = {t.name: list(t.customdata) for t in node_traces(fig)}
    assert by_name["agent (discarded)"] == [1]
    assert by_name["aux"] == [3]
