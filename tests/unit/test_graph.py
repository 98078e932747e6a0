"""RolloutGraph on hand-built rollouts: each case pins one rule of DESIGN.md §6."""

import numpy as np
import pytest

from capture.graph import DRIFT_MIN_TOKENS, RolloutGraph
from capture.turns import Turn

SYSTEM = list(range(1000, 1040))  # a 40-token system prompt


def call(prompt, completion, tools=True, **kw) -> Turn:
    logprobs = kw.pop("logprobs", [-0.5] * len(completion))
    return Turn(prompt, completion, logprobs, has_tools=tools, **kw)


def full(turn: Turn) -> list[int]:
    return [*turn.prompt_ids.tolist(), *turn.completion_ids.tolist()]


def test_linear_chain_links_each_turn_to_the_previous():
    g = RolloutGraph()
    t0 = call([*SYSTEM, 1], [2, 3])
    t1 = call([*full(t0), 4], [5])
    t2 = call([*full(t1), 6, 7], [8, 9, 10])
    assert [g.add(t) for t in (t0, t1, t2)] == [0, 1, 2]
    assert [g.node(i).parent for i in range(3)] == [None, 0, 1]
    assert [g.node(i).depth for i in range(3)] == [0, 1, 2]
    assert g.roots == [0] and g.leaves() == [2] and g.forks == []
    assert g.prompt_ids(2).tolist() == t2.prompt_ids.tolist()
    assert g.prompt_delta(2).tolist() == [6, 7]
    assert g.prompt_ids(2).dtype == np.int32

    (seq,) = g.sequences()
    assert seq.node_ids == [0, 1, 2]
    assert seq.token_ids.tolist() == full(t2)
    sampled = {41, 42, 44, 47, 48, 49}  # positions of the three completions
    assert [i for i, m in enumerate(seq.loss_mask) if m] == sorted(sampled)
    assert np.isnan(seq.logprobs[0]) and seq.logprobs[41] == np.float32(-0.5)
    assert g.counters() == {
        "turns": 3,
        "roots": 1,
        "forks": 0,
        "discarded": 0,
        "prompt_tokens": 41 + 44 + 47,
        "completion_tokens": 6,
        "unique_tokens": 50,
    }


def test_retry_with_identical_prompt_discards_the_earlier_turn_and_its_descendants():
    g = RolloutGraph()
    t0 = g.add(call(SYSTEM, [1, 2]))
    first = g.add(call([*SYSTEM, 1, 2, 3], [4]))
    under_first = g.add(call([*SYSTEM, 1, 2, 3, 4, 5], [6]))
    retry = g.add(call([*SYSTEM, 1, 2, 3], [7, 8]))
    after = g.add(call([*SYSTEM, 1, 2, 3, 7, 8, 9], [10]))
    assert g.node(first).discarded and g.node(under_first).discarded
    assert not g.node(retry).discarded and g.node(retry).parent == t0
    assert g.node(after).parent == retry
    assert g.leaves() == [after]
    assert g.counters()["discarded"] == 2 and g.counters()["forks"] == 0
    # The superseded turn keeps its own tokens (it stays in the document).
    assert g.completion_ids(first).tolist() == [4]
    assert g.prompt_ids(under_first).tolist() == [*SYSTEM, 1, 2, 3, 4, 5]
    assert g.token_ids(retry).tolist() == [*SYSTEM, 1, 2, 3, 7, 8]


def test_retry_of_a_root_discards_it():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    g.add(call(SYSTEM, [2]))
    assert g.node(0).discarded and not g.node(1).discarded
    assert g.counters()["roots"] == 1
    assert [s.node_ids for s in g.sequences()] == [[1]]


def test_retry_that_resampled_the_same_answer_children_attach_to_the_live_one():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    g.add(call(SYSTEM, [1]))
    g.add(call([*SYSTEM, 1, 2], [3]))
    assert g.node(2).parent == 1 and not g.node(2).discarded


def test_retry_of_a_turn_that_sampled_nothing_is_its_sibling_not_its_child():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    empty = g.add(call([*SYSTEM, 1, 2], []))
    retry = g.add(call([*SYSTEM, 1, 2], [3]))
    assert g.node(retry).parent == 0 and g.node(empty).discarded
    assert not g.node(retry).discarded


def test_turn_attached_under_a_discarded_turn_is_discarded_and_marked():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    g.add(call(SYSTEM, [2]))  # supersedes turn 0
    late = g.add(call([*SYSTEM, 1, 5], [6]))
    assert g.node(late).parent == 0
    assert g.node(late).discarded and g.node(late).attached_to_discarded


def test_branch_with_a_different_prompt_gives_two_sequences():
    g = RolloutGraph()
    root = g.add(call(SYSTEM, [1, 2]))
    a = g.add(call([*SYSTEM, 1, 2, 3], [4]))
    b = g.add(call([*SYSTEM, 1, 2, 9, 9], [5]))
    assert g.node(a).parent == root == g.node(b).parent
    assert g.forks == [root] and g.counters()["forks"] == 1
    seqs = {tuple(s.node_ids): s for s in g.sequences()}
    assert set(seqs) == {(root, a), (root, b)}
    assert seqs[(root, b)].token_ids.tolist() == [*SYSTEM, 1, 2, 9, 9, 5]


def test_longest_prefix_wins_over_an_earlier_shorter_match():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    g.add(call([*SYSTEM, 1, 2], [3]))
    deep = g.add(call([*SYSTEM, 1, 2, 3, 4], [5]))
    assert g.node(deep).parent == 1


def test_subagent_root_with_tools_is_a_second_agent_root():
    g = RolloutGraph()
    main = g.add(call([*SYSTEM, 1], [2]))
    sub = g.add(call([7] * 50, [8]))  # Task subagent: its own system prompt, tools on
    title = g.add(call([9] * 20, [3], tools=False))  # title generation: no tools
    g.add(call([*SYSTEM, 1, 2, 4], [5]))
    assert g.roots == [main, sub, title]
    assert g.role(main) == g.role(sub) == "agent" and g.role(title) == "aux"
    assert g.role(3) == "agent"
    masks = {tuple(s.node_ids): int(s.loss_mask.sum()) for s in g.sequences()}
    assert masks == {(main, 3): 2, (sub,): 1, (title,): 0}


def test_toolless_harness_makes_the_largest_root_the_agent():
    g = RolloutGraph()
    summary = g.add(call([5] * 30, [6], tools=False))
    main = g.add(call(SYSTEM, [1], tools=False))
    g.add(call([*SYSTEM, 1, 2], [3], tools=False))
    assert g.role(main) == "agent" and g.role(2) == "agent"
    assert g.role(summary) == "aux"


def test_aux_turn_in_the_middle_of_a_sequence_earns_no_loss():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1, 2]))
    g.add(call([*SYSTEM, 1, 2, 3], [4, 5]))
    g.add(call([*SYSTEM, 1, 2, 3, 4, 5, 6], [7]))
    g.demote(1)
    (seq,) = g.sequences()
    mask = seq.loss_mask.tolist()
    assert mask[40:42] == [1, 1]  # turn 0 sampled
    assert mask[43:45] == [0, 0]  # turn 1 is aux
    assert mask[46] == 1
    assert np.isnan(seq.logprobs[43:45]).all()
    assert g.role(1) == "aux" and g.node(1).demoted


def test_turn_flagged_aux_at_ingest_is_demoted():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1], aux=True))
    assert g.role(0) == "aux"
    assert g.sequences()[0].loss_mask.sum() == 0


def test_drift_root_is_flagged_at_the_first_differing_token():
    g = RolloutGraph()
    sampled = list(range(500, 520))
    g.add(call(SYSTEM, sampled))
    # The harness re-renders the sampled answer: the 6th sampled token comes back different.
    resent = SYSTEM + sampled[:5] + [9999] + sampled[6:] + [7, 7]
    drifted = g.add(call(resent, [1]))
    node = g.node(drifted)
    assert node.parent is None
    assert node.drift is not None
    assert (node.drift.turn, node.drift.index) == (0, 45)
    assert (node.drift.token, node.drift.expected) == (9999, 505)


def test_drift_under_a_parent_is_flagged_on_the_forked_turn():
    g = RolloutGraph()
    g.add(call(SYSTEM, [1]))
    g.add(call([*SYSTEM, 1, 2], [3, 4, 5]))
    forked = g.add(call([*SYSTEM, 1, 2, 3, 8, 5, 6], [9]))
    assert g.node(forked).parent == 0
    assert g.node(forked).drift.index == 43 and g.node(forked).drift.turn == 1


def test_root_sharing_only_the_system_prompt_is_not_drift():
    g = RolloutGraph()
    g.add(call([*SYSTEM, 1, 2, 3], [4, 5]))
    compacted = g.add(call([*SYSTEM, 6, 6, 6], [7]))  # a compaction root: new summary
    assert g.node(compacted).drift is None


def test_short_shared_prefix_is_not_drift():
    g = RolloutGraph()
    short = list(range(DRIFT_MIN_TOKENS - 10))
    g.add(call(short, [1, 2, 3]))
    g.add(call([*short, 1, 9], [4]))
    assert g.node(1).drift is None


def test_messages_are_stored_as_deltas_and_rebuilt():
    g = RolloutGraph()
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    g.add(call(SYSTEM, [1], messages=history))
    step = [{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]
    # Each request is parsed anew: equal dicts, different objects.
    copy = [dict(m) for m in history + step]
    g.add(call([*SYSTEM, 1, 2], [3], messages=copy))
    assert g.node(1).messages_inherited == 2
    assert g.messages(1) == history + step
    assert g.turn(1).messages == history + step
    assert all(a is not b for a, b in zip(g.messages(1)[:2], copy[:2], strict=True))


def test_messages_rebuilt_after_the_cache_forgot_them():
    g = RolloutGraph()
    msgs = [{"role": "user", "content": "0"}]
    prompt = SYSTEM
    for i in range(60):
        g.add(call(prompt, [i], messages=list(msgs)))
        prompt = [*prompt, i, 5000 + i]
        msgs = [*msgs, {"role": "assistant", "content": str(i)}]
    assert g.messages(3) == msgs[:4]
    assert len(g.messages(59)) == 60


def test_turn_round_trips_every_field():
    g = RolloutGraph()
    t = call(
        SYSTEM,
        [1, 2],
        finish_reason="tool_calls",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        sampling_requested={"top_p": 0.9},
        sampling_applied={"top_p": 1.0},
        usage={"prompt_tokens": 40, "completion_tokens": 2},
        engine="http://e",
        model="m",
    )
    g.add(t)
    back = g.turn(0)
    assert back.prompt_ids.tolist() == t.prompt_ids.tolist()
    assert back.completion_ids.tolist() == [1, 2]
    assert back.completion_logprobs.dtype == np.float32
    for name in ("finish_reason", "tool_calls", "sampling_requested", "usage", "engine", "model"):
        assert getattr(back, name) == getattr(t, name)
    assert g.node(0).meta["finish_reason"] == "tool_calls"


def test_turns_without_prompt_ids_are_roots_and_never_retries():
    g = RolloutGraph()
    g.add(Turn([], [], None, tier="text"))
    g.add(Turn([], [], None, tier="text"))
    assert g.roots == [0, 1]
    assert not g.node(0).discarded and not g.node(1).discarded


@pytest.mark.parametrize("bad", [[-0.1], [-0.1, -0.2, -0.3]])
def test_logprobs_of_the_wrong_length_do_not_break_sequences(bad):
    g = RolloutGraph()
    g.add(Turn(SYSTEM, [1, 2], bad, has_tools=True))
    (seq,) = g.sequences()
    assert seq.loss_mask.sum() == 2
    assert seq.logprobs[40] == np.float32(-0.1)


def test_hash_collisions_cannot_pick_a_wrong_parent():
    # Ids are hashed modulo 2**31 - 1, so ids 0 and 2**31 - 1 hash alike: only the exact
    # verification tells these streams apart.
    g = RolloutGraph()
    g.add(call([0, 1], [2]))
    g.add(call([2**31 - 1, 1, 2, 3], [4]))
    assert g.node(1).parent is None
    g.add(call([0, 1, 2, 3], [4]))
    assert g.node(2).parent == 0


def test_a_long_rollout_keeps_each_message_once():
    g = RolloutGraph()
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    prompt = SYSTEM
    for i in range(300):
        g.add(call(prompt, [i], messages=[dict(m) for m in history]))  # parsed anew each call
        prompt = [*prompt, i, 9000 + i]
        history = [
            *history,
            {"role": "assistant", "content": f"a{i}"},
            {"role": "tool", "content": f"t{i}"},
        ]
    kept = sum(len(g.messages(i)) - g.node(i).messages_inherited for i in range(len(g)))
    assert kept == 2 + 2 * 299  # not 300 copies of a growing history
    assert g.messages(299) == history[:-2]


def test_identical_tool_manifests_are_stored_once_not_per_turn():
    # An agent resends the same manifest (often tens of kB) on every call.
    def manifest(name: str) -> list[dict]:
        return [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]

    g = RolloutGraph()
    g.add(Turn([1, 2], [3], [-0.1], tools=manifest("bash")))
    g.add(Turn([1, 2, 3, 4], [5], [-0.1], tools=manifest("bash")))
    g.add(Turn([9, 9], [5], [-0.1], tools=manifest("read")))
    g.add(Turn([9, 9, 5, 6], [7], [-0.1]))
    assert g.tool_manifests() == [manifest("bash"), manifest("read")]
    assert [g.tools_index(i) for i in range(4)] == [0, 0, 1, None]
    assert g.turn(0).tools is g.turn(1).tools
    assert g.turn(3).tools is None


def test_manifests_that_differ_only_in_key_order_are_kept_apart():
    # A chat template renders the manifest's JSON as sent: key order changes the prompt.
    g = RolloutGraph()
    g.add(Turn([1], [2], [-0.1], tools=[{"type": "function", "function": {"name": "a"}}]))
    g.add(Turn([1, 2, 3], [4], [-0.1], tools=[{"function": {"name": "a"}, "type": "function"}]))
    assert [g.tools_index(i) for i in range(2)] == [0, 1]
