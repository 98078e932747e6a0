"""The Anthropic dialect through the official anthropic SDK, against the capture proxy on a real
port in front of the scripted reference engine: create and stream with tools, tool_use ->
tool_result round trips as one chain, count_tokens (never a turn), models list and retrieve
(`GET /v1/models` is chat's path too), error shapes."""

import anthropic
import httpx
import pytest

from capture.dialects.answer import as_javascript
from capture.dialects.anthropic import AnthropicDialect
from capture.proxy import create_capture_app
from capture.serving import CaptureServer
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

PATH = "/v1/messages"
TOOLS = [{"name": "bash", "description": "Run a shell command.", "input_schema": BASH_SCHEMA}]
# Claude Code's first system block: a per-request hash the proxy must strip.
SYSTEM_BLOCKS = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.3; cch=5f0e2;"},
    {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}},
]


def client(stack: Stack, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key=key, max_retries=0)


def request(messages: list, **extra) -> dict:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 4096, "system": SYSTEM_BLOCKS}
    return body | {"messages": messages, "tools": TOOLS} | extra


def check_first_answer(message) -> None:
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool_use = message.content
    assert thinking.thinking == THOUGHT and thinking.signature
    assert text.text == SAYS
    assert tool_use.name == "bash" and tool_use.input == COMMAND
    assert message.stop_reason == "tool_use" and message.model == "claude-sonnet-4-6"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def run_conversation(stack: Stack, *, stream: bool) -> None:
    key = stack.session()
    sdk = client(stack, key)
    history: list = [{"role": "user", "content": ASK}]
    bodies = []
    for turn in range(3):
        body = request(list(history))
        bodies.append(body)
        with no_warnings():
            if stream:
                with sdk.messages.stream(**body) as events:
                    kinds = [event.type for event in events]
                    message = events.get_final_message()
                assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
            else:
                message = sdk.messages.create(**body)
        # Replay exactly what came back, as Claude Code does.
        replay = {
            "role": "assistant",
            "content": [b.model_dump(exclude_none=True) for b in message.content],
        }
        if turn == 0:
            check_first_answer(message)
            result = {
                "type": "tool_result",
                "tool_use_id": message.content[-1].id,
                "content": TOOL_OUTPUT,
            }
            history += [replay, {"role": "user", "content": [result]}]
        elif turn == 1:
            assert [b.text for b in message.content] == [
                REPORT
            ] and message.stop_reason == "end_turn"
            history += [replay, {"role": "user", "content": [{"type": "text", "text": BYE}]}]
        else:
            assert [b.text for b in message.content] == [FAREWELL]
    stack.assert_one_chain(key, "anthropic", 3)
    assert stack.graph(key).turn(0).messages[0] == {"role": "system", "content": SYSTEM}
    for index, body in enumerate(bodies):
        stack.assert_captured_as_engine_returned(key, AnthropicDialect(), PATH, body, index)


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_three_turn_tool_loop_is_one_chain_with_the_engines_ids(stack, stream):
    run_conversation(stack, stream=stream)


def test_stream_deltas_carry_thinking_text_and_tool_input(stack):
    key = stack.session()
    with (
        no_warnings(),
        client(stack, key).messages.stream(**request([{"role": "user", "content": ASK}])) as events,
    ):
        deltas = [event.delta.type for event in events if event.type == "content_block_delta"]
        message = events.get_final_message()
    assert deltas == ["thinking_delta", "signature_delta", "text_delta", "input_json_delta"]
    check_first_answer(message)


def test_count_tokens_uses_the_engines_tokenizer_and_is_never_a_turn(stack):
    key = stack.session()
    body = {"model": "claude-sonnet-4-6", "system": SYSTEM_BLOCKS, "tools": TOOLS,
            "messages": [{"role": "user", "content": ASK}]}  # fmt: skip
    # The beta client posts to /v1/messages/count_tokens?beta=true, as Claude Code does.
    counted = client(stack, key).beta.messages.count_tokens(**body)
    chat = (
        AnthropicDialect()
        .to_chat({**body, "max_tokens": 1}, AnthropicDialect().match("POST", PATH))
        .body
    )
    assert counted.input_tokens == stack.tokenize(chat) > 0
    shorter = client(stack, key).messages.count_tokens(**{**body, "tools": []})
    assert 0 < shorter.input_tokens < counted.input_tokens
    assert len(stack.graph(key)) == 0


@pytest.mark.parametrize("auth", ["api_key", "auth_token"])
def test_models_list_and_retrieve_answer_in_anthropic_shape_not_openais(stack, auth):
    # `GET /v1/models` is chat's path too: the SDK's anthropic-version header (and x-api-key)
    # must win it for the Anthropic dialect, whichever credential the client sends.
    key = stack.session()
    sdk = anthropic.Anthropic(base_url=stack.url, max_retries=0, **{auth: key})
    with no_warnings():
        page = sdk.models.list()
        listed = [model for model in page]
        one = sdk.models.retrieve("claude-sonnet-4-6")
    assert [(m.type, m.id, m.display_name) for m in listed] == [
        ("model", "workbench-ref", "workbench-ref")
    ]
    assert page.has_more is False and page.first_id == page.last_id == "workbench-ref"
    assert listed[0].created_at.tzinfo is not None
    assert (one.type, one.id) == ("model", "claude-sonnet-4-6")
    assert len(stack.graph(key)) == 0


def test_models_list_without_anthropic_headers_stays_openais(stack):
    key = stack.session()
    listed = httpx.get(f"{stack.url}/v1/models", headers={"authorization": f"Bearer {key}"})
    assert listed.status_code == 200 and listed.json()["object"] == "list", listed.text


def test_unknown_key_is_a_401_in_anthropic_shape(stack):
    with pytest.raises(anthropic.AuthenticationError) as failure:
        client(stack, "no-such-session").messages.create(
            **request([{"role": "user", "content": ASK}])
        )
    assert failure.value.body["type"] == "error"
    assert failure.value.body["error"]["type"] == "authentication_error"
    assert "session" in failure.value.body["error"]["message"]


def test_engine_refusal_is_an_error_event_inside_the_stream(stack):
    key = stack.session()
    body = request([{"role": "user", "content": ASK}], tool_choice={"type": "tool", "name": "nope"})
    stream = client(stack, key).messages.stream(**body)
    with pytest.raises(anthropic.APIStatusError) as failure, stream as events:
        list(events)
    assert failure.value.body["type"] == "error"
    assert failure.value.body["error"]["type"] == "invalid_request_error"
    assert "nope" in failure.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError):  # the same refusal without streaming
        client(stack, key).messages.create(**body)
    assert len(stack.graph(key)) == 0


def javascript_tool_loop(stack: Stack, key: str, second_url: str) -> dict:
    """Claude Code's two calls (it is JavaScript: `30.0` in tool input comes back as `30`)."""
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    body = request([{"role": "user", "content": WAIT}])
    first = httpx.post(f"{stack.url}/v1/messages?beta=true", json=body, headers=headers)
    assert first.status_code == 200, first.text
    content = as_javascript(first.json()["content"])
    assert content[-1]["input"] == {"cmd": "sleep 1", "timeout": 30}
    result = {"type": "tool_result", "tool_use_id": content[-1]["id"], "content": "slept"}
    history = [*body["messages"], {"role": "assistant", "content": content}]
    second = httpx.post(
        f"{second_url}/v1/messages?beta=true",
        json=request([*history, {"role": "user", "content": [result]}]),
        headers=headers,
    )
    assert second.status_code == 200, second.text
    assert second.json()["content"] == [{"type": "text", "text": WAITED}]
    return stack.graph(key).turn(1).messages[2]


def test_javascript_replay_of_tool_input_is_one_chain(stack):
    key = stack.session()
    replayed = javascript_tool_loop(stack, key, stack.url)
    assert replayed["tool_calls"][0]["function"]["arguments"] == SLEEP_ARGUMENTS
    stack.assert_one_chain(key, "anthropic", 2)


def test_without_the_replay_memory_the_same_replay_would_split_the_conversation(stack):
    # A second proxy on the same sessions whose dialect never saw the first answer: it can only
    # re-serialise the echoed object, `30` instead of the engine's `30.0`, and the prompt ids of
    # the second call no longer extend the first call's. This is what the memory prevents.
    app = create_capture_app(stack.settings, stack.registry, dialects=(AnthropicDialect(),))
    with CaptureServer(app) as forgetful:
        key = stack.session()
        replayed = javascript_tool_loop(stack, key, forgetful.url)
    assert replayed["tool_calls"][0]["function"]["arguments"] == '{"cmd": "sleep 1", "timeout": 30}'
    assert stack.graph(key).counters()["roots"] == 2


def test_two_default_apps_in_one_process_never_share_replay_memory(stack):
    # The stack's app answers the first call; a second app with the default dialects, on the
    # same sessions, must not recall that answer (module-level dialects would have shared it).
    app = create_capture_app(stack.settings, stack.registry)
    assert not {id(d) for d in app.state.dialects} & {
        id(d) for d in create_capture_app().state.dialects
    }
    with CaptureServer(app) as fresh:
        key = stack.session()
        replayed = javascript_tool_loop(stack, key, fresh.url)
    assert replayed["tool_calls"][0]["function"]["arguments"] == '{"cmd": "sleep 1", "timeout": 30}'
    assert stack.graph(key).counters()["roots"] == 2
