"""The capture control plane over real HTTP: malformed or invalid bodies are a 400 with one clear
line (never FastAPI's 422 list), and a public server probes only engines it is allowed to."""

import httpx
import pytest

from capture.proxy import create_capture_app
from capture.serving import CaptureServer


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
