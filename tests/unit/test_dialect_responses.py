"""OpenAI Responses dialect: routes, input items -> chat, answer -> Response / event stream."""

import asyncio
import json

import pytest

from capture.dialects.base import ChatCall, DialectError
from capture.dialects.responses import ResponsesDialect
from tests.unit.dialect_samples import engine_message, engine_reply, frames

TURN = ResponsesDialect().match("POST", "/v1/responses")


def translate(dialect: ResponsesDialect, body: dict) -> ChatCall:
    return dialect.to_chat({"model": "gpt-5", **body}, TURN)


def test_routes_with_and_without_v1_prefix():
    dialect = ResponsesDialect()
    assert dialect.match("POST", "/v1/responses").kind == "turn"
    assert dialect.match("post", "/responses").action == "responses"
    websocket = dialect.match("GET", "/v1/responses")
    assert (websocket.kind, websocket.action) == ("aux", "websocket")
    assert dialect.match("POST", "/v1/chat/completions") is None
    assert dialect.match("DELETE", "/v1/responses") is None


def test_session_key_is_the_bearer_token():
    dialect = ResponsesDialect()
    assert dialect.session_key({"authorization": "Bearer s-123"}, {}) == "s-123"
    assert dialect.session_key({"authorization": "bearer s-9"}, {}) == "s-9"
    assert dialect.session_key({"authorization": "Basic xyz"}, {}) is None


def test_string_input_and_instructions():
    call = translate(ResponsesDialect(), {"instructions": "Be brief.", "input": "hi"})
    assert call.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert call.stream is False and call.client_model == "gpt-5"


def test_assistant_side_items_fold_into_one_message():
    body = {
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "short"}],
             "content": [{"type": "reasoning_text", "text": "I should run ls."}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":["ls"]}'},
            {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": '{"cmd":["pwd"]}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "call_2",
             "output": [{"type": "input_text", "text": "/w"}]},
        ]
    }  # fmt: skip
    messages = translate(ResponsesDialect(), body).body["messages"]
    assert messages[0] == {"role": "system", "content": "Rules."}
    assert messages[2] == {
        "role": "assistant",
        "content": "Listing.",
        "reasoning": "I should run ls.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":["ls"]}'}},
            {"id": "call_2", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":["pwd"]}'}},
        ],
    }  # fmt: skip
    assert messages[3:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "call_2", "content": "/w"},
    ]


def test_reasoning_falls_back_to_summary_then_our_encrypted_content():
    dialect = ResponsesDialect()
    encrypted = dialect.render(engine_reply("ok", reasoning="hidden"), ChatCall({}, False))[
        "output"
    ][0]
    items = [
        {"type": "reasoning", "summary": [], "encrypted_content": encrypted["encrypted_content"]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]},
    ]
    assert (
        translate(ResponsesDialect(), {"input": items}).body["messages"][0]["reasoning"] == "hidden"
    )
    items[0] = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "sum"}]}
    assert translate(dialect, {"input": items}).body["messages"][0]["reasoning"] == "sum"


def test_images_become_placeholders_for_text_only_engines():
    item = {"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
    ]}  # fmt: skip
    content = translate(ResponsesDialect(), {"input": [item]}).body["messages"][0]["content"]
    assert content.startswith("What is this?\n[image omitted")


def test_tools_function_flat_to_nested_custom_to_input_string_hosted_dropped():
    body = {
        "input": "hi",
        "tools": [
            {"type": "function", "name": "shell", "description": "Run", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch", "description": "Patch", "format": {"type": "grammar"}},
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "shell"},
        "max_output_tokens": 99,
        "reasoning": {"effort": "low"},
        "parallel_tool_calls": False,
    }  # fmt: skip
    call = translate(ResponsesDialect(), body)
    tools = call.body["tools"]
    assert [t["function"]["name"] for t in tools] == ["shell", "apply_patch"]
    assert tools[0]["function"]["parameters"] == {"type": "object"}
    assert tools[1]["function"]["parameters"]["properties"] == {"input": {"type": "string"}}
    assert call.body["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert call.body["max_tokens"] == 99 and call.body["reasoning_effort"] == "low"
    assert call.body["parallel_tool_calls"] is False
    assert call.options["custom_tools"] == ["apply_patch"]


def test_previous_response_id_continues_a_response_this_proxy_returned():
    dialect = ResponsesDialect()
    first = translate(dialect, {"instructions": "Be brief.", "input": "list", "tools": [
        {"type": "function", "name": "shell", "parameters": {"type": "object"}}]})  # fmt: skip
    reply = engine_reply(None, calls=[("c1", "shell", '{"cmd": "ls"}')])
    response = dialect.render(reply, first)
    output = {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}
    body = {"previous_response_id": response["id"], "input": [output], "instructions": "Be brief."}
    messages = translate(dialect, body).body["messages"]
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list"},
        engine_message(reply),
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ]
    with pytest.raises(DialectError, match="send the whole conversation"):
        translate(ResponsesDialect(), {"input": "hi", "previous_response_id": response["id"]})
    with pytest.raises(DialectError):
        translate(ResponsesDialect(), {"input": 3})


def test_render_orders_reasoning_message_calls_with_stable_ids():
    dialect = ResponsesDialect()
    call = translate(dialect, {"input": "hi", "tools": [{"type": "custom", "name": "apply_patch"}]})
    reply = engine_reply(
        "Patching.",
        reasoning="Think.",
        calls=[("chatcmpl-tool-1", "apply_patch", '{"input": "*** Begin Patch"}'),
               ("chatcmpl-tool-2", "shell", '{"cmd": "ls"}')],
    )  # fmt: skip
    response = dialect.render(reply, call)
    assert response["id"] == "resp_abc123" and response["status"] == "completed"
    assert [i["type"] for i in response["output"]] == [
        "reasoning", "message", "custom_tool_call", "function_call",
    ]  # fmt: skip
    assert [i["id"] for i in response["output"]] == [
        "rs_abc123",
        "msg_abc123",
        "fc_abc123_0",
        "fc_abc123_1",
    ]
    custom, function = response["output"][2:]
    assert custom["input"] == "*** Begin Patch" and custom["call_id"] == "chatcmpl-tool-1"
    assert function["arguments"] == '{"cmd": "ls"}'
    assert response["usage"]["input_tokens"] == 30 and response["usage"]["output_tokens"] == 4
    assert dialect.render(reply, call)["output"] == response["output"]  # stable


def test_length_is_incomplete_but_still_a_response():
    response = ResponsesDialect().render(
        engine_reply("", finish_reason="length"), ChatCall({}, True)
    )
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["content"][0]["text"] == ""


def test_stream_grammar_and_sequence_numbers():
    reply = engine_reply("Listing.", reasoning="Think.", calls=[("c1", "shell", '{"cmd": "ls"}')])
    events = frames(ResponsesDialect().stream(reply, ChatCall({}, True, client_model="gpt-5")))
    names = [name for name, _ in events]
    assert names == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    completed = events[-1][1]["response"]
    assert completed["id"] == "resp_abc123" and completed["model"] == "gpt-5"
    assert [i["type"] for i in completed["output"]] == ["reasoning", "message", "function_call"]
    assert events[0][1]["response"]["id"] == completed["id"]


def test_empty_completion_on_length_still_ends_with_response_completed():
    events = frames(
        ResponsesDialect().stream(engine_reply(None, finish_reason="length"), ChatCall({}, True))
    )
    assert events[-1][0] == "response.completed"
    assert events[-1][1]["response"]["status"] == "incomplete"


@pytest.mark.parametrize("arguments", ['{"cmd":"ls"}', '{"cmd": "ls"}', '{ "cmd" : "ls" }'])
def test_replayed_output_reproduces_the_engine_message(arguments):
    dialect = ResponsesDialect()
    call = translate(dialect, {"input": "hi"})
    reply = engine_reply(None, reasoning="r", calls=[("c1", "shell", arguments)])
    output = json.loads(json.dumps(dialect.render(reply, call)["output"]))
    replay = [{"role": "user", "content": "hi"}, *output,
              {"type": "function_call_output", "call_id": "c1", "output": "a"}]  # fmt: skip
    messages = translate(dialect, {"input": replay}).body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": arguments}}
        ],
        "reasoning": "r",
    }


def test_custom_tool_replay_reproduces_the_arguments_string():
    dialect = ResponsesDialect()
    call = translate(dialect, {"input": "hi", "tools": [{"type": "custom", "name": "apply_patch"}]})
    arguments = '{"input":"*** Begin Patch\\n*** End Patch"}'
    output = dialect.render(engine_reply(None, calls=[("c9", "apply_patch", arguments)]), call)[
        "output"
    ]
    assert output[0]["type"] == "custom_tool_call"
    replay = [*output, {"type": "custom_tool_call_output", "call_id": "c9", "output": "Done"}]
    messages = translate(dialect, {"input": replay}).body["messages"]
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == arguments
    assert messages[1] == {"role": "tool", "tool_call_id": "c9", "content": "Done"}


def test_errors_in_openai_shape_and_in_stream_response_failed():
    dialect = ResponsesDialect()
    body = dialect.error_body(401, "unknown session", "authentication_error")
    assert (
        body["error"]["message"] == "unknown session"
        and body["error"]["type"] == "authentication_error"
    )
    events = frames(
        [dialect.stream_error(502, "engine down", "engine_unreachable", ChatCall({}, True))]
    )
    assert [name for name, _ in events] == ["response.created", "response.failed"]
    failed = events[1][1]["response"]
    assert failed["status"] == "failed" and failed["error"]["message"] == "engine down"
    assert failed["id"] == events[0][1]["response"]["id"]


def test_websocket_upgrade_is_refused_at_once_without_101():
    dialect = ResponsesDialect()
    answer = asyncio.run(dialect.answer_aux(dialect.match("GET", "/v1/responses"), None, None))
    assert answer.status == 426 and "supports_websockets" in answer.body["error"]["message"]


def test_context_overflow_gets_the_code_codex_acts_on():
    dialect = ResponsesDialect()
    message = "This model's maximum context length is 32768 tokens. However, ..."
    assert dialect.error_body(400, message, "invalid_request_error")["error"]["code"] == (
        "context_length_exceeded"
    )
    events = frames(
        [dialect.stream_error(400, message, "invalid_request_error", ChatCall({}, True))]
    )
    assert events[1][1]["response"]["error"]["code"] == "context_length_exceeded"


def test_item_references_resolve_to_the_items_this_proxy_returned():
    # The AI SDK (opencode's openai provider) stores responses and sends references back, with
    # arguments re-serialised by JavaScript: the replay is still the engine's exact message.
    dialect = ResponsesDialect()
    reply = engine_reply("Looking.", reasoning="r", calls=[("c1", "shell", '{"cmd": "ls"}')])
    reasoning, message, _ = dialect.render(reply, translate(dialect, {"input": "hi"}))["output"]
    replay = [
        {"role": "user", "content": "hi"},
        {"type": "item_reference", "id": reasoning["id"]},
        {"type": "item_reference", "id": message["id"]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
    ]
    assert translate(dialect, {"input": replay}).body["messages"][1] == engine_message(reply)
    with pytest.raises(DialectError, match="store: false"):
        translate(ResponsesDialect(), {"input": replay})
