"""Every refusal of the capture proxy, over real HTTP: status, body shape, what is recorded."""

import httpx
import openai
import pytest

from capture import sse
from capture.dialects.chat import ChatDialect
from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer

HI = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def engine():
    with EngineServer(EngineConfig()) as server:
        yield server


@pytest.fixture(scope="module")
def proxy():
    settings = CaptureSettings(max_body_bytes=4096, keepalive_s=0.05)
    with CaptureServer(create_capture_app(settings)) as server:
        yield server


def session_on(proxy_url, engine_url, headers=None):
    response = httpx.post(
        f"{proxy_url}/sessions", json={"engine": {"url": engine_url}}, headers=headers
    )
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def counters(proxy_url, session_id):
    return httpx.get(f"{proxy_url}/sessions/{session_id}").json()


def chat(proxy_url, key=None, **kwargs):
    headers = {"authorization": f"Bearer {key}"} if key else {}
    headers.update(kwargs.pop("headers", {}))
    kwargs.setdefault("json", HI)
    return httpx.post(f"{proxy_url}/v1/chat/completions", headers=headers, **kwargs)


def assert_openai_error(response, status):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == status
    assert "Traceback" not in response.text
    return error


@pytest.mark.parametrize("key", [None, "s-not-a-session"], ids=["missing", "unknown"])
def test_unknown_or_missing_key_is_401_in_openai_shape(proxy, key):
    error = assert_openai_error(chat(proxy.url, key), 401)
    assert "POST /sessions" in error["message"]
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key or "x", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(**HI, stream=True)


def test_malformed_bodies_are_400(proxy, engine):
    key = session_on(proxy.url, engine.url)
    assert "JSON" in assert_openai_error(chat(proxy.url, key, content=b"{not json"), 400)["message"]
    assert_openai_error(chat(proxy.url, key, json=[1, 2]), 400)
    message = assert_openai_error(chat(proxy.url, key, json={"model": "m"}), 400)["message"]
    assert "messages" in message
    assert_openai_error(chat(proxy.url, key, json={"messages": [{"content": "no role"}]}), 400)
    assert counters(proxy.url, key)["turns"] == 0


def test_body_over_the_limit_is_413(proxy, engine):
    key = session_on(proxy.url, engine.url)
    big = {**HI, "messages": [{"role": "user", "content": "x" * 5000}]}
    error = assert_openai_error(chat(proxy.url, key, json=big), 413)
    assert "max_body_bytes" in error["message"]


def test_engine_4xx_is_passed_through_in_openai_shape(proxy, engine):
    key = session_on(proxy.url, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**HI, temperature=-1)
    assert "temperature" in caught.value.message
    state = counters(proxy.url, key)
    assert state["turns"] == 0 and state["errors"] == 1


def test_engine_down_is_502_and_recorded(proxy):
    with EngineServer(EngineConfig()) as doomed:
        key = session_on(proxy.url, doomed.url)
    error = assert_openai_error(chat(proxy.url, key), 502)
    assert "unreachable" in error["message"]
    state = counters(proxy.url, key)
    assert state["errors"] == 1 and "unreachable" in state["last_error"]


def test_engine_down_while_streaming_is_an_in_stream_error_event(proxy):
    with EngineServer(EngineConfig()) as doomed:
        key = session_on(proxy.url, doomed.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(**HI, stream=True))
    assert "unreachable" in caught.value.message
    raw = chat(proxy.url, key, json={**HI, "stream": True})
    assert raw.status_code == 200 and raw.text.endswith("data: [DONE]\n\n")
    assert counters(proxy.url, key)["errors"] == 2


def test_engine_timeout_is_504(engine):
    settings = CaptureSettings(upstream_timeout_s=0.001)
    with CaptureServer(create_capture_app(settings)) as slow:
        key = session_on(slow.url, engine.url)
        error = assert_openai_error(chat(slow.url, key), 504)
        assert "timed out" in error["message"]
        assert counters(slow.url, key)["errors"] == 1


def test_retried_identical_body_is_replayed_not_recorded_twice(proxy, engine):
    key = session_on(proxy.url, engine.url)
    body = {**HI, "seed": 9}
    first = chat(proxy.url, key, json=body, headers={"x-stainless-retry-count": "0"})
    retry = chat(proxy.url, key, json=body, headers={"x-stainless-retry-count": "1"})
    assert first.json() == retry.json()
    assert counters(proxy.url, key)["turns"] == 1
    # Without the retry header an identical body is a deliberate resample: a new turn.
    chat(proxy.url, key, json=body)
    assert counters(proxy.url, key)["turns"] == 2


def test_unknown_route_is_404_and_root_is_answered(proxy):
    assert_openai_error(httpx.post(f"{proxy.url}/v1/embeddings", json={}), 404)
    assert httpx.get(f"{proxy.url}/").json()["dialects"][0] == "chat"
    head = httpx.head(f"{proxy.url}/")
    assert head.status_code == 200 and head.content == b""


def test_models_route_needs_a_session_and_lists_the_served_model(proxy, engine):
    assert_openai_error(httpx.get(f"{proxy.url}/v1/models"), 401)
    key = session_on(proxy.url, engine.url)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key)
    assert [m.id for m in client.models.list()] == ["workbench-ref"]
    assert counters(proxy.url, key)["turns"] == 0  # aux routes never become turns


def test_admin_key_guards_the_control_plane(engine):
    settings = CaptureSettings(admin_key="adm1n", public=True)
    with CaptureServer(create_capture_app(settings)) as guarded:
        refused = httpx.post(f"{guarded.url}/sessions", json={"engine": {"url": engine.url}})
        assert refused.status_code == 401 and "admin key" in refused.json()["detail"]
        assert httpx.get(f"{guarded.url}/sessions").status_code == 401
        key = session_on(guarded.url, engine.url, headers={"authorization": "Bearer adm1n"})
        listed = httpx.get(f"{guarded.url}/sessions", headers={"x-admin-key": "adm1n"})
        assert [s["session_id"] for s in listed.json()["sessions"]] == [key]
        assert httpx.get(f"{guarded.url}/health").status_code == 200
        # The admin key is no session key: the proxy routes honour session ids only.
        assert_openai_error(chat(guarded.url, "adm1n"), 401)
        assert chat(guarded.url, key).status_code == 200


def test_public_server_without_admin_key_refuses_the_control_plane(engine):
    app = create_capture_app(CaptureSettings(public=True))
    with CaptureServer(app) as public:
        refused = httpx.post(f"{public.url}/sessions", json={"engine": {"url": engine.url}})
        assert refused.status_code == 403
        assert "admin key" in refused.json()["detail"] and "WORKBENCH_ADMIN_KEY" in refused.text
        assert httpx.get(f"{public.url}/sessions").status_code == 403


class RenderBug(ChatDialect):
    """A dialect with a bug in render: the proxy must still answer in the dialect's shape."""

    def render(self, reply, call):
        raise RuntimeError("bug in render")


def test_a_bug_is_a_500_in_the_dialect_shape_and_recorded(engine):
    app = create_capture_app(CaptureSettings(), dialects=[RenderBug()])
    with CaptureServer(app) as buggy:
        key = session_on(buggy.url, engine.url)
        error = assert_openai_error(chat(buggy.url, key), 500)
        assert "RuntimeError" in error["message"] and "bug in render" not in error["message"]
        state = counters(buggy.url, key)
    assert state["errors"] == 1 and "bug in render" in state["last_error"]


class StreamBug(ChatDialect):
    """A dialect with a bug in its synthetic stream, which runs after the stream has started."""

    def stream(self, reply, call):
        raise RuntimeError("bug in stream")


def test_a_bug_in_the_stream_is_an_error_frame_not_a_cut_connection(engine):
    app = create_capture_app(CaptureSettings(keepalive_s=0.0005), dialects=[StreamBug()])
    with CaptureServer(app) as buggy:
        key = session_on(buggy.url, engine.url)
        raw = chat(buggy.url, key, json={**HI, "stream": True})
        assert raw.status_code == 200 and raw.text.endswith("data: [DONE]\n\n"), raw.text
        client = openai.OpenAI(base_url=f"{buggy.url}/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.APIError, match="RuntimeError"):
            list(client.chat.completions.create(**HI, stream=True))
        state = counters(buggy.url, key)
    # The engine's answers were committed before the stream failed; the bug is on record.
    assert state["turns"] == 2 and state["errors"] == 2 and "bug in stream" in state["last_error"]


def test_bad_engine_url_is_refused_with_the_reason(proxy):
    response = httpx.post(f"{proxy.url}/sessions", json={"engine": {"url": "localhost:8000"}})
    assert response.status_code == 400 and "http(s)://host[:port]" in response.text


def test_streaming_client_gets_keepalives_while_the_engine_works(engine):
    app = create_capture_app(CaptureSettings(keepalive_s=0.0005))
    with CaptureServer(app) as eager:
        key = session_on(eager.url, engine.url)
        raw = chat(eager.url, key, json={**HI, "stream": True})
        assert raw.text.startswith(": keepalive\n\n") and raw.text.endswith("data: [DONE]\n\n")
        client = openai.OpenAI(base_url=f"{eager.url}/v1", api_key=key)
        chunks = list(client.chat.completions.create(**HI, stream=True))
        assert chunks[-1].choices[0].finish_reason in ("stop", "length")
        assert counters(eager.url, key)["turns"] == 2


class BlankLineKeepalive(ChatDialect):
    """A dialect whose clients cannot take SSE comments (as google-genai's cannot)."""

    keepalive = sse.BLANK_LINE


def test_a_dialect_may_choose_its_keepalive_frame(engine):
    app = create_capture_app(CaptureSettings(keepalive_s=0.0005), dialects=[BlankLineKeepalive()])
    with CaptureServer(app) as eager:
        key = session_on(eager.url, engine.url)
        raw = chat(eager.url, key, json={**HI, "stream": True})
        assert raw.text.startswith("\n") and ": keepalive" not in raw.text
        client = openai.OpenAI(base_url=f"{eager.url}/v1", api_key=key)
        assert list(client.chat.completions.create(**HI, stream=True))[-1].choices
