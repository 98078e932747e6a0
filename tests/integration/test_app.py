"""The one app: UI at /, capture proxy at /capture, the proxy URL rules and the closed control
plane on a public bind; `workbench serve` serving it offline."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from app import build_app
from workbench.settings import Settings
from workbench.ui.api import ENDPOINTS
from workbench.ui.server import proxy_url, serve_settings

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_proxy_url_is_loopback_locally_the_space_url_on_a_space_and_overridable():
    assert proxy_url(Settings(port=7861)) == "http://127.0.0.1:7861/capture"
    on_space = Settings(port=7860, space_host="me-workbench.hf.space")
    assert proxy_url(on_space) == "https://me-workbench.hf.space/capture"
    override = Settings(space_host="x.hf.space", public_url="https://gw.example/capture/")
    assert proxy_url(override) == "https://gw.example/capture"


def test_space_host_comes_from_the_spaces_environment(monkeypatch):
    monkeypatch.setenv("SPACE_HOST", "owner-name.hf.space")
    monkeypatch.setenv("SPACE_ID", "owner/name")
    settings = Settings()
    assert (settings.space_host, settings.space_id) == ("owner-name.hf.space", "owner/name")


def test_ui_at_root_and_capture_proxy_at_capture(tmp_path):
    client = TestClient(build_app(Settings(home=tmp_path)))  # no lifespan: no engine started
    assert client.get("/").status_code == 200
    assert client.get("/capture/health").status_code == 200
    assert client.get("/capture/sessions").status_code == 200  # loopback: control plane open
    config = client.get("/config").json()
    assert config["title"] == "Harbor Workbench"
    names = {d.get("api_name") for d in config["dependencies"]}
    assert set(ENDPOINTS) <= names


def test_the_duplicate_button_shows_only_on_a_space(tmp_path):
    def buttons(settings: Settings) -> set[str]:
        config = TestClient(build_app(settings)).get("/config").json()
        return {c["props"].get("value") for c in config["components"] if c["type"] == "button"}

    assert "Duplicate this Space" not in buttons(Settings(home=tmp_path))
    on_space = Settings(home=tmp_path, space_id="me/workbench", space_host="me-workbench.hf.space")
    assert "Duplicate this Space" in buttons(on_space)


def test_public_bind_without_admin_key_keeps_the_control_plane_closed(tmp_path):
    client = TestClient(build_app(Settings(home=tmp_path, host="0.0.0.0")))
    refused = client.get("/capture/sessions")
    assert refused.status_code == 403 and "admin" in refused.text
    assert client.get("/capture/health").status_code == 200
    assert client.get("/").status_code == 200  # the UI still works


def test_a_space_is_public_whatever_the_bind_address(tmp_path):
    settings = Settings(home=tmp_path, host="127.0.0.1", space_host="me-wb.hf.space")
    assert TestClient(build_app(settings)).get("/capture/sessions").status_code == 403


def test_admin_key_opens_the_control_plane_on_a_public_bind(tmp_path):
    client = TestClient(build_app(Settings(home=tmp_path, host="0.0.0.0", admin_key="k3y")))
    assert client.get("/capture/sessions").status_code in (401, 403)
    ok = client.get("/capture/sessions", headers={"authorization": "Bearer k3y"})
    assert ok.status_code == 200


def test_serve_flags_become_settings(monkeypatch):
    monkeypatch.delenv("WB_TEST_ADMIN", raising=False)
    with pytest.raises(ValueError, match=r"\$WB_TEST_ADMIN is not set"):
        serve_settings(host="0.0.0.0", port=1, admin_key_env="WB_TEST_ADMIN")
    monkeypatch.setenv("WB_TEST_ADMIN", "secret")
    s = serve_settings(
        host="0.0.0.0",
        port=8123,
        engine="http://gpu:8000",
        datasets=["demo", "/data/tasks"],
        admin_key_env="WB_TEST_ADMIN",
    )
    assert (s.host, s.port, s.engine_url, s.admin_key) == (
        "0.0.0.0",
        8123,
        "http://gpu:8000",
        "secret",
    )
    assert s.datasets == ["demo", "/data/tasks"]


@pytest.mark.slow
def test_workbench_serve_builds_and_serves_with_no_network(tmp_path):
    """Every outbound connection goes to a dead proxy; loopback still works (the app's own)."""
    port = free_port()
    dead = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "ALL_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "WORKBENCH_HOME": str(tmp_path),
    }
    cmd = [sys.executable, "-m", "workbench.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    pytest.fail(f"`workbench serve` did not come up:\n{out[-3000:]}")
                time.sleep(0.5)
        assert page.status_code == 200
        config = httpx.get(f"http://127.0.0.1:{port}/config", timeout=5).json()
        assert config["title"] == "Harbor Workbench"
        health = httpx.get(f"http://127.0.0.1:{port}/capture/health", timeout=5)
        assert health.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_space_files_agree_on_the_port_and_the_entry_point():
    front_matter = (ROOT / "README.md").read_text().split("---")[1]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "sdk: docker" in front_matter and "app_port: 7860" in front_matter
    assert "EXPOSE 7860" in dockerfile and Settings.model_fields["port"].default == 7860
    assert 'CMD ["python", "app.py", "--host", "0.0.0.0"]' in dockerfile
    assert "useradd --create-home --uid 1000" in dockerfile and "bubblewrap tmux" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".workbench", "test-artifacts"} <= set(ignored)
