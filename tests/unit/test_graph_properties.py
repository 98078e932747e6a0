"""RolloutGraph against a reference model, on random trees of turns (hypothesis).

Each generated rollout is a forest built in creation order: a turn is a new root (a shared
system prompt plus fresh tokens) or extends an earlier turn's prompt+completion with a fresh,
non-empty suffix; some turns are retries (same parent, identical prompt, new completion) of an
earlier turn. Every suffix and completion uses fresh token ids, so the intended parent is the
unique longest prefix. The turns then arrive in a random order consistent with causality
(parent before child, original before retry).
"""

from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.document import DocumentMeta, build_document, expand_document, graph_from_document
from capture.graph import RolloutGraph
from capture.turns import Turn

SYSTEM = list(range(50_000, 50_040))


@dataclass
class Planned:
    parent: int | None  # creation index
    retry_of: int | None
    prompt: list[int]
    completion: list[int]
    tools: bool
    aux: bool
    children: list[int] = field(default_factory=list)


@st.composite
def rollouts(draw) -> tuple[list[Planned], list[int]]:
    fresh = iter(range(1, 10**6))
    n = draw(st.integers(1, 24))
    plan: list[Planned] = []
    root_tools: dict[int, bool] = {}
    roots_of: list[int] = []
    for i in range(n):
        kind = draw(st.sampled_from(["root", "child", "child", "child", "retry"])) if i else "root"
        completion = [next(fresh) for _ in range(draw(st.integers(0, 4)))]
        aux = draw(st.integers(0, 9)) == 0
        if kind == "retry" and i:
            of = draw(st.integers(0, i - 1))
            src = plan[of]
            completion = completion or [next(fresh)]
            plan.append(Planned(src.parent, of, src.prompt, completion, src.tools, aux))
            roots_of.append(roots_of[of])
            if src.parent is not None:
                plan[src.parent].children.append(i)
            else:
                root_tools[i] = src.tools
                roots_of[i] = i
            continue
        if kind == "root":
            tools = draw(st.booleans())
            prompt = SYSTEM + [next(fresh) for _ in range(draw(st.integers(1, 4)))]
            plan.append(Planned(None, None, prompt, completion, tools, aux))
            root_tools[i] = tools
            roots_of.append(i)
            continue
        parent = draw(st.integers(0, i - 1))
        p = plan[parent]
        suffix = [next(fresh) for _ in range(draw(st.integers(1, 4)))]
        plan.append(
            Planned(parent, None, p.prompt + p.completion + suffix, completion, p.tools, aux)
        )
        p.children.append(i)
        roots_of.append(roots_of[parent])

    # A random arrival order consistent with causality.
    order: list[int] = []
    arrived: set[int] = set()
    while len(order) < n:
        ready = [
            i
            for i in range(n)
            if i not in arrived
            and (plan[i].parent is None or plan[i].parent in arrived)
            and (plan[i].retry_of is None or plan[i].retry_of in arrived)
        ]
        pick = ready[draw(st.integers(0, len(ready) - 1))]
        order.append(pick)
        arrived.add(pick)
    return plan, order


def expected(plan: list[Planned], order: list[int]):
    """The reference model: parents, discards, roles, by the rules of DESIGN.md §6."""
    arrival = {c: a for a, c in enumerate(order)}
    n = len(plan)
    # Among turns with an identical prompt only the last to arrive survives, with its subtree.
    last_of_prompt: dict[tuple[int, ...], int] = {}
    for c in order:
        last_of_prompt[tuple(plan[c].prompt)] = c
    discarded = [False] * n
    for c in order:  # parents arrive first, so one pass in arrival order propagates
        p = plan[c].parent
        discarded[c] = last_of_prompt[tuple(plan[c].prompt)] != c or (
            p is not None and discarded[p]
        )
    root = []
    for c in range(n):
        root.append(c if plan[c].parent is None else root[plan[c].parent])
    sizes: dict[int, int] = {}
    for c in range(n):
        sizes[root[c]] = sizes.get(root[c], 0) + 1
    tool_roots = {root[c] for c in range(n) if plan[c].tools}
    if tool_roots:
        agent_roots = tool_roots
    else:
        best = max(sizes.values())
        agent_roots = {min((r for r in sizes if sizes[r] == best), key=arrival.__getitem__)}
    role = ["aux" if plan[c].aux or root[c] not in agent_roots else "agent" for c in range(n)]
    return arrival, discarded, role


def ingest(plan: list[Planned], order: list[int]) -> RolloutGraph:
    g = RolloutGraph()
    for c in order:
        p = plan[c]
        logprobs = [-0.01 * (k + 1) for k in range(len(p.completion))]
        g.add(Turn(p.prompt, p.completion, logprobs, has_tools=p.tools, aux=p.aux))
    return g


def path_of(plan: list[Planned], c: int) -> list[int]:
    out = []
    while c is not None:
        out.append(c)
        c = plan[c].parent
    return out[::-1]


@settings(max_examples=100, deadline=None)
@given(rollouts())
def test_every_parent_is_recovered_exactly(case):
    plan, order = case
    g = ingest(plan, order)
    arrival, discarded, _ = expected(plan, order)
    for c, p in enumerate(plan):
        node = g.node(arrival[c])
        assert node.parent == (None if p.parent is None else arrival[p.parent])
        assert node.discarded == discarded[c]
        assert g.prompt_ids(arrival[c]).tolist() == p.prompt
        assert g.completion_ids(arrival[c]).tolist() == p.completion
    assert g.counters()["discarded"] == sum(discarded)


@settings(max_examples=100, deadline=None)
@given(rollouts())
def test_sequences_are_leaf_streams_with_loss_on_agent_samples_only(case):
    plan, order = case
    g = ingest(plan, order)
    arrival, discarded, role = expected(plan, order)
    by_arrival = {a: c for c, a in arrival.items()}
    live_children = {c: [k for k in plan[c].children if not discarded[k]] for c in range(len(plan))}
    leaves = sorted(
        arrival[c] for c in range(len(plan)) if not discarded[c] and not live_children[c]
    )
    sequences = g.sequences()
    assert [s.node_ids[-1] for s in sequences] == leaves
    for seq in sequences:
        leaf = by_arrival[seq.node_ids[-1]]
        path = path_of(plan, leaf)
        assert seq.node_ids == [arrival[c] for c in path]
        assert seq.token_ids.tolist() == plan[leaf].prompt + plan[leaf].completion
        assert seq.token_ids.dtype == np.int32
        agent_sampled = sum(len(plan[c].completion) for c in path if role[c] == "agent")
        assert int(seq.loss_mask.sum()) == agent_sampled
        assert np.isnan(seq.logprobs[seq.loss_mask == 0]).all()
        assert not np.isnan(seq.logprobs[seq.loss_mask == 1]).any()
        for c in path:
            start = len(plan[c].prompt)
            got = seq.logprobs[start : start + len(plan[c].completion)]
            if role[c] == "agent":
                want = [-0.01 * (k + 1) for k in range(len(plan[c].completion))]
                assert np.allclose(got, want)


@settings(max_examples=40, deadline=None)
@given(rollouts())
def test_compact_and_full_documents_describe_the_same_graph(case):
    plan, order = case
    g = ingest(plan, order)
    full = build_document(g, [], DocumentMeta())
    compact = build_document(g, [], DocumentMeta(), compact=True)
    assert expand_document(compact) == full
    from_full = build_document(graph_from_document(full), [], DocumentMeta())
    from_compact = build_document(graph_from_document(compact), [], DocumentMeta())
    assert from_full == from_compact == full
    assert (
        sum(len(t["prompt_delta_token_ids"]) for t in compact["turns"])
        + sum(len(t["completion_token_ids"]) for t in compact["turns"])
        == g.counters()["unique_tokens"]
    )


@settings(max_examples=100, deadline=None)
@given(rollouts(), st.data())
def test_re_sending_sampled_tokens_differently_is_flagged_as_drift(case, data):
    plan, order = case
    g = ingest(plan, order)
    arrival, discarded, _ = expected(plan, order)
    sources = [c for c in range(len(plan)) if not discarded[c] and plan[c].completion]
    if not sources:
        return
    t = data.draw(st.sampled_from(sources))
    j = data.draw(st.integers(0, len(plan[t].completion) - 1))
    resent = [*plan[t].prompt, *plan[t].completion[:j], 10**7, 10**7 + 1]
    drifted = g.add(Turn(resent, [10**7 + 2], [-0.1], has_tools=True))
    node = g.node(drifted)
    # Parent: the longest full stream that prefixes the new prompt (on a tie a live one, then
    # the latest): t's parent, or a superseded twin of t that sampled nothing.
    fits = [
        c
        for c in range(len(plan))
        if resent[: len(plan[c].prompt) + len(plan[c].completion)]
        == plan[c].prompt + plan[c].completion
    ]
    best = max(
        fits,
        key=lambda c: (len(plan[c].prompt) + len(plan[c].completion), not discarded[c], arrival[c]),
        default=None,
    )
    assert node.parent == (None if best is None else arrival[best])
    assert node.drift is not None
    assert node.drift.turn == arrival[t]
    assert node.drift.index == len(plan[t].prompt) + j
    assert (node.drift.token, node.drift.expected) == (10**7, plan[t].completion[j])
