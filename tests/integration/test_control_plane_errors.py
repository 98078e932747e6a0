"""The capture control plane over real HTTP: malformed or invalid bodies are a 400 with one clear
line (never FastAPI's 422 list), and a public server probes only engines it is allowed to."""

import time

import httpx
import pytest
from gradio_client.exceptions import AppError

from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from tests.live_app import LiveApp
from workbench.client import WorkbenchClient
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer


@pytest.fixture(scope="module")
def local_url():
    with CaptureServer(create_capture_app()) as server:
        yield server.url


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"engine": {"url": "localhost:8000"}}', "engine.url: engine url must be http(s)://"),
        (b"{}", "engine: Field required"),
        (b"[1]", "invalid request"),
    ],
)
def test_malformed_session_body_is_400_not_fastapi_422(local_url: str, body: bytes, words: str):
    response = httpx.post(
        f"{local_url}/sessions", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and words in detail
    assert "Value error," not in detail


def test_invalid_phase_update_is_400_naming_the_field(local_url: str):
    response = httpx.patch(f"{local_url}/sessions/nope", json={"phase": "bogus"})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("invalid request: phase:")


@pytest.fixture(scope="module")
def public_app():
    """A public capture app (admin key set) allowed one engine host:port."""
    with EngineServer(EngineConfig()) as engine:
        settings = CaptureSettings(
            public=True, admin_key="k", engine_hosts=(f"127.0.0.1:{engine.port}",)
        )
        with CaptureServer(create_capture_app(settings)) as server:
            yield server.url, engine.url


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254", "http://127.0.0.1:1", "http://localhost:22/v1"]
)
def test_public_server_refuses_to_probe_an_engine_outside_its_allowlist(public_app, url: str):
    proxy, _ = public_app
    started = time.monotonic()
    response = httpx.post(
        f"{proxy}/sessions", json={"engine": {"url": url}}, headers={"x-admin-key": "k"}
    )
    assert response.status_code == 400, response.text
    assert "WORKBENCH_ENGINE_HOSTS" in response.json()["detail"]
    assert time.monotonic() - started < 5  # refused up front, no connect attempt to wait on


def test_public_server_serves_its_allowed_engine(public_app):
    proxy, engine = public_app
    response = httpx.post(
        f"{proxy}/sessions", json={"engine": {"url": engine}}, headers={"x-admin-key": "k"}
    )
    assert response.status_code == 201 and response.json()["tier"] == "tokens"


def test_local_server_still_opens_sessions_on_any_engine(local_url: str):
    response = httpx.post(f"{local_url}/sessions", json={"engine": {"url": "http://127.0.0.1:1"}})
    assert response.status_code == 201 and response.json()["tier"] == "text"


@pytest.mark.slow
def test_public_app_api_refuses_a_metadata_engine_url(tmp_path):
    # A Space: public whatever the bind address; no engine_url, so only the embedded engine.
    with (
        LiveApp(tmp_path, SPACE_HOST="me-workbench.hf.space") as live,
        WorkbenchClient(live.url) as client,
        pytest.raises(AppError, match="WORKBENCH_ENGINE_HOSTS"),
    ):
        client.run("demo", "hello-file", engine_url="http://169.254.169.254/v1")
