"""Google generateContent dialect: routes, contents -> chat, answer -> GenerateContentResponse."""

import base64
import json

import pytest

from capture import sse
from capture.dialects.base import ChatCall, DialectError
from capture.dialects.google import GoogleDialect
from tests.unit.dialect_samples import engine_message, engine_reply, frames

TURN = GoogleDialect().match("POST", "/v1beta/models/gemini-2.5-pro:generateContent")


def translate(dialect: GoogleDialect, body: dict, route=TURN) -> ChatCall:
    return dialect.to_chat(body, route)


@pytest.mark.parametrize("version", ["v1", "v1beta", "v1alpha"])
def test_routes_by_version_and_action_in_any_case(version):
    dialect = GoogleDialect()
    turn = dialect.match("POST", f"/{version}/models/gemini-2.5-flash:generateContent")
    assert (turn.kind, turn.stream, turn.model) == ("turn", False, "gemini-2.5-flash")
    stream = dialect.match(
        "POST", f"/{version}/models/gemini-3.0-pro-preview:STREAMGENERATECONTENT"
    )
    assert (stream.kind, stream.stream) == ("turn", True)
    count = dialect.match("POST", f"/{version}/models/m:countTokens")
    assert (count.kind, count.action) == ("aux", "count_tokens")
    assert dialect.match("GET", f"/{version}/models").action == "models"
    assert dialect.match("GET", f"/{version}/models/m").action == "model"
    assert dialect.match("POST", f"/{version}/models/m:embedContent").action == "unsupported"


def test_routes_of_other_dialects_are_not_matched():
    dialect = GoogleDialect()
    assert dialect.match("POST", "/v1/chat/completions") is None
    assert dialect.match("POST", "/v1/messages") is None
    assert dialect.match("POST", "/models/m:generateContent").kind == "turn"  # unversioned


def test_session_key_from_goog_header_query_or_bearer():
    dialect = GoogleDialect()
    assert dialect.session_key({"x-goog-api-key": "s-1"}, {}) == "s-1"
    assert dialect.session_key({}, {"key": "s-2", "alt": "sse"}) == "s-2"
    assert dialect.session_key({"x-goog-api-key": "", "authorization": "Bearer s-3"}, {}) == "s-3"


def test_claims_requests_with_its_key_header_or_parameter_and_keeps_alive_with_blank_lines():
    dialect = GoogleDialect()
    # google-genai's default API version is v1: its `GET /v1/models` must be told from chat's.
    assert dialect.match("GET", "/v1/models").action == "models"
    assert dialect.claims({"x-goog-api-key": ""}, {})  # gemini-cli in gateway mode
    assert dialect.claims({}, {"key": "s-1"})
    assert not dialect.claims({"authorization": "Bearer s-1"}, {})
    # Neither Google SDK takes an SSE comment between frames; both skip blank lines.
    assert dialect.keepalive == sse.BLANK_LINE


@pytest.mark.parametrize("snake", [False, True])
def test_both_spellings_system_instruction_and_generation_config(snake):
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}, {"text": "there"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.2, "topP": 0.9, "topK": 5, "maxOutputTokens": 77,
                             "stopSequences": ["END"], "seed": 3},
    }  # fmt: skip
    if snake:
        body = {
            "contents": body["contents"],
            "system_instruction": body["systemInstruction"],
            "generation_config": {"temperature": 0.2, "top_p": 0.9, "top_k": 5,
                                  "max_output_tokens": 77, "stop_sequences": ["END"], "seed": 3},
        }  # fmt: skip
    call = translate(GoogleDialect(), body)
    assert call.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi\nthere"},
    ]
    assert {k: call.body[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "stop", "seed")} == {
        "temperature": 0.2, "top_p": 0.9, "top_k": 5, "max_tokens": 77, "stop": ["END"], "seed": 3,
    }  # fmt: skip
    assert call.client_model == "gemini-2.5-pro" and call.stream is False


def test_function_calls_without_ids_get_unique_ids_and_responses_pair_by_order():
    contents = [
        {"role": "user", "parts": [{"text": "read both"}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "c2tpcA=="},
            {"functionCall": {"name": "read", "args": {"path": "b"}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "read", "response": {"output": "A"}}},
            {"functionResponse": {"name": "read", "response": {"output": "B"}}},
        ]},
    ]  # fmt: skip
    messages = translate(GoogleDialect(), {"contents": contents}).body["messages"]
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert len(set(ids)) == 2
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in messages[2:]] == [
        (ids[0], {"output": "A"}),
        (ids[1], {"output": "B"}),
    ]


def test_function_responses_with_ids_pair_by_id():
    contents = [
        {"role": "model", "parts": [
            {"function_call": {"id": "x1", "name": "ls", "args": {}}},
            {"function_call": {"id": "x2", "name": "cat", "args": {"f": "a"}}},
        ]},
        {"role": "user", "parts": [
            {"function_response": {"id": "x2", "name": "cat", "response": {"output": "hello"}}},
            {"function_response": {"name": "ls", "response": {"output": "a"}}},
        ]},
    ]  # fmt: skip
    messages = translate(GoogleDialect(), {"contents": contents}).body["messages"]
    assert [m["tool_call_id"] for m in messages[1:]] == ["x2", "x1"]


def test_thought_parts_are_reasoning_and_media_are_placeholders():
    contents = [
        {"role": "user", "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": "AA"}}]},
        {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"text": "A cat."}]},
    ]  # fmt: skip
    messages = translate(GoogleDialect(), {"contents": contents}).body["messages"]
    assert messages[0]["content"].startswith(
        "look\n[file omitted: the engine is text-only: image/png"
    )
    assert messages[1] == {"role": "assistant", "content": "A cat.", "reasoning": "hmm"}


def test_tools_schema_types_lowered_and_function_calling_config():
    body = {
        "contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "ls", "description": "List", "parameters": {"type": "OBJECT", "properties": {"d": {"type": "STRING"}}}},
            {"name": "cat", "parametersJsonSchema": {"type": "object", "properties": {}}},
        ]}, {"googleSearch": {}}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["cat"]}},
    }  # fmt: skip
    call = translate(GoogleDialect(), body)
    ls, cat = call.body["tools"]
    assert ls["function"]["parameters"] == {
        "type": "object",
        "properties": {"d": {"type": "string"}},
    }
    assert cat["function"]["name"] == "cat"
    assert call.body["tool_choice"] == {"type": "function", "function": {"name": "cat"}}


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [({"thinkingBudget": 0}, False), ({"include_thoughts": True}, True),
     ({"thinkingBudget": 512}, True), ({}, None)],
)  # fmt: skip
def test_thinking_config_switches_the_template_thinking(thinking, expected):
    body = {"contents": [], "generationConfig": {"thinkingConfig": thinking}}
    kwargs = translate(GoogleDialect(), body).body.get("chat_template_kwargs")
    assert kwargs == (None if expected is None else {"enable_thinking": expected})


def test_bad_bodies_are_dialect_errors():
    with pytest.raises(DialectError, match="contents"):
        translate(GoogleDialect(), {"contents": "hi"})
    with pytest.raises(DialectError, match="candidateCount"):
        translate(GoogleDialect(), {"contents": [], "generationConfig": {"candidateCount": 2}})


def test_render_parts_ids_finish_reason_and_usage():
    reply = engine_reply(
        "Listing.", reasoning="Think.", calls=[("chatcmpl-tool-1", "ls", '{"d": "."}')]
    )
    response = GoogleDialect().render(reply, ChatCall({}, False, client_model="gemini-2.5-pro"))
    (candidate,) = response["candidates"]
    parts = candidate["content"]["parts"]
    assert parts[0]["thought"] is True and parts[0]["text"] == "Think."
    assert parts[1] == {"text": "Listing."}
    assert parts[2]["functionCall"] == {"id": "chatcmpl-tool-1", "name": "ls", "args": {"d": "."}}
    for signed in (parts[0], parts[2]):  # the SDK holds signatures as bytes: valid base64
        base64.urlsafe_b64decode(signed["thoughtSignature"])
    assert candidate["finishReason"] == "STOP"
    assert response["usageMetadata"] == {
        "promptTokenCount": 30, "candidatesTokenCount": 3, "thoughtsTokenCount": 1, "totalTokenCount": 34,
    }  # fmt: skip
    assert response["modelVersion"] == "gemini-2.5-pro" and response["responseId"] == "abc123"


def test_length_maps_to_max_tokens():
    response = GoogleDialect().render(
        engine_reply("x", finish_reason="length"), ChatCall({}, False)
    )
    assert response["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_stream_is_plain_data_frames_without_done_and_finish_on_the_last():
    reply = engine_reply(
        "Listing.", reasoning="Think.", calls=[("c1", "ls", "{}"), ("c2", "ls", "{}")]
    )
    raw = "".join(GoogleDialect().stream(reply, ChatCall({}, True)))
    assert "event:" not in raw and "[DONE]" not in raw
    chunks = [data for _, data in frames([raw])]
    assert len(chunks) == 3
    assert [len(c["candidates"][0]["content"]["parts"]) for c in chunks] == [1, 1, 2]
    assert "finishReason" not in chunks[0]["candidates"][0] and "usageMetadata" not in chunks[1]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]


@pytest.mark.parametrize("arguments", ['{"d":".","n":[1,2]}', '{"d": ".", "n": [1, 2]}'])
def test_replayed_function_call_reproduces_the_engine_arguments_string(arguments):
    dialect = GoogleDialect()
    reply = engine_reply("Let me look.", calls=[("c1", "ls", arguments)])
    content = json.loads(
        json.dumps(dialect.render(reply, ChatCall({}, False))["candidates"][0]["content"])
    )
    contents = [
        {"role": "user", "parts": [{"text": "hi"}]},
        content,
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"output": "a"}}}]},
    ]  # fmt: skip
    messages = translate(dialect, {"contents": contents}).body["messages"]
    assert messages[1] == engine_message(reply)
    assert messages[2]["tool_call_id"] == "c1"


@pytest.mark.parametrize("calls", [[("c1", "ls", '{"d": "."}')], []])
def test_reasoning_comes_back_from_the_signature_when_the_client_drops_thought_parts(calls):
    dialect = GoogleDialect()
    reply = engine_reply("Looking.", reasoning="I should look.", calls=calls)
    content = dialect.render(reply, ChatCall({}, False))["candidates"][0]["content"]
    kept = [part for part in content["parts"] if not part.get("thought")]  # as gemini-cli does
    assert any("thoughtSignature" in part for part in kept)
    messages = translate(GoogleDialect(), {"contents": [{"role": "model", "parts": kept}]}).body
    assert messages["messages"][0]["reasoning"] == "I should look."
    foreign = [{"text": "x", "thoughtSignature": "skip_thought_signature_validator"}]
    assert (
        "reasoning"
        not in translate(dialect, {"contents": [{"role": "model", "parts": foreign}]}).body[
            "messages"
        ][0]
    )


def test_errors_in_google_shape():
    dialect = GoogleDialect()
    assert dialect.error_body(401, "unknown key", "authentication_error") == {
        "error": {"code": 401, "message": "unknown key", "status": "UNAUTHENTICATED"}
    }
    assert dialect.error_body(502, "down", "engine_unreachable")["error"]["status"] == "INTERNAL"
    frame = dialect.stream_error(400, "bad", "invalid_request_error", ChatCall({}, True))
    assert frame.startswith('{"error":') and frame.endswith("\n\n")  # bare, not `data:`
    assert json.loads(frame)["error"]["status"] == "INVALID_ARGUMENT"
