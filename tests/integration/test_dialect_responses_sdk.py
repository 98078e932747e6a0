"""The Responses dialect through the official openai SDK, against the capture proxy on a real port
in front of the scripted reference engine: create and stream, a function call answered with
`function_call_output`, a custom tool, multi-turn chains, the WebSocket refusal (426, so Codex falls back to HTTP)."""

import json

import httpx
import openai
import pytest
import websockets.http11
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from capture.dialects.responses import ResponsesDialect
from tests.integration.dialect_fixtures import (
    ASK,
    BASH_SCHEMA,
    BYE,
    COMMAND,
    FAREWELL,
    PATCH,
    REPORT,
    SAYS,
    SYSTEM,
    THOUGHT,
    TOOL_OUTPUT,
    Stack,
    no_warnings,
)

PATH = "/v1/responses"
TOOLS = [{"type": "function", "name": "bash", "description": "Run a shell command.",
          "parameters": BASH_SCHEMA, "strict": False}]  # fmt: skip
CUSTOM = [{"type": "custom", "name": "apply_patch", "description": "Apply a patch."}]


def client(stack: Stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0)


def dumped(items) -> list[dict]:
    """Output items as the plain JSON an agent sends back in `input`."""
    return [item.model_dump(exclude_none=True) for item in items]


def request(input_items: list, *, stream: bool = False, tools=TOOLS) -> dict:
    body = {"model": "gpt-5", "instructions": SYSTEM, "input": input_items, "tools": tools}
    return body | ({"stream": True} if stream else {})


def check_first_answer(response) -> None:
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message", "function_call"]
    reasoning, message, call = response.output
    assert reasoning.content[0].text == THOUGHT
    assert message.content[0].text == SAYS
    assert call.name == "bash" and call.arguments == '{"cmd": "ls -la"}'
    assert json.loads(call.arguments) == COMMAND
    assert call.call_id.startswith("chatcmpl-tool-")
    assert response.status == "completed" and response.model == "gpt-5"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def run_conversation(stack: Stack, *, stream: bool) -> None:
    key = stack.session()
    sdk = client(stack, key)
    history: list = [{"role": "user", "content": ASK}]
    bodies = []
    for turn in range(3):
        body = request(list(history), stream=stream)
        bodies.append(body)
        with no_warnings():
            if stream:
                with sdk.responses.stream(**{k: v for k, v in body.items() if k != "stream"}) as s:
                    kinds = [event.type for event in s]
                    response = s.get_final_response()
                assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
            else:
                response = sdk.responses.create(**body)
        if turn == 0:
            check_first_answer(response)
            call = response.output[-1]
            history += [
                *dumped(response.output),
                {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT},
            ]
        elif turn == 1:
            assert response.output_text == REPORT
            history += [*dumped(response.output), {"role": "user", "content": BYE}]
        else:
            assert response.output_text == FAREWELL
    stack.assert_one_chain(key, "responses", 3)
    for index, body in enumerate(bodies):
        stack.assert_captured_as_engine_returned(key, ResponsesDialect(), PATH, body, index)


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_three_turn_tool_loop_is_one_chain_with_the_engines_ids(stack, stream):
    run_conversation(stack, stream=stream)


def test_raw_event_stream_has_sequence_numbers_and_a_completed_id(stack):
    session_id = stack.session()
    with no_warnings():
        events = list(
            client(stack, session_id).responses.create(
                **request([{"role": "user", "content": ASK}], stream=True)
            )
        )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed" and events[-1].response.id.startswith("resp_")
    assert events[-1].response.id == events[0].response.id
    texts = [e.delta for e in events if e.type == "response.output_text.delta"]
    arguments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert texts == [SAYS] and arguments == ['{"cmd": "ls -la"}']


def test_custom_tool_round_trip(stack):
    session_id = stack.session()
    sdk = client(stack, session_id)
    first = [{"role": "user", "content": "Apply the patch."}]
    with no_warnings(), sdk.responses.stream(**request(first, tools=CUSTOM)) as events:
        deltas = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
        response = events.get_final_response()
    assert deltas == [PATCH]
    (call,) = response.output
    assert call.type == "custom_tool_call" and call.input == PATCH
    history = [*first, *dumped(response.output),
               {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done"}]  # fmt: skip
    with no_warnings():
        second = sdk.responses.create(**request(history, tools=CUSTOM))
    assert second.output_text == "Patched."
    stack.assert_one_chain(session_id, "responses", 2)
    body = request(history, tools=CUSTOM)
    stack.assert_captured_as_engine_returned(session_id, ResponsesDialect(), PATH, body, 1)


def test_unknown_key_is_a_401_in_openai_shape(stack):
    with pytest.raises(openai.AuthenticationError) as failure:
        client(stack, "no-such-session").responses.create(
            **request([{"role": "user", "content": ASK}])
        )
    assert "session" in failure.value.body["message"]


def test_previous_response_id_chains_like_the_full_history(stack):
    # The openai SDK's own conversation state: only the new items, plus the last response's id.
    session_id = stack.session()
    sdk = client(stack, session_id)
    first = sdk.responses.create(**request([{"role": "user", "content": ASK}]))
    call = first.output[-1]
    output = {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT}
    second = sdk.responses.create(**request([output]), previous_response_id=first.id)
    assert second.output_text == REPORT
    bye = sdk.responses.create(
        **request([{"role": "user", "content": BYE}]), previous_response_id=second.id
    )
    assert bye.output_text == FAREWELL
    stack.assert_one_chain(session_id, "responses", 3)
    with pytest.raises(openai.BadRequestError) as failure:
        sdk.responses.create(model="gpt-5", input="hi", previous_response_id="resp_unknown")
    assert "whole conversation" in failure.value.body["message"]
    assert len(stack.graph(session_id)) == 3


def websocket_refusal(url: str, headers: dict[str, str]) -> websockets.http11.Response:
    """The HTTP answer a real WebSocket client gets to its upgrade (it must not be 101)."""
    uri = url.replace("http://", "ws://", 1)
    # open_timeout: a server that holds the handshake would raise TimeoutError here.
    with pytest.raises(InvalidStatus) as refused:
        connect(uri, additional_headers=headers, open_timeout=2).close()
    return refused.value.response


@pytest.mark.parametrize("path", ["/v1/responses", "/responses"])
def test_websocket_upgrade_is_a_426_at_once_so_codex_falls_back_to_http(stack, path):
    # Starlette's default refusal is a 403, on which Codex reconnects five times (~10 s).
    session_id = stack.session()
    headers = {"authorization": f"Bearer {session_id}",
               "openai-beta": "responses_websockets=2026-02-06"}  # fmt: skip
    refusal = websocket_refusal(stack.url + path, headers)
    assert refusal.status_code == 426, refusal
    assert "supports_websockets" in json.loads(refusal.body)["error"]["message"]
    plain = httpx.get(f"{stack.url}{path}", headers=headers, timeout=2)
    assert plain.status_code == 426 and "supports_websockets" in plain.json()["error"]["message"]
    assert len(stack.graph(session_id)) == 0


def test_websocket_upgrade_elsewhere_is_an_http_error_too(stack):
    session_id = stack.session()
    unknown = websocket_refusal(f"{stack.url}/v1/responses", {"authorization": "Bearer nobody"})
    assert unknown.status_code == 401 and "POST /sessions" in unknown.body.decode()
    served = websocket_refusal(f"{stack.url}/v1/models", {"authorization": f"Bearer {session_id}"})
    assert served.status_code == 426 and "plain HTTP" in served.body.decode()
    assert websocket_refusal(f"{stack.url}/v1/nowhere", {}).status_code == 404


def test_item_references_and_javascript_arguments_keep_one_chain(stack):
    # What the AI SDK (opencode's openai provider) sends: stored items by reference, and the
    # call's arguments re-serialised by JavaScript (compact), not as the engine wrote them.
    session_id = stack.session()
    sdk = client(stack, session_id)
    first = [{"role": "user", "content": ASK}]
    response = sdk.responses.create(**request(first))
    reasoning, message, call = response.output
    history = [
        *first,
        {"type": "item_reference", "id": reasoning.id},
        {"type": "item_reference", "id": message.id},
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": json.dumps(json.loads(call.arguments), separators=(",", ":"))},
        {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT},
    ]  # fmt: skip
    assert sdk.responses.create(**request(history)).output_text == REPORT
    stack.assert_one_chain(session_id, "responses", 2)
    replayed = stack.graph(session_id).turn(1).messages[2]
    assert replayed["tool_calls"][0]["function"]["arguments"] == call.arguments
