"""Which task/harness/sandbox combinations cannot reach the capture proxy, said before any trial
(Harbor's `network_mode='allowlist' is not supported by local environment` came back as an
`internal` error with a traceback)."""

import shutil

import pytest

from workbench.datasets import DEMO_DIR, DatasetResolver
from workbench.harnesses import get_harness
from workbench.network_fit import network_problem
from workbench.sandboxes import SandboxInfo
from workbench.ui.catalogues import Catalogues

LOCAL = SandboxInfo(
    name="local",
    kind="import_path",
    value="workbench.local_sandbox:LocalSandbox",
    usable=True,
    reason="",
)
TEST_LOCAL = LOCAL.model_copy(
    update={"name": "subclass", "value": "tests.fixtures.sandboxes:RateLimitedOnceSandbox"}
)
DOCKER = SandboxInfo(name="docker", kind="type", value="docker", usable=True, reason="")


def _task(tmp_path, network_line: str):
    task = tmp_path / "task"
    shutil.copytree(DEMO_DIR / "hello-file", task)
    toml = (task / "task.toml").read_text().replace('network_mode = "no-network"', network_line)
    (task / "task.toml").write_text(toml)
    return DatasetResolver(cache_dir=tmp_path / "cache").resolve(str(task)).tasks[0]


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini-cli"])
@pytest.mark.parametrize("sandbox", [LOCAL, TEST_LOCAL])
def test_in_sandbox_harness_on_no_network_task_in_local_is_refused(tmp_path, harness, sandbox):
    problem = network_problem(
        _task(tmp_path, 'network_mode = "no-network"'), get_harness(harness), sandbox
    )
    assert problem is not None
    assert "allowlist" in problem and "terminus-2" in problem and "docker" in problem


def test_an_allowlist_task_in_local_is_refused_whatever_the_harness(tmp_path):
    task = _task(tmp_path, 'network_mode = "allowlist"\nallowed_hosts = ["example.com"]')
    assert "network_mode 'allowlist'" in network_problem(task, get_harness("terminus-2"), LOCAL)


@pytest.mark.parametrize(
    ("network_line", "harness", "sandbox"),
    [
        ('network_mode = "no-network"', "terminus-2", LOCAL),  # host-side: no sandbox egress
        ('network_mode = "no-network"', "oracle", LOCAL),  # makes no model calls
        ('network_mode = "public"', "claude-code", LOCAL),
        ('network_mode = "no-network"', "claude-code", DOCKER),  # Harbor checks docker itself
    ],
)
def test_combinations_that_can_run_are_not_refused(tmp_path, network_line, harness, sandbox):
    assert network_problem(_task(tmp_path, network_line), get_harness(harness), sandbox) is None


def test_the_ui_form_gets_the_same_refusal(tmp_path):
    catalogues = Catalogues(["demo"], DatasetResolver(cache_dir=tmp_path / "cache"))
    task = catalogues.tasks("demo")[0].name
    problem = catalogues.network_problem("demo", task, "claude-code", LOCAL)
    assert problem is not None and "terminus-2" in problem
    assert catalogues.network_problem("demo", task, "terminus-2", LOCAL) is None
