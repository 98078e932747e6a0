"""The capture proxy over real HTTP, driven by the official openai SDK (sync and async), in front
of the reference engine: captured ids and logprobs, streaming, shaping, tiers, two engines."""

import json

import httpx
import openai
import pytest

from capture.engines import EngineRef
from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.sessions import SessionRegistry
from capture.settings import CaptureSettings
from tests.integration.dialect_fixtures import BASH_TOOL
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.script import ScriptPolicy

SCRIPT = ScriptPolicy(
    rules=[
        {"role": "tool", "match": "README", "reply": "The directory holds README.md."},
        {
            "role": "user",
            "match": "(?i)list the files",
            "reply": '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>',
        },
    ]
)
FIRST_CALL = {
    "model": "gpt-5",  # whatever the harness names; the proxy rewrites it
    "messages": [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "List the files, please."},
    ],
    "tools": [BASH_TOOL],
    "seed": 3,
}


@pytest.fixture(scope="module")
def engine():
    with EngineServer(EngineConfig(script=SCRIPT)) as server:
        yield server


@pytest.fixture(scope="module")
def proxy():
    settings = CaptureSettings(max_tokens_ceiling=64, keepalive_s=0.05)
    app = create_capture_app(settings)
    with CaptureServer(app) as server:
        server.registry = app.state.registry
        yield server


def new_session(proxy, engine_url, **engine):
    response = httpx.post(f"{proxy.url}/sessions", json={"engine": {"url": engine_url, **engine}})
    assert response.status_code == 201, response.text
    return response.json()


def document(proxy, session_id):
    response = httpx.get(f"{proxy.url}/sessions/{session_id}/document")
    assert response.status_code == 200, response.text
    return response.json()


def direct(engine, body):
    """The same request sent straight to the engine, asking for ids and logprobs."""
    upstream = {**body, "model": "workbench-ref", "stream": False}
    upstream.update(logprobs=True, top_logprobs=0, return_token_ids=True)
    upstream.pop("stream_options", None)
    response = httpx.post(f"{engine.url}/v1/chat/completions", json=upstream, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def assert_captured_as_engine_returned(turn, reply):
    choice = reply["choices"][0]
    assert turn["prompt_token_ids"] == reply["prompt_token_ids"]
    assert turn["completion_token_ids"] == choice["token_ids"]
    expected = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert turn["logprobs"] == pytest.approx(expected, abs=1e-6)


def second_call(first_message):
    """The agent's next request: history + the tool call it made + the tool's result."""
    call = first_message["tool_calls"][0]
    history = [
        *FIRST_CALL["messages"],
        {"role": "assistant", "content": first_message.get("content"), "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "README.md"},
    ]
    return {**FIRST_CALL, "messages": history}


def test_non_streaming_tool_loop_is_one_root_chain_with_the_engines_ids(engine, proxy):
    session = new_session(proxy, engine.url)
    assert session["tier"] == "tokens", session
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])

    first = client.chat.completions.create(**FIRST_CALL)
    message = first.choices[0].message
    assert first.model == "gpt-5"  # the client sees its own model name
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls[0].function.name == "bash"
    assert json.loads(message.tool_calls[0].function.arguments) == {"cmd": "ls"}
    assert first.choices[0].logprobs is None  # not asked for
    assert "token_ids" not in first.choices[0].model_extra
    assert "prompt_token_ids" not in first.model_extra

    body2 = second_call(message.model_dump(exclude_none=True))
    final = client.chat.completions.create(**body2)
    assert final.choices[0].message.content == "The directory holds README.md."

    doc = document(proxy, session["session_id"])
    turns = doc["turns"]
    assert len(turns) == 2
    assert turns[0]["parent"] is None and turns[1]["parent"] == turns[0]["id"]
    assert_captured_as_engine_returned(turns[0], direct(engine, FIRST_CALL))
    assert_captured_as_engine_returned(turns[1], direct(engine, body2))
    counters = httpx.get(f"{proxy.url}/sessions/{session['session_id']}").json()
    assert (counters["turns"], counters["roots"], counters["errors"]) == (2, 1, 0)
    # The manifest as sent upstream, kept once for both calls.
    assert doc["tools"] == [[BASH_TOOL]]
    assert [t["tools"] for t in turns] == [0, 0]


def test_streaming_tool_loop_gets_the_exact_chunk_grammar(engine, proxy):
    session = new_session(proxy, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    chunks = list(
        client.chat.completions.create(
            **FIRST_CALL, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert [(tc.index, tc.function.name) for tc in calls] == [(0, "bash")]
    assert calls[0].id and json.loads(calls[0].function.arguments) == {"cmd": "ls"}
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "tool_calls" and set(finish[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0

    reply = direct(engine, FIRST_CALL)
    assert chunks[-1].usage.completion_tokens == len(reply["choices"][0]["token_ids"])
    turns = document(proxy, session["session_id"])["turns"]
    assert len(turns) == 1 and turns[0]["finish_reason"] == "tool_calls"
    assert_captured_as_engine_returned(turns[0], reply)


async def test_async_client_streams_a_sampled_answer_and_it_is_captured(engine, proxy):
    session = new_session(proxy, engine.url)
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    body = {"model": "m", "messages": [{"role": "user", "content": "Say hi."}], "seed": 11}
    stream = await client.chat.completions.create(**body, max_tokens=6, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    await client.close()
    turns = document(proxy, session["session_id"])["turns"]
    reply = direct(engine, {**body, "max_tokens": 6})
    assert text == reply["choices"][0]["message"]["content"]
    assert_captured_as_engine_returned(turns[0], reply)


def test_client_that_asks_for_logprobs_gets_them(engine, proxy):
    session = new_session(proxy, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "seed": 5}
    reply = client.chat.completions.create(**body, max_tokens=3, logprobs=True, top_logprobs=2)
    entries = reply.choices[0].logprobs.content
    assert len(entries) == len(document(proxy, session["session_id"])["turns"][0]["logprobs"])
    assert all(len(e.top_logprobs) == 2 for e in entries)


def test_sampling_knobs_are_neutralised_with_an_info_finding(engine, proxy):
    session = new_session(proxy, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "seed": 5}
    client.chat.completions.create(**body, max_tokens=3, top_p=0.8)
    doc = document(proxy, session["session_id"])
    turn = doc["turns"][0]
    assert turn["sampling_requested"]["top_p"] == 0.8
    assert turn["sampling_applied"]["top_p"] == 1.0
    assert any(f["level"] == "INFO" and f["turn"] == turn["id"] for f in doc["findings"])
    # top_p=1.0 was what the engine saw: its logprobs equal an unmasked direct call's.
    assert_captured_as_engine_returned(turn, direct(engine, {**body, "max_tokens": 3}))


def test_empty_tools_array_is_dropped(engine, proxy):
    # The reference engine answers `tools: []` with 400, like vLLM >= PR #39780.
    bare = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    assert httpx.post(f"{engine.url}/v1/chat/completions", json={**bare, "tools": []}).is_error
    session = new_session(proxy, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    client.chat.completions.create(**bare, tools=[], tool_choice="auto")
    doc = document(proxy, session["session_id"])
    assert (doc["turns"][0]["has_tools"], doc["turns"][0]["tools"], doc["tools"]) == (
        False,
        None,
        [],
    )


def test_max_tokens_is_clamped_to_the_ceiling(engine, proxy):
    session = new_session(proxy, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
    body = {"model": "m", "messages": [{"role": "user", "content": "Write a long story."}]}
    reply = client.chat.completions.create(**body, max_tokens=100_000, seed=2)
    assert reply.usage.completion_tokens <= 64  # the proxy's ceiling
    turn = document(proxy, session["session_id"])["turns"][0]
    assert turn["sampling_requested"]["max_tokens"] == 100_000
    assert turn["sampling_applied"]["max_tokens"] == 64


@pytest.mark.parametrize(
    ("config", "tier", "reason"),
    [
        (EngineConfig(), "tokens", None),
        (EngineConfig(logprobs_mode="raw_logprobs"), "logprobs", "--logprobs-mode"),
        (EngineConfig(token_ids=False), "logprobs", "token ids"),
    ],
    ids=["processed", "raw", "no-token-ids"],
)
def test_tier_is_measured(config, tier, reason):
    # A fresh proxy: probes are cached per engine URL, and a stopped engine's port may be reused.
    with EngineServer(config) as engine, CaptureServer(create_capture_app()) as proxy:
        session = new_session(proxy, engine.url)
    assert session["tier"] == tier
    assert (session["tier_reason"] is None) if reason is None else reason in session["tier_reason"]
    mode = {"tokens": "processed_logprobs", "logprobs": "raw_logprobs"}
    if config.token_ids:
        assert session["engine"]["logprobs_mode"] == mode[tier]


def test_unreachable_engine_is_tier_text_with_a_reason(proxy):
    session = new_session(proxy, "http://127.0.0.1:9/v1")
    assert session["tier"] == "text"
    assert "unreachable" in session["tier_reason"]


def test_two_engines_in_one_server_each_session_reaches_its_own(proxy):
    with (
        EngineServer(EngineConfig(served_model_name="alpha", script=SCRIPT)) as alpha,
        EngineServer(EngineConfig(served_model_name="beta", logprobs_mode="raw_logprobs")) as beta,
    ):
        a, b = new_session(proxy, alpha.url), new_session(proxy, beta.url, model="beta")
        assert (a["engine"]["model"], a["tier"]) == ("alpha", "tokens")
        assert (b["engine"]["model"], b["tier"]) == ("beta", "logprobs")
        for session in (a, b, a, b):
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=session["session_id"])
            reply = client.chat.completions.create(**FIRST_CALL, max_tokens=32)
            assert reply.model == "gpt-5"
        turns_a = document(proxy, a["session_id"])["turns"]
        turns_b = document(proxy, b["session_id"])["turns"]
    assert len(turns_a) == len(turns_b) == 2
    # Each engine accepts only its own served name (404 otherwise), and only alpha runs the
    # script: its tool call proves the calls of session a reached alpha.
    assert turns_a[0]["tool_calls"][0]["function"]["name"] == "bash"
    assert not turns_b[0]["tool_calls"]


async def test_registry_is_shared_in_process_with_the_app(engine):
    """The workbench creates sessions on its own loop and thread; the server sees them."""
    registry = SessionRegistry()
    app = create_capture_app(CaptureSettings(), registry)
    with CaptureServer(app) as server:
        session = await registry.create(EngineRef(url=engine.url))
        registry.set_phase(session.id, "agent")
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=session.id)
        await client.chat.completions.create(**FIRST_CALL)
        await client.close()
        counters = httpx.get(f"{server.url}/sessions/{session.id}").json()
    assert (counters["turns"], counters["phase"], counters["tier"]) == (1, "agent", "tokens")
    assert len(session.graph) == 1


def test_mounted_at_capture_serves_the_same_routes(engine):
    from fastapi import FastAPI

    parent = FastAPI()
    parent.mount("/capture", create_capture_app(CaptureSettings()))
    with CaptureServer(parent) as server:
        base = f"{server.url}/capture"
        created = httpx.post(f"{base}/sessions", json={"engine": {"url": engine.url}})
        key = created.json()["session_id"]
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=key)
        reply = client.chat.completions.create(**FIRST_CALL)
        assert reply.choices[0].message.tool_calls[0].function.name == "bash"
        assert httpx.get(f"{base}/sessions/{key}").json()["turns"] == 1
        assert httpx.get(f"{base}/").json()["service"].endswith("capture proxy")


def test_turn_is_committed_before_the_client_sees_the_answer(engine):
    registry = SessionRegistry()
    with CaptureServer(create_capture_app(CaptureSettings(), registry)) as server:
        key = new_session(server, engine.url)["session_id"]
        session = registry.get(key)
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key)
        client.chat.completions.create(**FIRST_CALL)
        assert len(session.graph) == 1  # read in-process, no second request in between
        stream = client.chat.completions.create(**FIRST_CALL, stream=True)
        first_chunk = next(iter(stream))
        assert first_chunk.choices[0].delta.role == "assistant"
        assert len(session.graph) == 2  # even the role chunk comes after the commit
        stream.close()
