"""`workbench info`: the real CLI against a real reference engine; nothing else is booted."""

import json
import socket

import httpx
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.server import VERSION
from workbench.local_sandbox import bwrap_problem

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, ["info", *args])
    assert result.exit_code == 0, result.output
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def engine_url():
    with EngineServer(EngineConfig()) as engine:
        yield engine.url


@pytest.mark.slow
def test_json_report_with_a_probed_engine(engine_url, tmp_path):
    report = json.loads(
        invoke(
            "--engine", engine_url, "--dataset", "demo", "--dataset", str(tmp_path), "--json"
        ).stdout
    )
    engine = report["engine"]
    assert engine["probed"] and engine["reachable"]
    assert engine["tier"] == "tokens" and engine["served_model"] == "workbench-ref"

    sandboxes = {s["name"]: s for s in report["sandboxes"]}
    assert sandboxes["local"]["usable"] is (bwrap_problem() is None)
    assert not sandboxes["docker"]["usable"] and sandboxes["docker"]["reason"]

    demo, empty = report["datasets"]
    assert (demo["spec"], demo["tasks"], demo["error"]) == ("demo", 3, None)
    assert empty["tasks"] is None and "no Harbor task directories" in empty["error"]

    groups = report["by_dialect"]
    assert set(groups) == {"chat", "responses", "anthropic", "google", "not redirectable"}
    assert "terminus-2" in groups["chat"] and "claude-code" in groups["anthropic"]
    assert {"oracle", "nop"} <= set(groups["not redirectable"])


@pytest.mark.slow
def test_unreachable_engine_is_reported_not_raised():
    report = json.loads(invoke("--engine", f"http://127.0.0.1:{free_port()}", "--json").stdout)
    engine = report["engine"]
    assert engine["probed"] and engine["reachable"] is False
    assert "unreachable" in engine["reason"]
    assert [d["spec"] for d in report["datasets"]] == ["demo"]  # the default dataset


@pytest.mark.slow
def test_tables_without_engine():
    out = invoke("--dataset", "demo").stdout
    for expected in ("Engine", "not probed", "Sandboxes", "local", "Datasets", "demo"):
        assert expected in out
    assert "terminus-2*" in out  # host-side marker in the dialect table
    assert "harbor[e2b]" in out  # reasons are printed literally, not as markup


@pytest.mark.slow
def test_invalid_engine_url_is_reported():
    report = json.loads(invoke("--engine", "not-a-url", "--json").stdout)
    assert not report["engine"]["probed"]
    assert "http" in report["engine"]["reason"]
    assert "Value error" not in report["engine"]["reason"]  # pydantic's prefix is not for users


@pytest.mark.slow
def test_embedded_engine_is_started_probed_and_stopped():
    # The README's `workbench info --engine embedded --dataset demo`.
    report = json.loads(invoke("--engine", "embedded", "--dataset", "demo", "--json").stdout)
    engine = report["engine"]
    assert engine["probed"] and engine["reachable"], engine
    assert engine["tier"] == "tokens" and engine["url"].startswith("embedded (http://127.0.0.1:")
    assert engine["version"] == VERSION
    with pytest.raises(httpx.ConnectError):  # stopped after the probe
        httpx.get(engine["url"].split(" ")[1].strip("(,") + "/version")
