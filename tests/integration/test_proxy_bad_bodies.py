"""Malformed bodies on every dialect's model routes, over real HTTP against the reference engine:
JSON of the wrong types, huge numbers, nested nulls, NaN, nesting deeper than Python recurses.
Each is answered at once, in the dialect's own error shape when refused, and never with a 500
(the proxy's own failure)."""

import copy
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer

TOOL_SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
CHAT = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "README.md"},
    ],
    "tools": [{"type": "function", "function": {"name": "bash", "parameters": TOOL_SCHEMA}}],
    "tool_choice": "auto", "max_tokens": 4, "temperature": 0.5, "top_p": 1.0, "seed": 1,
    "stop": ["\n\n"], "logprobs": True, "top_logprobs": 1, "n": 1,
    "stream_options": {"include_usage": True}, "response_format": {"type": "text"},
}  # fmt: skip
RESPONSES = {
    "model": "m",
    "instructions": "Be brief.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "ls"}]},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{\"cmd\": \"ls\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "README.md"},
    ],
    "tools": [{"type": "function", "name": "bash", "parameters": TOOL_SCHEMA}],
    "tool_choice": "auto", "max_output_tokens": 4, "temperature": 0.5, "top_p": 1.0,
    "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}},
    "parallel_tool_calls": True,
}  # fmt: skip
ANTHROPIC = {
    "model": "m",
    "max_tokens": 4,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "ls", "signature": "s"},
            {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "README.md"}]}]},
    ],
    "tools": [{"name": "bash", "input_schema": TOOL_SCHEMA}],
    "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "temperature": 0.5, "top_p": 1.0, "top_k": 5, "stop_sequences": ["\n\n"],
}  # fmt: skip
GOOGLE = {
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "List the files."}]},
        {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"cmd": "ls"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"output": "README.md"}}}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "bash", "parametersJsonSchema": TOOL_SCHEMA}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {"maxOutputTokens": 4, "temperature": 0.5, "topP": 1.0, "topK": 5,
                         "stopSequences": ["\n\n"], "seed": 1,
                         "thinkingConfig": {"thinkingBudget": 16, "includeThoughts": True}},
}  # fmt: skip

# (route, a valid body to break, how the dialect words an error, the key header it reads)
ROUTES = {
    "chat": ("/v1/chat/completions", CHAT, "bearer"),
    "responses": ("/v1/responses", RESPONSES, "bearer"),
    "anthropic": ("/v1/messages", ANTHROPIC, "x-api-key"),
    "anthropic-count": ("/v1/messages/count_tokens", ANTHROPIC, "x-api-key"),
    "google": ("/v1beta/models/m:generateContent", GOOGLE, "x-goog-api-key"),
    "google-stream": ("/v1beta/models/m:streamGenerateContent?alt=sse", GOOGLE, "x-goog-api-key"),
    "google-count": ("/v1beta/models/m:countTokens", GOOGLE, "x-goog-api-key"),
}
STREAMS = {"chat", "responses", "anthropic"}

HUGE = [10**30, -(10**30), 2**63, 2**64, -(2**63) - 1, 1e308, -1e308, 5e-324]
nasty = st.sampled_from(
    [None, True, False, 0, -1, 1.5, "", "x", [], [None], [[None]], {}, {"a": None}, [{}],
     {"type": None}, {"text": None}, float("nan"), float("inf"), *HUGE]
) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)  # fmt: skip


def slots(body: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a body: where a value can be replaced."""
    found = []
    items = body.items() if isinstance(body, dict) else enumerate(body)
    for key, value in items:
        found.append((body, key))
        if isinstance(value, dict | list) and value:
            found.extend(slots(value))
    return found


@st.composite
def broken(draw, base: dict[str, Any], stream: bool) -> dict[str, Any]:
    """The base body with one to three values replaced by nasty ones."""
    body = copy.deepcopy(base)
    if stream:
        body["stream"] = draw(st.sampled_from([True, False, None, 1, "true", [True]]))
    for _ in range(draw(st.integers(1, 3))):
        places = slots(body)
        container, key = draw(st.sampled_from(places)) if places else (body, "x")
        container[key] = copy.deepcopy(draw(nasty))  # sampled values are shared objects
    return body


class Stack:
    """The reference engine and a capture proxy on real ports; `session()` is a new key."""

    def __init__(self, engine_url: str, url: str) -> None:
        self.engine_url, self.url = engine_url, url

    def session(self) -> str:
        created = httpx.post(f"{self.url}/sessions", json={"engine": {"url": self.engine_url}})
        assert created.status_code == 201, created.text
        return created.json()["session_id"]

    def turns(self, key: str) -> int:
        return httpx.get(f"{self.url}/sessions/{key}").json()["turns"]


@pytest.fixture(scope="module")
def stack():
    settings = CaptureSettings(max_tokens_ceiling=4, keepalive_s=0.05, upstream_timeout_s=30)
    with (
        EngineServer(EngineConfig()) as engine,
        CaptureServer(create_capture_app(settings)) as proxy,
    ):
        yield Stack(engine.url, proxy.url)


def send(url: str, key: str, name: str, body: Any) -> httpx.Response:
    """POST a body (a JSON value, or the raw text of one) to the route; a hang raises here."""
    path, _, header = ROUTES[name]
    headers = {"authorization": f"Bearer {key}"} if header == "bearer" else {header: key}
    # allow_nan: Python clients send NaN and Infinity unless told not to.
    content = body if isinstance(body, str) else json.dumps(body, allow_nan=True)
    return httpx.post(f"{url}{path}", content=content, headers=headers, timeout=60)


def assert_answered_in_shape(name: str, response: httpx.Response) -> None:
    assert response.status_code != 500, response.text
    assert "Traceback" not in response.text and "internal capture error" not in response.text
    if response.status_code >= 400:
        error = response.json()
        if name.startswith("anthropic"):
            assert error["type"] == "error" and error["error"]["message"], error
        elif name.startswith("google"):
            assert error["error"]["code"] == response.status_code, error
            assert error["error"]["message"] and error["error"]["status"], error
        else:
            assert error["error"]["message"], error


FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ROUTES))
def test_malformed_bodies_are_refused_in_the_dialects_shape_never_a_500_or_a_hang(stack, name):
    _, base, _ = ROUTES[name]
    key = stack.session()

    @FUZZ
    @given(broken(base, stream=name in STREAMS))
    def check(body):
        assert_answered_in_shape(name, send(stack.url, key, name, body))

    check()


def nested(depth: int) -> str:
    """A JSON schema nested `depth` objects deep, as raw text (json.dumps would recurse)."""
    return '{"type": "OBJECT", "items": ' * depth + "{}" + "}" * depth


HI = '{"role": "user", "parts": [{"text": "hi"}]}'
# Parsed, but deeper than a recursive translation (schema lowering, argument replay) can go;
# and, for chat, deeper than the JSON parser itself recurses.
DEEP = {
    "google": f'{{"contents": [{HI}], "tools": [{{"functionDeclarations": '
    f'[{{"name": "f", "parameters": {nested(1200)}}}]}}]}}',
    "google-stream": f'{{"contents": [{HI}], "tools": [{{"functionDeclarations": '
    f'[{{"name": "f", "parameters": {nested(1200)}}}]}}]}}',
    "anthropic": '{"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}, '
    '{"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", '
    f'"input": {{"a": {nested(1200)}}}}}]}}]}}',
    "chat": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("name", list(DEEP))
def test_json_nested_deeper_than_python_recurses_is_a_400_not_a_500(stack, name):
    key = stack.session()
    response = send(stack.url, key, name, DEEP[name])
    assert response.status_code == 400, response.text
    assert_answered_in_shape(name, response)
    assert "nests JSON too deeply" in response.text
    assert stack.turns(key) == 0


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("name", ["chat", "anthropic", "google"])
def test_nan_and_infinity_are_refused_as_not_json_before_the_engine(stack, name, constant):
    # Python's json takes them; forwarded, they would reach the engine as sampling parameters.
    key = stack.session()
    body = json.dumps(ROUTES[name][1] | {"temperature": 0.25}).replace("0.25", constant, 1)
    response = send(stack.url, key, name, body)
    assert response.status_code == 400, response.text
    assert_answered_in_shape(name, response)
    assert f"{constant.lstrip('-')} is not a JSON number" in response.text
    assert stack.turns(key) == 0
