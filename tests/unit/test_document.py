"""The rollout document: schema, ok rule, both forms, and the round trip through the graph."""

import json

import pytest

from capture.document import (
    SCHEMA_PATH,
    DocumentError,
    DocumentMeta,
    build_document,
    expand_document,
    graph_from_document,
    validate_document,
)
from capture.graph import RolloutGraph
from capture.turns import Turn
from capture.types import SCHEMA_ID
from capture.validate import Finding

SYSTEM = list(range(1000, 1040))
CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
READ = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}


def manifest(*tools: dict) -> list[dict]:
    """A fresh copy per call, as each request's parsed body is."""
    return json.loads(json.dumps(list(tools)))


def sample_graph() -> RolloutGraph:
    """Main agent with a retry and a fork, a subagent root and an aux root."""
    g = RolloutGraph()
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    reply = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    g.add(
        Turn(
            SYSTEM,
            [1, 2],
            [-0.1, -0.2],
            has_tools=True,
            tools=manifest(BASH),
            messages=history,
            tool_calls=[CALL],
            finish_reason="tool_calls",
            sampling_requested={"top_p": 0.9},
            sampling_applied={"top_p": 1.0},
            usage={"prompt_tokens": 40, "completion_tokens": 2},
            timings={"received_at": 1.5, "upstream_ms": 3.0},
        )
    )
    step = [*history, reply, {"role": "tool", "tool_call_id": "c1", "content": "a b"}]
    bash = {"has_tools": True, "tools": manifest(BASH)}
    g.add(Turn([*SYSTEM, 1, 2, 3], [4], [-0.3], messages=step, **bash))
    g.add(Turn([*SYSTEM, 1, 2, 3], [5, 6], [-0.4, float("-inf")], messages=step, **bash))
    g.add(Turn([*SYSTEM, 1, 2, 7], [8], [-0.5], messages=step[:3], **bash))
    g.add(Turn([9] * 10, [10], [-0.6], has_tools=True, tools=manifest(READ), content="sub"))
    g.add(Turn([11] * 5, [12], [-0.7], content="title"))
    return g


def test_schema_file_is_packaged_next_to_the_module():
    assert SCHEMA_PATH.is_file()
    assert json.loads(SCHEMA_PATH.read_text())["properties"]["schema"]["const"] == SCHEMA_ID


@pytest.mark.parametrize("compact", [False, True])
def test_document_validates_against_its_schema(compact):
    doc = build_document(sample_graph(), [], DocumentMeta(ids={"session": "s"}), compact=compact)
    assert doc["schema"] == SCHEMA_ID
    assert validate_document(doc) == []
    json.dumps(doc, allow_nan=False)  # strict JSON: the -inf logprob became null


def test_full_form_has_prompt_token_ids_on_every_turn():
    g = sample_graph()
    doc = build_document(g, [], DocumentMeta())
    assert [t["prompt_token_ids"] for t in doc["turns"]] == [
        g.prompt_ids(i).tolist() for i in range(len(g))
    ]
    assert doc["turns"][2]["logprobs"] == [pytest.approx(-0.4), None]
    assert doc["turns"][0]["tool_calls"] == [CALL]
    assert doc["turns"][1]["messages"][2]["tool_calls"] == [CALL]


def test_compact_form_stores_deltas_only():
    doc = build_document(sample_graph(), [], DocumentMeta(), compact=True)
    assert "prompt_token_ids" not in doc["turns"][1]
    assert doc["turns"][1]["prompt_delta_token_ids"] == [3]
    assert doc["turns"][1]["messages_inherited"] == 2
    assert len(doc["turns"][1]["messages_delta"]) == 2
    assert doc["turns"][3]["messages_inherited"] == 2  # its parent is turn 0
    assert len(doc["turns"][3]["messages_delta"]) == 1
    assert all("token_ids" not in s for s in doc["sequences"])


def test_compact_size_stays_linear_while_full_grows_quadratically():
    def chain(n: int) -> RolloutGraph:
        g = RolloutGraph()
        prompt = list(SYSTEM)
        for i in range(n):
            g.add(Turn(prompt, [i + 1] * 50, [-0.1] * 50, has_tools=True, tools=manifest(BASH)))
            prompt = [*prompt, *([i + 1] * 50), 7]
        return g

    size = {
        (n, c): len(json.dumps(build_document(chain(n), [], DocumentMeta(), compact=c)))
        for n in (20, 40)
        for c in (False, True)
    }
    assert size[(40, True)] / size[(20, True)] < 2.2
    assert size[(40, False)] / size[(20, False)] > 2.5


@pytest.mark.parametrize("compact", [False, True])
def test_build_parse_round_trip_is_exact(compact):
    g = sample_graph()
    g.demote(3)
    doc = json.loads(json.dumps(build_document(g, [], DocumentMeta(), compact=compact)))
    again = build_document(graph_from_document(doc), [], DocumentMeta(), compact=compact)
    assert again == doc


@pytest.mark.parametrize("compact", [False, True])
def test_each_distinct_tool_manifest_is_written_once_and_turns_index_it(compact):
    doc = build_document(sample_graph(), [], DocumentMeta(), compact=compact)
    assert doc["tools"] == [[BASH], [READ]]
    assert [t["tools"] for t in doc["turns"]] == [0, 0, 0, 0, 1, None]


def test_a_tools_index_past_the_table_is_refused():
    doc = json.loads(json.dumps(build_document(sample_graph(), [], DocumentMeta())))
    doc["turns"][1]["tools"] = 2
    assert validate_document(doc) == ["turns/1/tools: 2 names no manifest (the tools table has 2)"]
    with pytest.raises(DocumentError, match="turn 1 names tool manifest 2"):
        graph_from_document(doc)


def test_compact_expands_to_the_full_document():
    g = sample_graph()
    full = build_document(g, [], DocumentMeta(ids={"rollout": "r"}))
    compact = build_document(g, [], DocumentMeta(ids={"rollout": "r"}), compact=True)
    assert expand_document(compact) == full


def test_zero_turns_is_fatal_and_never_ok_whatever_the_meta_says():
    doc = build_document(RolloutGraph(), [], DocumentMeta(ok=True, reward=1.0))
    assert doc["ok"] is False
    assert [(f["level"], f["code"]) for f in doc["findings"]] == [("FATAL", "no_model_calls")]
    assert doc["error"]["kind"] == "no_model_calls"
    assert validate_document(doc) == []


def test_a_fatal_finding_overrides_meta_ok():
    fatal = Finding(level="FATAL", code="logprobs_length_mismatch", message="2 vs 1", turn=0)
    doc = build_document(sample_graph(), [fatal], DocumentMeta(ok=True, reward=1.0))
    assert doc["ok"] is False and doc["error"]["kind"] == "capture_invalid"
    assert doc["reward"] == 1.0  # the reward still travels verbatim


def test_meta_ok_cannot_make_a_rollout_without_a_trainable_turn_ok():
    graph = RolloutGraph()
    graph.add(Turn(list(range(40)), [], [], has_tools=True, finish_reason="length"))
    doc = build_document(graph, [], DocumentMeta(ok=True, reward=1.0))
    assert doc["ok"] is False and doc["error"]["kind"] == "capture_invalid"
    text_tier = RolloutGraph()
    text_tier.add(Turn(list(range(40)), [1, 2], None, content="hi", tier="text"))
    assert build_document(text_tier, [], DocumentMeta(ok=True, reward=1.0))["ok"] is False


def test_schema_rejects_an_ok_document_with_a_fatal_finding_or_no_turns():
    doc = build_document(sample_graph(), [], DocumentMeta())
    assert doc["ok"] is True
    doc["findings"] = [{"level": "FATAL", "code": "x", "message": "m", "turn": None}]
    assert validate_document(doc)
    empty = build_document(RolloutGraph(), [], DocumentMeta())
    empty["ok"], empty["findings"] = True, []
    assert any("False was expected" in p for p in validate_document(empty))


def test_schema_rejects_a_full_turn_without_prompt_token_ids():
    doc = build_document(sample_graph(), [], DocumentMeta())
    del doc["turns"][2]["prompt_token_ids"]
    problems = validate_document(doc)
    assert any(p.startswith("turns/2") and "prompt_token_ids" in p for p in problems)


def test_bare_session_meta_judges_the_capture_alone():
    only_aux = RolloutGraph()
    only_aux.add(Turn(SYSTEM, [1], [-0.1], aux=True))
    doc = build_document(only_aux, [], None)
    assert doc["ok"] is False and doc["error"]["kind"] == "capture_invalid"
    assert "no trainable turn" in doc["error"]["message"]
    assert build_document(sample_graph(), [], None)["ok"] is True


def test_meta_updated_with_plain_dicts_is_accepted():
    meta = DocumentMeta(ids={"session": "s"}).model_copy(
        update={
            "task": {"dataset": "demo", "name": "hello"},
            "harness": {"name": "terminus-2", "version": "1", "dialect": "chat"},
            "error": {"kind": "timeout", "message": "too slow"},
            "timings": {"agent": 1.5, "verifying": None},
            "ok": False,
        }
    )
    doc = build_document(sample_graph(), [], meta)
    assert doc["task"] == {"dataset": "demo", "name": "hello"}
    assert doc["error"] == {"kind": "timeout", "message": "too slow"}
    assert validate_document(doc) == []


def test_edited_parent_is_refused():
    doc = build_document(sample_graph(), [], DocumentMeta())
    doc["turns"][3]["parent"] = 1
    with pytest.raises(DocumentError, match="turn 3 names parent 1"):
        graph_from_document(doc)


def test_another_schema_is_refused_with_a_clear_message():
    with pytest.raises(DocumentError, match="expected a 'harbor-workbench/rollout/1'"):
        graph_from_document({"schema": "something/else", "turns": []})


@pytest.mark.parametrize(
    ("section", "index", "key", "value", "problem"),
    [
        ("turns", 1, "prompt_token_ids", "7", "token ids must be integers"),
        ("turns", 1, "completion_token_ids", 2**31, "token ids must fit in int32"),
        ("turns", 0, "logprobs", "x", "logprobs must be numbers or null"),
        ("sequences", 0, "loss_mask", 2, "a loss mask holds only 0 and 1"),
        ("sequences", 0, "token_ids", True, "token ids must be integers"),
    ],
)
def test_bad_token_arrays_are_reported_with_their_path(section, index, key, value, problem):
    doc = build_document(sample_graph(), [], DocumentMeta())
    doc[section][index][key][-1] = value
    assert validate_document(doc) == [f"{section}/{index}/{key}: {problem}"]
