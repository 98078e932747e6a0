"""The reference engine through the official openai SDK: vLLM's fields, shapes and errors."""

import json
import math
import subprocess
import sys
import time

import httpx
import openai
import pytest

from tests.integration.dialect_fixtures import BASH_TOOL
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.script import ScriptPolicy, ScriptRule

TOOLS = [BASH_TOOL]
IDS = {"return_token_ids": True}
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say something about JSON."},
]
SCRIPT = ScriptPolicy(
    rules=[
        ScriptRule(
            role="tool",
            match=r"hello\.txt",
            reply="<think>\nThe file exists.\n</think>\n\nThe file is there: hello.txt.",
        ),
        ScriptRule(
            role="user",
            match="(?i)list the files",
            assistant_turns=0,
            reply='I will look.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>',
        ),
    ],
    default="I cannot help with that.",
)


def _client(server: EngineServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def engine():
    with EngineServer(EngineConfig(max_logprobs=-1)) as server:
        yield server


@pytest.fixture(scope="module")
def raw_engine():
    with EngineServer(EngineConfig(logprobs_mode="raw_logprobs", max_logprobs=-1)) as server:
        yield server


@pytest.fixture(scope="module")
def scripted():
    with EngineServer(EngineConfig(script=SCRIPT, return_tokens_as_token_ids=True)) as server:
        yield server


@pytest.fixture(scope="module")
def client(engine):
    return _client(engine)


def _chat(client, **kw):
    kw.setdefault("model", "workbench-ref")
    kw.setdefault("messages", MESSAGES)
    return client.chat.completions.create(**kw)


def test_chat_returns_prompt_ids_token_ids_and_aligned_logprobs(client):
    resp = _chat(client, logprobs=True, top_logprobs=3, max_tokens=12, seed=1, extra_body=IDS)
    choice = resp.choices[0]
    prompt_ids = resp.model_extra["prompt_token_ids"]
    token_ids = choice.model_extra["token_ids"]
    assert all(isinstance(i, int) for i in prompt_ids + token_ids)
    assert len(prompt_ids) == resp.usage.prompt_tokens
    assert len(token_ids) == len(choice.logprobs.content) == resp.usage.completion_tokens
    for entry in choice.logprobs.content:
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token  # engine order: chosen token first
        assert entry.top_logprobs[0].logprob == entry.logprob
        assert entry.logprob <= 0
    assert choice.finish_reason in ("stop", "length")


def test_chat_without_return_token_ids_has_no_ids(client):
    resp = _chat(client, max_tokens=3)
    assert resp.model_extra["prompt_token_ids"] is None
    assert resp.choices[0].model_extra["token_ids"] is None
    assert resp.choices[0].logprobs is None


def test_streaming_sends_prompt_ids_on_the_first_chunk_only(client):
    kw = {"logprobs": True, "max_tokens": 10, "seed": 7, "extra_body": IDS}
    whole = _chat(client, **kw)
    chunks = list(_chat(client, stream=True, stream_options={"include_usage": True}, **kw))
    first, body, usage = chunks[0], chunks[1:-1], chunks[-1]
    assert first.choices[0].delta.role == "assistant"
    assert first.model_extra["prompt_token_ids"] == whole.model_extra["prompt_token_ids"]
    assert "token_ids" not in first.choices[0].model_extra
    assert all("prompt_token_ids" not in c.model_extra for c in body)
    ids = [i for c in body for i in c.choices[0].model_extra["token_ids"]]
    lps = [e.logprob for c in body for e in c.choices[0].logprobs.content]
    assert ids == whole.choices[0].model_extra["token_ids"]
    assert lps == [e.logprob for e in whole.choices[0].logprobs.content]
    assert "".join(c.choices[0].delta.content or "" for c in body) == (
        whole.choices[0].message.content or ""
    )
    assert body[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert usage.choices == [] and usage.usage.completion_tokens == len(ids)


def test_token_id_strings_per_request_and_by_server_flag(client, scripted):
    resp = _chat(
        client,
        logprobs=True,
        top_logprobs=2,
        max_tokens=5,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
    )
    choice = resp.choices[0]
    for tid, entry in zip(choice.model_extra["token_ids"], choice.logprobs.content, strict=True):
        assert entry.token == f"token_id:{tid}"
        assert all(t.token.startswith("token_id:") for t in entry.top_logprobs)
        assert entry.top_logprobs[0].bytes == list(f"token_id:{tid}".encode())
    flagged = _client(scripted)
    resp = _chat(flagged, logprobs=True, max_tokens=4, extra_body=IDS)
    ids = resp.choices[0].model_extra["token_ids"]
    assert [e.token for e in resp.choices[0].logprobs.content] == [f"token_id:{i}" for i in ids]


def test_tokenize_messages_equals_chat_prompt_ids(client, engine):
    resp = _chat(client, tools=TOOLS, max_tokens=2, extra_body=IDS)
    tok = httpx.post(engine.url + "/tokenize", json={"messages": MESSAGES, "tools": TOOLS}).json()
    assert tok["tokens"] == resp.model_extra["prompt_token_ids"]
    assert tok["count"] == len(tok["tokens"]) and tok["max_model_len"] == 32768
    plain = httpx.post(engine.url + "/tokenize", json={"prompt": "Hello world"}).json()
    back = httpx.post(engine.url + "/detokenize", json={"tokens": plain["tokens"]}).json()
    assert back == {"prompt": "Hello world"}


def test_same_seed_same_output_other_seed_differs(client):
    kw = {"max_tokens": 16, "logprobs": True, "extra_body": IDS, "temperature": 1.0}
    a = _chat(client, seed=123, **kw).choices[0].model_extra["token_ids"]
    b = _chat(client, seed=123, **kw).choices[0].model_extra["token_ids"]
    c = _chat(client, seed=124, **kw).choices[0].model_extra["token_ids"]
    assert a == b
    assert a != c


def test_negative_seed_is_accepted_not_a_500(client):
    # vLLM takes any int seed; numpy's generator raised on negative ones (a 500).
    kw = {"max_tokens": 8, "extra_body": IDS, "temperature": 1.0}
    a = _chat(client, seed=-1, **kw).choices[0].model_extra["token_ids"]
    b = _chat(client, seed=-1, **kw).choices[0].model_extra["token_ids"]
    assert a and a == b


def _top2_gap(client, temperature):
    resp = _chat(
        client, logprobs=True, top_logprobs=3, max_tokens=1, temperature=temperature, seed=0
    )
    values = sorted(
        {t.token: t.logprob for t in resp.choices[0].logprobs.content[0].top_logprobs}.values()
    )
    return values[-1] - values[-2]


def test_processed_logprobs_scale_with_temperature_raw_do_not(client, raw_engine):
    gap1, gap2 = _top2_gap(client, 1.0), _top2_gap(client, 2.0)
    assert gap1 > 0.05
    assert gap2 == pytest.approx(gap1 / 2, rel=1e-6)
    raw = _client(raw_engine)
    assert _top2_gap(raw, 2.0) == pytest.approx(_top2_gap(raw, 1.0), rel=1e-9)
    assert _top2_gap(raw, 1.0) == pytest.approx(gap1, rel=1e-6)  # same model, T=1, no masks


def test_top_p_processed_logprobs_renormalise_over_the_kept_set(client):
    resp = _chat(client, logprobs=True, top_logprobs=-1, max_tokens=1, top_p=0.6, seed=3)
    entries = resp.choices[0].logprobs.content[0].top_logprobs
    kept = [e.logprob for e in entries if e.logprob > -9999.0]
    assert 1 <= len(kept) < len(entries)
    assert math.fsum(math.exp(v) for v in kept) == pytest.approx(1.0, abs=1e-9)
    assert len({e.token for e in entries}) == len(entries)  # the whole vocabulary, once each


def test_scripted_two_turn_tool_conversation_is_prefix_stable(scripted):
    client = _client(scripted)
    models = client.models.list()
    assert models.data[0].model_extra["policy"] == "scripted"
    history = [{"role": "user", "content": "Please list the files here."}]
    first = _chat(client, messages=history, tools=TOOLS, logprobs=True, extra_body=IDS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "I will look."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("chatcmpl-tool-")
    assert call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"cmd": "ls"}
    assert len(choice.logprobs.content) == len(choice.model_extra["token_ids"])
    assert all(e.logprob > -9999.0 for e in choice.logprobs.content)
    history += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "hello.txt\n"},
    ]
    second = _chat(client, messages=history, tools=TOOLS, extra_body=IDS)
    prefix = first.model_extra["prompt_token_ids"] + choice.model_extra["token_ids"]
    assert second.model_extra["prompt_token_ids"][: len(prefix)] == prefix
    answer = second.choices[0]
    assert answer.finish_reason == "stop"
    assert answer.message.content == "The file is there: hello.txt."
    assert answer.message.model_extra["reasoning"] == "The file exists."
    # vLLM counts the tokens between <think> and </think>
    inside = httpx.post(scripted.url + "/tokenize", json={"prompt": "\nThe file exists.\n"})
    assert second.usage.completion_tokens_details.reasoning_tokens == inside.json()["count"]
    third = _chat(client, messages=[{"role": "user", "content": "what?"}])
    assert third.choices[0].message.content == "I cannot help with that."


def test_scripted_streaming_tool_call_delta(scripted):
    client = _client(scripted)
    history = [{"role": "user", "content": "list the files"}]
    chunks = list(_chat(client, messages=history, tools=TOOLS, stream=True, extra_body=IDS))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "bash"
    assert json.loads(calls[0].function.arguments) == {"cmd": "ls"}
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "I will look."
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_no_token_ids_engine_ignores_return_token_ids():
    with EngineServer(EngineConfig(token_ids=False)) as server:
        client = _client(server)
        resp = _chat(
            client,
            logprobs=True,
            max_tokens=3,
            extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
        )
        assert resp.model_extra.get("prompt_token_ids") is None
        assert resp.choices[0].model_extra.get("token_ids") is None
        assert not any(e.token.startswith("token_id:") for e in resp.choices[0].logprobs.content)


def test_completions_accept_token_id_prompts(client, engine):
    ids = httpx.post(engine.url + "/tokenize", json={"prompt": "def main():"}).json()["tokens"]
    resp = client.completions.create(
        model="workbench-ref",
        prompt=ids,
        max_tokens=4,
        logprobs=2,
        seed=5,
        extra_body={**IDS, "ignore_eos": True},
    )
    choice = resp.choices[0]
    assert choice.model_extra["prompt_token_ids"] == ids
    assert len(choice.model_extra["token_ids"]) == len(choice.logprobs.tokens) == 4
    assert choice.finish_reason == "length"
    assert all(1 <= len(d) <= 3 for d in choice.logprobs.top_logprobs)
    text = client.completions.create(
        model="workbench-ref",
        prompt="def main():",
        max_tokens=4,
        seed=5,
        extra_body={"ignore_eos": True},
    )
    assert text.choices[0].text == choice.text


def test_stop_string_truncates_text_but_keeps_ids(client):
    probe = _chat(client, max_tokens=12, seed=11, extra_body=IDS).choices[0]
    text = probe.message.content
    assert len(text) > 4
    stop = text[2:4]
    cut = _chat(client, max_tokens=12, seed=11, stop=[stop], extra_body=IDS).choices[0]
    assert cut.finish_reason == "stop" and cut.model_extra["stop_reason"] == stop
    assert cut.message.content == text[: text.index(stop)]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"messages": MESSAGES, "tools": []}, 400, "tools"),
        ({"messages": MESSAGES, "model": "gpt-5"}, 404, "model"),
        ({"messages": MESSAGES, "top_logprobs": 3}, 400, "top_logprobs"),
        ({"messages": MESSAGES, "n": 2}, 400, "n"),
        ({"messages": MESSAGES, "temperature": -1}, 400, "temperature"),
        ({"messages": "hello"}, 400, "messages"),
        ({"messages": MESSAGES, "tool_choice": "auto"}, 400, "tool_choice"),
        (  # a named tool_choice whose `function` is not an object (was a 500)
            {"messages": MESSAGES, "tools": TOOLS, "tool_choice": {"function": "bash"}},
            400,
            "tool_choice",
        ),
        ({"messages": MESSAGES, "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ],
)
def test_bad_requests_get_vllm_error_bodies(engine, body, status, param):
    resp = httpx.post(engine.url + "/v1/chat/completions", json=body)
    assert resp.status_code == status
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status and error["param"] == param and error["message"]


def test_empty_tools_message_is_vllms(client):
    with pytest.raises(openai.BadRequestError) as info:
        _chat(client, tools=[])
    assert info.value.body["message"] == (
        "`tools` must not be an empty array. Either provide at least one tool or omit the field "
        "entirely. (parameter=tools)"
    )
    with pytest.raises(openai.NotFoundError) as info:
        _chat(client, model="claude-sonnet-4-5")
    assert "`claude-sonnet-4-5` does not exist" in info.value.body["message"]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b""])
def test_malformed_json_is_400_not_422(engine, raw):
    resp = httpx.post(
        engine.url + "/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "BadRequestError"


def test_models_health_version(engine):
    models = httpx.get(engine.url + "/v1/models").json()
    card = models["data"][0]
    assert card["id"] == "workbench-ref" and card["max_model_len"] == 32768
    assert card["policy"] == "sampled"
    assert httpx.get(engine.url + "/health").status_code == 200
    assert "version" in httpx.get(engine.url + "/version").json()


def test_empty_model_is_accepted(engine):
    resp = httpx.post(
        engine.url + "/v1/chat/completions",
        json={"model": "", "messages": MESSAGES, "max_tokens": 2},
    )
    assert resp.status_code == 200


@pytest.mark.slow
def test_module_entry_point_serves_the_openai_sdk(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.engine", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "engine did not come up"
            time.sleep(0.1)
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        resp = _chat(client, logprobs=True, max_tokens=5, extra_body=IDS)
        assert resp.model_extra["prompt_token_ids"]
        assert len(resp.choices[0].model_extra["token_ids"]) == len(
            resp.choices[0].logprobs.content
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_logit_bias_min_tokens_and_request_id(client, engine):
    forced = _chat(
        client,
        max_tokens=3,
        logit_bias={"65": 100},
        temperature=0.0,
        extra_body={**IDS, "min_tokens": 3},
        extra_headers={"X-Request-Id": "abc123"},
    )
    assert forced.id == "chatcmpl-abc123"
    assert forced.choices[0].model_extra["token_ids"] == [65, 65, 65]
    resp = httpx.post(
        engine.url + "/v1/chat/completions",
        json={"messages": MESSAGES, "logit_bias": {"999999": 1}},
    )
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "logit_bias"


def test_completions_stream_prompt_ids_on_first_chunk(client):
    kw = {"model": "workbench-ref", "prompt": "ls -la", "max_tokens": 6, "seed": 2, "logprobs": 1}
    whole = client.completions.create(extra_body={**IDS, "ignore_eos": True}, **kw)
    chunks = list(
        client.completions.create(
            stream=True,
            stream_options={"include_usage": True},
            extra_body={**IDS, "ignore_eos": True},
            **kw,
        )
    )
    body, usage = chunks[:-1], chunks[-1]
    assert (
        body[0].choices[0].model_extra["prompt_token_ids"]
        == (whole.choices[0].model_extra["prompt_token_ids"])
    )
    assert all("prompt_token_ids" not in c.choices[0].model_extra for c in body[1:])
    ids = [i for c in body for i in c.choices[0].model_extra["token_ids"]]
    assert ids == whole.choices[0].model_extra["token_ids"]
    assert "".join(c.choices[0].text for c in body) == whole.choices[0].text
    assert usage.usage.completion_tokens == 6


def test_include_reasoning_false_nulls_ids_and_logprobs_like_vllm(scripted):
    client = _client(scripted)
    history = [{"role": "tool", "content": "hello.txt"}]
    resp = _chat(
        client, messages=history, logprobs=True, extra_body={**IDS, "include_reasoning": False}
    )
    choice = resp.choices[0]
    assert choice.message.content == "The file is there: hello.txt."
    assert choice.message.model_extra["reasoning"] is None
    assert choice.logprobs is None and choice.model_extra["token_ids"] is None
    assert resp.model_extra["prompt_token_ids"]  # the prompt ids are not suppressed


def test_api_key_guards_v1_routes_only():
    with EngineServer(EngineConfig(api_key="sekrit")) as server:
        denied = httpx.post(server.url + "/v1/chat/completions", json={"messages": MESSAGES})
        assert denied.status_code == 401 and denied.json() == {"error": "Unauthorized"}
        assert httpx.post(server.url + "/tokenize", json={"prompt": "hi"}).status_code == 200
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sekrit", max_retries=0)
        assert _chat(client, max_tokens=2).choices[0].finish_reason in ("stop", "length")
