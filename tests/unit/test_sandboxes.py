"""The sandbox catalogue: Harbor's environment types plus `local`, each with a verdict."""

import shutil
import subprocess

import pytest
from harbor.environments.factory import _ENVIRONMENT_REGISTRY

from workbench.local_sandbox import LocalSandbox, bwrap_problem
from workbench.sandboxes import SandboxCatalogue, get_sandbox, sandbox_catalogue


@pytest.fixture(scope="module")
def catalogue():
    return {s.name: s for s in sandbox_catalogue()}


def test_every_environment_type_and_local_is_listed(catalogue):
    assert set(catalogue) == {"local"} | {t.value for t in _ENVIRONMENT_REGISTRY}
    assert all(info.reason for info in catalogue.values())


def test_local_is_selected_by_import_path(catalogue):
    local = catalogue["local"]
    assert (local.kind, local.value) == ("import_path", "workbench.local_sandbox:LocalSandbox")
    problem = bwrap_problem()
    assert local.usable is (problem is None)
    if problem:
        assert local.reason == problem


def docker_daemon_runs() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def test_docker_verdict_follows_the_daemon(catalogue):
    docker = catalogue["docker"]
    assert (docker.kind, docker.value) == ("type", "docker")
    if docker_daemon_runs():
        # Harbor's own preflight decides; a refusal must still name its reason.
        assert docker.usable or "Docker" in docker.reason
    else:
        assert not docker.usable
        assert "Docker" in docker.reason
        assert "daemon is not running" in docker.reason or "not installed" in docker.reason


def test_missing_sdk_is_named_with_the_install_command(catalogue):
    missing = [s for s in catalogue.values() if "SDK is not installed" in s.reason]
    assert missing, "expected some cloud SDKs to be absent in the test venv"
    for info in missing:
        assert not info.usable and "pip install 'harbor[" in info.reason


def test_types_without_a_preflight_are_never_usable(catalogue):
    for name in ("sbx", "singularity"):
        assert not catalogue[name].usable
        assert "no preflight" in catalogue[name].reason


def test_usable_only_when_preflight_ran_and_passed(catalogue):
    for info in catalogue.values():
        assert info.usable is (info.reason == "preflight passed")


def test_get_sandbox_import_path_and_unknown():
    assert get_sandbox("workbench.local_sandbox:LocalSandbox").kind == "import_path"
    broken = get_sandbox("no_such_module:Env")
    assert not broken.usable and "does not import" in broken.reason
    with pytest.raises(KeyError, match="No sandbox 'nope'"):
        get_sandbox("nope")


def test_local_preflight_says_what_to_install():
    with pytest.raises(SystemExit, match=r"bubblewrap .* is not installed.*apt-get install"):
        LocalSandbox.preflight({"bwrap": "/nonexistent/bwrap"})
    with pytest.raises(ValueError, match="Unknown option 'nope'"):
        LocalSandbox.preflight({"nope": 1})


def test_preflight_results_are_cached_briefly_per_catalogue_not_per_process():
    catalogue = SandboxCatalogue()
    first = catalogue.get("docker")
    assert catalogue.get("docker") is first
    assert catalogue.get("docker", refresh=True) is not first
    assert SandboxCatalogue().get("docker") is not first  # no module-level cache
    assert SandboxCatalogue(ttl_s=0).get("local") is not SandboxCatalogue(ttl_s=0).get("local")
