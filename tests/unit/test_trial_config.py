"""The one place that builds Harbor's TrialConfig: base URL per dialect, explicit API format, the
session key by env-var name only, model names LiteLLM routes correctly."""

from pathlib import Path

import pytest

from workbench.datasets import resolve_dataset
from workbench.harbor_trial import ModelConnection, build_trial_config
from workbench.harnesses import HarnessInfo
from workbench.sandboxes import SandboxInfo

LOCAL = SandboxInfo(
    name="local",
    kind="import_path",
    value="workbench.local_sandbox:LocalSandbox",
    usable=True,
    reason="",
)
PROXY = "http://127.0.0.1:9000/capture"
HARNESSES = {  # as the catalogue describes them (tests/unit/test_harnesses.py pins that side)
    "terminus-2": HarnessInfo(
        name="terminus-2",
        import_path="harbor.agents.terminus_2:Terminus2",
        dialects=["chat", "responses", "anthropic"],
        host_side=True,
        redirectable=True,
        writes_atif=True,
        reason="",
    ),
    "claude-code": HarnessInfo(
        name="claude-code",
        import_path="harbor.agents.installed.claude_code:ClaudeCode",
        dialects=["anthropic"],
        host_side=False,
        redirectable=True,
        writes_atif=True,
        reason="",
    ),
    "nop": HarnessInfo(
        name="nop",
        import_path="harbor.agents.nop:NopAgent",
        dialects=[],
        host_side=True,
        redirectable=False,
        writes_atif=False,
        reason="",
    ),
}


def _config(harness: str, dialect: str | None, sandbox: SandboxInfo = LOCAL):
    connection = (
        ModelConnection(dialect, PROXY, "WORKBENCH_SESSION_AB12", "served-model")
        if dialect
        else None
    )
    return build_trial_config(
        task=resolve_dataset("demo").tasks[0],
        harness=HARNESSES[harness],
        sandbox=sandbox,
        trials_dir=Path("/tmp/jobs/j"),
        connection=connection,
    )


@pytest.mark.parametrize(
    ("dialect", "base_url", "api_format", "model"),
    [
        ("chat", PROXY + "/v1", "openai_chat_completions", "openai/served-model"),
        ("responses", PROXY + "/v1", "openai_responses", "openai/served-model"),
        ("anthropic", PROXY, "anthropic_messages", "anthropic/served-model"),
    ],
)
def test_terminus_2_per_dialect(dialect, base_url, api_format, model):
    agent = _config("terminus-2", dialect).agent
    assert (agent.base_url, agent.model_api_format.value, agent.model_name) == (
        base_url,
        api_format,
        model,
    )
    assert agent.model_api_key_name == "WORKBENCH_SESSION_AB12"
    assert agent.env == {}  # never the key: terminus-2 exports AgentConfig.env into the sandbox
    assert agent.skip_model_parsing is False
    assert agent.kwargs["record_terminal_session"] is False  # offline: no asciinema install


def test_in_sandbox_harness_gets_the_raw_model_and_skips_parsing():
    agent = _config("claude-code", "anthropic").agent
    assert (agent.base_url, agent.model_name, agent.skip_model_parsing) == (
        PROXY,
        "served-model",
        True,
    )


def test_harness_without_model_connection_gets_no_seams():
    config = _config("nop", None)
    agent = config.agent
    assert agent.name == "nop"
    assert (agent.base_url, agent.model_api_key_name, agent.model_api_format) == (None, None, None)


def test_sandbox_by_type_or_import_path_and_trials_under_jobs():
    docker = SandboxInfo(name="docker", kind="type", value="docker", usable=True, reason="")
    by_type = _config("nop", None, docker)
    assert by_type.environment.type.value == "docker" and by_type.environment.import_path is None
    by_path = _config("nop", None)
    assert by_path.environment.import_path == LOCAL.value and by_path.environment.delete is True
    assert by_path.trials_dir == Path("/tmp/jobs/j")


def test_sandbox_root_goes_to_the_local_sandbox_only(tmp_path):
    # Without it, test and service trials piled their roots up in the shared tmp dir.
    def config(sandbox: SandboxInfo):
        return build_trial_config(
            task=resolve_dataset("demo").tasks[0],
            harness=HARNESSES["nop"],
            sandbox=sandbox,
            trials_dir=tmp_path,
            connection=None,
            sandbox_root=tmp_path / "roots",
        )

    assert config(LOCAL).environment.kwargs == {"root_base": str(tmp_path / "roots")}
    docker = SandboxInfo(name="docker", kind="type", value="docker", usable=True, reason="")
    assert config(docker).environment.kwargs == {}
