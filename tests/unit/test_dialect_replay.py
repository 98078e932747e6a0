"""The engine's answer as dialects read it, and the memory that makes replays exact."""

from capture.dialects.answer import Answer, ReplayMemory, assistant_message, sign, unsign
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
