"""The engine's answer as dialects read it, and the memory that makes replays exact."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from capture.dialects.answer import (
    Answer,
    ReplayMemory,
    as_javascript,
    assistant_message,
    sign,
    unsign,
)
from capture.dialects.anthropic import AnthropicDialect
from capture.dialects.base import ChatCall
from capture.dialects.google import GoogleDialect
from capture.dialects.responses import ResponsesDialect
from tests.unit.dialect_samples import engine_message, engine_reply


def replayed(content, reasoning, calls):
    """An assistant message rebuilt from a client's lossy echo (arguments re-serialised)."""
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    return assistant_message(content, reasoning, tool_calls)


def test_answer_reads_choice_zero_usage_and_fills_missing_call_ids():
    reply = engine_reply("hi", reasoning="r", calls=[("", "ls", "{}"), ("", "ls", "{}")])
    answer = Answer.from_reply(reply)
    assert (answer.content, answer.reasoning, answer.finish_reason) == ("hi", "r", "tool_calls")
    assert [c.id for c in answer.tool_calls] == ["call_abc123_0", "call_abc123_1"]
    assert (answer.prompt_tokens, answer.completion_tokens, answer.reasoning_tokens) == (30, 4, 1)


def test_compact_arguments_come_back_exactly():
    memory = ReplayMemory()
    reply = engine_reply(None, calls=[("c1", "bash", '{"cmd":"ls","n":2}')])
    memory.remember(Answer.from_reply(reply))
    echo = replayed(None, None, [("c1", "bash", '{"cmd": "ls", "n": 2}')])
    assert memory.recall(echo) == engine_message(reply)


def test_javascript_clients_turn_integral_floats_into_ints():
    memory = ReplayMemory()
    reply = engine_reply("Waiting.", calls=[("c1", "bash", '{"timeout": 30.0, "xs": [1.0, 2.5]}')])
    memory.remember(Answer.from_reply(reply))
    echo = replayed("Waiting.", None, [("c1", "bash", '{"timeout": 30, "xs": [1, 2.5]}')])
    assert memory.recall(echo)["tool_calls"][0]["function"]["arguments"] == (
        '{"timeout": 30.0, "xs": [1.0, 2.5]}'
    )


def test_empty_reasoning_and_null_content_are_kept_as_the_engine_sent_them():
    memory = ReplayMemory()
    reply = engine_reply("", reasoning="")  # "" and "" are not None for a template
    memory.remember(Answer.from_reply(reply))
    exact = memory.recall(replayed("", None, []))
    assert exact == {"role": "assistant", "content": "", "reasoning": ""}


def test_reasoning_the_client_dropped_stays_dropped():
    memory = ReplayMemory()
    memory.remember(Answer.from_reply(engine_reply("ok", reasoning="long thoughts")))
    assert memory.recall(replayed("ok", None, [])) == {"role": "assistant", "content": "ok"}
    other = memory.recall(replayed("ok", "edited", []))
    assert other["reasoning"] == "edited"


def test_unknown_or_edited_messages_pass_through():
    memory = ReplayMemory()
    memory.remember(Answer.from_reply(engine_reply(None, calls=[("c1", "bash", '{"a":1}')])))
    edited = replayed(None, None, [("c1", "bash", '{"a": 2}')])
    assert memory.recall(edited) is edited


def test_memory_is_bounded_and_recall_keeps_an_entry_alive():
    memory = ReplayMemory(capacity=2)
    for text in ("one", "two"):
        memory.remember(Answer.from_reply(engine_reply(text, reasoning="")))
    memory.recall(replayed("one", None, []))  # "one" is now the most recent
    memory.remember(Answer.from_reply(engine_reply("three", reasoning="")))
    assert len(memory) == 2
    assert "reasoning" in memory.recall(replayed("one", None, []))
    assert "reasoning" not in memory.recall(replayed("two", None, []))


def test_signatures_round_trip_and_foreign_ones_are_ignored():
    assert unsign(sign("think ✓")) == "think ✓"
    assert unsign("EqQBCkgIARABGAIiQL") is None
    assert unsign(None) is None


# -- property: any engine answer, rendered and replayed by any client, comes back exactly -------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(-1e6, 1e6)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
styles = st.sampled_from([
    {}, {"separators": (",", ":")}, {"ensure_ascii": False}, {"indent": 1}, {"sort_keys": True},
])  # fmt: skip


@st.composite
def answers(draw):
    texts = st.none() | st.text(max_size=8)
    calls = []
    for index in range(draw(st.integers(0, 3))):
        arguments = json.dumps(
            draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3)), **draw(styles)
        )
        calls.append((f"chatcmpl-tool-{index}", draw(st.sampled_from(["ls", "cat"])), arguments))
    return engine_reply(draw(texts), reasoning=draw(texts), calls=calls)


def replay_anthropic(dialect, reply, javascript):
    content = jsonish(dialect.render(reply, ChatCall({}, False))["content"], javascript)
    body = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
    }
    return dialect.to_chat(body, dialect.match("POST", "/v1/messages")).body["messages"][-1]


def replay_google(dialect, reply, javascript):
    content = dialect.render(reply, ChatCall({}, False))["candidates"][0]["content"]
    if javascript:  # gemini-cli keeps signatures but drops thought parts
        content = {**content, "parts": [p for p in content["parts"] if not p.get("thought")]}
    body = {"contents": [{"role": "user", "parts": [{"text": "q"}]}, jsonish(content, javascript)]}
    route = dialect.match("POST", "/v1beta/models/g:generateContent")
    return dialect.to_chat(body, route).body["messages"][-1]


def replay_responses(dialect, reply, javascript):
    output = jsonish(dialect.render(reply, ChatCall({}, False))["output"], javascript)
    body = {"input": [{"role": "user", "content": "q"}, *output]}
    return dialect.to_chat(body, dialect.match("POST", "/v1/responses")).body["messages"][-1]


def jsonish(value, javascript: bool):
    """What a client holds after parsing the answer (JavaScript turns 2.0 into 2)."""
    value = json.loads(json.dumps(value))
    return as_javascript(value) if javascript else value


@settings(max_examples=150, deadline=None)
@given(answers(), st.booleans())
def test_every_dialect_replays_the_engine_message_exactly(reply, javascript):
    expected = engine_message(reply)
    for dialect, replay in (
        (AnthropicDialect(), replay_anthropic),
        (GoogleDialect(), replay_google),
        (ResponsesDialect(), replay_responses),
    ):
        assert replay(dialect, reply, javascript) == expected, dialect.name
