"""The Google dialect through the official google-genai SDK, against the capture proxy on a real
port in front of the scripted reference engine: generate_content, generate_content_stream,
function call -> function response round trips as one chain, count_tokens, models (on API
versions v1beta and v1, whose `/v1/models` is chat's path too), errors, keepalives."""

import json

import httpx
import pytest
from google import genai
from google.genai import errors, types

from capture.dialects.answer import as_javascript
from capture.dialects.google import GoogleDialect
from tests.integration.dialect_fixtures import (
    ASK,
    BASH_SCHEMA,
    BYE,
    COMMAND,
    FAREWELL,
    REPORT,
    SAYS,
    SLEEP_ARGUMENTS,
    SYSTEM,
    THOUGHT,
    TOOL_OUTPUT,
    WAIT,
    WAITED,
    Stack,
    no_warnings,
)

MODEL = "gemini-2.5-pro"
PATH = f"/v1/models/{MODEL}:generateContent"
BASH = types.FunctionDeclaration(
    name="bash", description="Run a shell command.", parameters_json_schema=BASH_SCHEMA
)
CONFIG = types.GenerateContentConfig(
    system_instruction=SYSTEM,
    tools=[types.Tool(function_declarations=[BASH])],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def client(
    stack: Stack, key: str, version: str | None = None, http: httpx.Client | None = None
) -> genai.Client:
    options = types.HttpOptions(base_url=stack.url, api_version=version, httpx_client=http)
    return genai.Client(api_key=key, http_options=options)


class Recording(httpx.HTTPTransport):
    """An httpx transport that keeps every byte of the answers it hands to the SDK."""

    def __init__(self) -> None:
        super().__init__()
        self.received = bytearray()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=Tee(response.stream, self.received),
            extensions=response.extensions,
        )


class Tee(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, into: bytearray) -> None:
        self.stream, self.into = stream, into

    def __iter__(self):
        for chunk in self.stream:
            self.into.extend(chunk)
            yield chunk

    def close(self) -> None:
        self.stream.close()


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def native(contents: list[types.Content]) -> dict:
    """The REST body the SDK sends for these contents and CONFIG (camelCase, as on the wire)."""
    return {
        "contents": [c.model_dump(mode="json", exclude_none=True, by_alias=True) for c in contents],
        "systemInstruction": {"parts": [{"text": SYSTEM}], "role": "user"},
        "tools": [{"functionDeclarations": [BASH.model_dump(mode="json", exclude_none=True, by_alias=True)]}],
    }  # fmt: skip


def check_first_answer(content: types.Content) -> None:
    thought, text, call = content.parts
    assert thought.thought is True and thought.text == THOUGHT and thought.thought_signature
    assert text.text == SAYS and not text.thought
    assert call.function_call.name == "bash" and call.function_call.args == COMMAND
    assert call.function_call.id.startswith("chatcmpl-tool-")


def run_conversation(stack: Stack, *, stream: bool) -> None:
    key = stack.session()
    sdk = client(stack, key)  # keep it referenced: a collected Client closes its connections
    models = sdk.models
    history = [user(ASK)]
    snapshots = []
    for turn in range(3):
        snapshots.append(list(history))
        with no_warnings():
            if stream:
                chunks = list(
                    models.generate_content_stream(model=MODEL, contents=history, config=CONFIG)
                )
                parts = [part for chunk in chunks for part in chunk.candidates[0].content.parts]
                content = types.Content(role="model", parts=parts)
                final = chunks[-1]
            else:
                final = models.generate_content(model=MODEL, contents=history, config=CONFIG)
                content = final.candidates[0].content
        assert final.candidates[0].finish_reason == types.FinishReason.STOP
        assert final.usage_metadata.prompt_token_count > 0
        if turn == 0:
            check_first_answer(content)
            # No id on the response: the proxy pairs it with the open call by order.
            result = types.Part.from_function_response(
                name="bash", response={"output": TOOL_OUTPUT}
            )
            history += [content, types.Content(role="user", parts=[result])]
        elif turn == 1:
            assert [p.text for p in content.parts] == [REPORT]
            history += [content, user(BYE)]
        else:
            assert [p.text for p in content.parts] == [FAREWELL]
    stack.assert_one_chain(key, "google", 3)
    call_id = stack.graph(key).turn(0).tool_calls[0]["id"]
    tool_message = stack.graph(key).turn(1).messages[-1]
    assert tool_message == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": '{"output": "README.md"}',
    }
    for index, contents in enumerate(snapshots):
        stack.assert_captured_as_engine_returned(
            key, GoogleDialect(), PATH, native(contents), index
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "stream", [False, True], ids=["generate_content", "generate_content_stream"]
)
def test_three_turn_tool_loop_is_one_chain_with_the_engines_ids(stack, stream):
    run_conversation(stack, stream=stream)


def test_javascript_replay_of_function_call_args_is_one_chain(stack):
    # gemini-cli is JavaScript: `30.0` in functionCall.args comes back as `30`.
    key = stack.session()
    url = f"{stack.url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    headers = {"x-goog-api-key": key}
    contents = [{"role": "user", "parts": [{"text": WAIT}]}]
    body = native([]) | {"contents": contents}
    first = httpx.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.text
    chunks = [
        json.loads(line[len("data: ") :])
        for line in first.text.split("\n")
        if line.startswith("data: ")
    ]
    parts = as_javascript([p for c in chunks for p in c["candidates"][0]["content"]["parts"]])
    (call,) = [p["functionCall"] for p in parts if "functionCall" in p]
    assert call["args"] == {"cmd": "sleep 1", "timeout": 30} and call["id"]
    answer = {
        "functionResponse": {"id": call["id"], "name": "bash", "response": {"output": "slept"}}
    }
    contents += [{"role": "model", "parts": parts}, {"role": "user", "parts": [answer]}]
    second = httpx.post(url, json=body | {"contents": contents}, headers=headers)
    assert second.status_code == 200, second.text
    assert WAITED in second.text
    replayed = stack.graph(key).turn(1).messages[2]
    assert replayed["tool_calls"][0]["function"]["arguments"] == SLEEP_ARGUMENTS
    stack.assert_one_chain(key, "google", 2)


def test_count_tokens_reads_contents_and_system_instruction_and_is_never_a_turn(stack):
    key = stack.session()
    sdk = client(stack, key)
    models = sdk.models
    short = models.count_tokens(model=MODEL, contents="Hi.").total_tokens
    longer = models.count_tokens(model=MODEL, contents=[user(ASK), user(BYE)]).total_tokens
    chat = {"messages": [{"role": "user", "content": ASK}, {"role": "user", "content": BYE}]}
    assert 0 < short < longer == stack.tokenize(chat)
    # gemini-cli and REST callers may send the system instruction too (the Python SDK does not).
    raw = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}],
           "system_instruction": {"parts": [{"text": SYSTEM}]}}  # fmt: skip
    response = httpx.post(f"{stack.url}/v1beta/models/{MODEL}:countTokens?key={key}", json=raw)
    assert response.status_code == 200, response.text
    assert response.json()["totalTokens"] > short
    assert len(stack.graph(key)) == 0


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_models_list_and_get_answer_in_google_shape_on_every_api_version(stack, version):
    # v1 is google-genai's default, and `GET /v1/models` is chat's path too: the SDK's
    # x-goog-api-key header must win it for the Google dialect.
    key = stack.session()
    sdk = client(stack, key, version=version)
    models = sdk.models
    with no_warnings():
        listed = [model.name for model in models.list()]
        one = models.get(model=MODEL)
    assert listed == ["models/workbench-ref"]
    assert one.name == f"models/{MODEL}"
    assert "generateContent" in one.supported_actions
    assert len(stack.graph(key)) == 0


def test_rest_models_list_with_a_key_parameter_is_googles(stack):
    key = stack.session()
    response = httpx.get(f"{stack.url}/v1/models?key={key}")
    assert response.status_code == 200, response.text
    assert response.json()["models"][0]["name"] == "models/workbench-ref"


def test_unknown_key_is_a_401_in_google_shape(stack):
    sdk = client(stack, "no-such-session")
    with pytest.raises(errors.ClientError) as failure:
        sdk.models.generate_content(model=MODEL, contents=ASK)
    assert failure.value.code == 401 and failure.value.status == "UNAUTHENTICATED"
    assert "session" in failure.value.message


def test_engine_refusal_is_an_error_chunk_inside_the_stream(stack):
    key = stack.session()
    forced = CONFIG.model_copy(
        update={"tool_config": types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["nope"]))}
    )  # fmt: skip
    sdk = client(stack, key)
    with pytest.raises(errors.ClientError) as failure:
        list(sdk.models.generate_content_stream(model=MODEL, contents=ASK, config=forced))
    assert failure.value.code == 400 and "nope" in failure.value.message
    assert len(stack.graph(key)) == 0


def test_stream_survives_keepalives_while_the_engine_works():
    # google-genai reads a non-`data:` line as JSON (an SSE comment raised
    # UnknownApiResponseError): the Google dialect's keepalive is a blank line.
    recording = Recording()
    with Stack(keepalive_s=0.0005) as eager, httpx.Client(transport=recording) as http:
        sdk = client(eager, eager.session(), http=http)
        with no_warnings():
            stream = sdk.models.generate_content_stream(model=MODEL, contents=ASK, config=CONFIG)
            chunks = list(stream)
    head, _, _ = bytes(recording.received).partition(b"data: ")
    assert head and set(head) == {ord("\n")}, bytes(recording.received[:80])
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    check_first_answer(types.Content(role="model", parts=parts))
