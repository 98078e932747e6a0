"""`workbench rollout` and `workbench golden` end to end, through the real command line."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.rollouts import FIXTURE_TASKS, needs_local_sandbox
from workbench.cli import app

runner = CliRunner()
DEMO_ROLLOUT = ["rollout", "--dataset", "demo", "--harness", "terminus-2", "--sandbox", "local"]


def test_rollout_refuses_a_missing_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    result = runner.invoke(app, [*DEMO_ROLLOUT, "--task-index", "0"])
    assert result.exit_code != 0
    assert "--engine" in result.output
    assert not list(tmp_path.rglob("*.json"))  # nothing ran, nothing written


def test_rollout_refuses_a_bad_engine_url_and_task_index(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    bad_url = runner.invoke(app, [*DEMO_ROLLOUT, "--engine", "localhost:8000", "--task-index", "0"])
    assert bad_url.exit_code == 2 and "http(s)" in bad_url.output
    bad_index = runner.invoke(app, [*DEMO_ROLLOUT, "--engine", "embedded", "--task-index", "999"])
    assert bad_index.exit_code == 2 and "--task-index" in bad_index.output


def test_rollout_refuses_an_in_sandbox_harness_on_a_no_network_task_in_local(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    args = [*DEMO_ROLLOUT, "--engine", "embedded", "--task-index", "0"]
    args[args.index("terminus-2")] = "claude-code"
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "allowlist" in result.output and "terminus-2" in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.rglob("*.json"))  # refused before anything ran


@pytest.mark.slow
@needs_local_sandbox
def test_rollout_embedded_prints_ok_reward_and_document(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "out"
    result = runner.invoke(
        app, [*DEMO_ROLLOUT, "--engine", "embedded", "--task-index", "0", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    paths = re.findall(r"document: (\S+)", result.output)
    assert len(paths) == 1 and out.joinpath(paths[0].rsplit("/", 1)[-1]).is_file()
    # The table header always says "ok": the verdict is read from the printed document.
    document = json.loads(Path(paths[0]).read_text())
    assert document["ok"] is True and document["reward"] == 1.0, document["error"]


@pytest.mark.slow
@needs_local_sandbox
def test_golden_demo_all_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["golden", "--dataset", "demo", "--sandbox", "local"])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output
    assert re.search(r"(\d+)/\1 task\(s\) pass", result.output)


@pytest.mark.slow
@needs_local_sandbox
def test_golden_shows_the_test_log_of_a_failing_task(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["golden", "--dataset", str(FIXTURE_TASKS), "--sandbox", "local"])
    assert result.exit_code == 1
    assert "FAIL" in result.output
    assert "verifier ran and wrote no reward" in result.output  # no-reward's test log tail
    assert "reward_ambiguous" in result.output  # two-keys
