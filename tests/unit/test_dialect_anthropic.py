"""Anthropic Messages dialect: routes, blocks -> chat, answer -> Message / named-event stream."""

import json

import pytest

from capture.dialects.anthropic import AnthropicDialect
from capture.dialects.base import ChatCall, DialectError
from tests.unit.dialect_samples import engine_message, engine_reply, frames

TURN = AnthropicDialect().match("POST", "/v1/messages")


def translate(dialect: AnthropicDialect, body: dict) -> ChatCall:
    return dialect.to_chat({"model": "claude-sonnet-4-5", "max_tokens": 64000, **body}, TURN)


def test_routes_ignore_the_beta_query_and_count_tokens_is_aux():
    dialect = AnthropicDialect()
    assert (TURN.kind, TURN.action) == ("turn", "messages")
    assert dialect.match("POST", "/messages").kind == "turn"
    count = dialect.match("POST", "/v1/messages/count_tokens")
    assert (count.kind, count.action) == ("aux", "count_tokens")
    assert dialect.match("GET", "/v1/messages") is None
    assert dialect.match("POST", "/v1/chat/completions") is None


def test_models_routes_are_aux_and_claimed_by_anthropic_headers():
    # `GET /v1/models` is chat's path too: the proxy asks claims() which dialect serves it.
    dialect = AnthropicDialect()
    listed = dialect.match("GET", "/v1/models")
    assert (listed.kind, listed.action) == ("aux", "models")
    one = dialect.match("GET", "/models/claude-sonnet-4-6/")
    assert (one.kind, one.action, one.model) == ("aux", "model", "claude-sonnet-4-6")
    assert dialect.match("GET", "/v1/models/a/b") is None
    assert dialect.claims({"anthropic-version": "2023-06-01"}, {})
    assert dialect.claims({"x-api-key": "s-1"}, {})
    assert not dialect.claims({"authorization": "Bearer s-1"}, {})


def test_session_key_from_x_api_key_or_bearer():
    dialect = AnthropicDialect()
    assert dialect.session_key({"x-api-key": "s-1"}, {}) == "s-1"
    assert dialect.session_key({"authorization": "Bearer s-2"}, {}) == "s-2"
    assert dialect.session_key({}, {}) is None


USER_HI = {"role": "user", "content": "hi"}


def test_system_blocks_joined_and_billing_header_stripped():
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=93f1a;"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ]
    call = translate(
        AnthropicDialect(), {"system": system, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert call.body["messages"][0] == {"role": "system", "content": "You are Claude Code."}
    one_string = "x-anthropic-billing-header: cch=1;\nBe terse."
    call = translate(AnthropicDialect(), {"system": one_string, "messages": [USER_HI]})
    assert call.body["messages"] == [{"role": "system", "content": "Be terse."}, USER_HI]


def test_tool_results_become_tool_messages_before_the_users_text():
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "use ls", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]},
            {"type": "text", "text": "<system-reminder>keep going</system-reminder>"},
        ]},
    ]  # fmt: skip
    chat = translate(AnthropicDialect(), {"messages": messages}).body["messages"]
    assert chat[1] == {
        "role": "assistant",
        "content": "Running.",
        "reasoning": "use ls",
        "tool_calls": [{"id": "toolu_1", "type": "function",
                        "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}],
    }  # fmt: skip
    assert chat[2:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"},
        {"role": "user", "content": "<system-reminder>keep going</system-reminder>"},
    ]


def test_tool_result_error_is_surfaced_and_images_become_placeholders():
    content = [
        {"type": "tool_result", "tool_use_id": "t", "is_error": True, "content": "exit 1"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    chat = translate(AnthropicDialect(), {"messages": [{"role": "user", "content": content}]}).body
    assert chat["messages"][0]["content"] == "[Tool Error] exit 1"
    assert chat["messages"][1]["content"].startswith("[image omitted: the engine is text-only")
    assert "image/png" in chat["messages"][1]["content"]


def test_tools_choice_thinking_and_sampling_fields():
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"name": "Bash", "description": "Run", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stop_sequences": ["END"],
        "temperature": 0.5,
        "stream": True,
    }
    call = translate(AnthropicDialect(), body)
    assert call.body["tools"] == [
        {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}, "description": "Run"}}
    ]  # fmt: skip
    assert call.body["tool_choice"] == "required" and call.body["parallel_tool_calls"] is False
    assert call.body["chat_template_kwargs"] == {"enable_thinking": True}
    assert call.body["stop"] == ["END"] and call.body["max_tokens"] == 64000
    assert call.stream is True and call.client_model == "claude-sonnet-4-5"


def test_a_prefill_is_continued_not_answered_anew():
    messages = [{"role": "user", "content": "JSON please"}, {"role": "assistant", "content": "{"}]
    body = translate(AnthropicDialect(), {"messages": messages}).body
    assert body["messages"][-1] == {"role": "assistant", "content": "{"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    plain = translate(AnthropicDialect(), {"messages": messages[:1]}).body
    assert "continue_final_message" not in plain


def test_bad_bodies_are_dialect_errors():
    with pytest.raises(DialectError):
        translate(AnthropicDialect(), {"messages": "hi"})
    with pytest.raises(DialectError, match="role"):
        translate(AnthropicDialect(), {"messages": [{"role": "system", "content": "x"}]})


def test_render_blocks_in_order_with_tool_input_objects():
    reply = engine_reply(
        "Listing.", reasoning="Think.", calls=[("chatcmpl-tool-1", "Bash", '{"command": "ls"}')]
    )
    message = AnthropicDialect().render(reply, ChatCall({}, False, client_model="claude-x"))
    assert message["id"] == "msg_abc123" and message["model"] == "claude-x"
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][2] == {
        "type": "tool_use", "id": "chatcmpl-tool-1", "name": "Bash", "input": {"command": "ls"},
    }  # fmt: skip
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["input_tokens"] == 30 and message["usage"]["output_tokens"] == 4


def test_empty_completion_is_one_empty_text_block():
    message = AnthropicDialect().render(
        engine_reply(None, finish_reason="length"), ChatCall({}, False)
    )
    assert message["content"] == [{"type": "text", "text": ""}]
    assert message["stop_reason"] == "max_tokens"


def test_stop_string_gives_stop_sequence():
    message = AnthropicDialect().render(engine_reply("a", stop_reason="END"), ChatCall({}, False))
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "END")


def test_stream_events_are_named_and_block_indices_in_order():
    reply = engine_reply("Listing.", reasoning="Think.", calls=[("c1", "Bash", '{"command":"ls"}'),
                                                               ("c2", "Read", '{"path": "a"}')])  # fmt: skip
    events = frames(AnthropicDialect().stream(reply, ChatCall({}, True)))
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    starts = [d for n, d in events if n == "content_block_start"]
    assert [d["index"] for d in starts] == [0, 1, 2, 3]
    assert [d["content_block"]["type"] for d in starts] == [
        "thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    thinking = [d for n, d in events if d.get("index") == 0]
    assert [d["delta"]["type"] for d in thinking if "delta" in d] == [
        "thinking_delta",
        "signature_delta",
    ]
    assert thinking[-1]["type"] == "content_block_stop"  # signature before the stop
    inputs = [
        d["delta"]["partial_json"]
        for _, d in events
        if d.get("delta", {}).get("type") == "input_json_delta"
    ]
    assert [json.loads(i) for i in inputs] == [{"command": "ls"}, {"path": "a"}]
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] == 4


def test_stream_of_empty_completion_opens_and_closes_one_text_block():
    events = frames(AnthropicDialect().stream(engine_reply(""), ChatCall({}, True)))
    assert [n for n, _ in events] == [
        "message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "arguments", ['{"command":"ls -la","n":1}', '{"command": "ls -la", "n": 1}']
)
def test_replayed_tool_use_reproduces_the_engine_arguments_string(arguments):
    dialect = AnthropicDialect()
    reply = engine_reply(None, reasoning="r", calls=[("c1", "Bash", arguments)])
    content = json.loads(json.dumps(dialect.render(reply, ChatCall({}, False))["content"]))
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]},
    ]
    replayed = translate(dialect, {"messages": messages}).body["messages"][1]
    assert replayed == engine_message(reply)


def test_without_memory_the_replay_uses_vllm_canonical_json():
    content = [{"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "é"}}]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}]
    replayed = translate(AnthropicDialect(), {"messages": messages}).body["messages"][1]
    assert replayed["tool_calls"][0]["function"]["arguments"] == '{"command": "é"}'
    assert replayed["content"] is None


def test_errors_in_anthropic_shape():
    dialect = AnthropicDialect()
    assert dialect.error_body(401, "unknown key", "authentication_error") == {
        "type": "error", "error": {"type": "authentication_error", "message": "unknown key"},
    }  # fmt: skip
    assert (
        dialect.error_body(502, "engine down", "engine_unreachable")["error"]["type"] == "api_error"
    )
    assert dialect.error_body(404, "no", "not_found")["error"]["type"] == "not_found_error"
    ((name, data),) = frames([dialect.stream_error(504, "slow", "timeout", ChatCall({}, True))])
    assert name == "error" and data["error"] == {"type": "timeout_error", "message": "slow"}
