"""Dataset specs: demo, local dirs, single tasks, registry.json files, unreachable registries."""

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from workbench.datasets import (
    DEMO_DIR,
    DatasetError,
    DatasetResolver,
    default_resolver,
    resolve_dataset,
)
from workbench.service import WorkbenchService
from workbench.settings import Settings
from workbench.ui.catalogues import Catalogues

DEMO_NAMES = {"workbench/hello-file", "workbench/fix-bug", "workbench/csv-summary"}


@pytest.fixture
def resolver(tmp_path):
    return DatasetResolver(cache_dir=tmp_path / "cache")


def test_demo_dataset_has_small_offline_tasks():
    dataset = resolve_dataset("demo")
    assert {t.name for t in dataset.tasks} == DEMO_NAMES
    for task in dataset.tasks:
        assert task.path.is_dir() and task.source.startswith("local:")
        assert (task.path / "solution" / "solve.sh").is_file()
        assert (task.path / "tests" / "test.sh").is_file()
        assert 0 < task.agent_timeout_s <= 120 and 0 < task.verifier_timeout_s <= 120
        assert task.network is False and task.network_mode == "no-network"
        flat = " ".join(task.instruction.split())
        assert task.instruction_preview.rstrip("…") in flat
        assert len(task.instruction_preview) <= 200


def test_local_directory_of_tasks(resolver, tmp_path):
    root = tmp_path / "tasks"
    shutil.copytree(DEMO_DIR, root)
    (root / "not-a-task").mkdir()
    dataset = resolver.resolve(str(root))
    assert dataset.name == "tasks"
    assert {t.name for t in dataset.tasks} == DEMO_NAMES
    assert dataset.task("fix-bug").name == "workbench/fix-bug"  # by directory name too
    with pytest.raises(DatasetError, match="No task 'nope'"):
        dataset.task("nope")


def test_single_task_directory(resolver):
    dataset = resolver.resolve(str(DEMO_DIR / "hello-file"))
    assert [t.name for t in dataset.tasks] == ["workbench/hello-file"]
    assert "Hello, Harbor!" in dataset.tasks[0].instruction


def test_local_registry_json_with_and_without_selector(resolver):
    registry = DEMO_DIR / "registry.json"
    for spec in (str(registry), f"{registry}::workbench-demo", f"{registry}::workbench-demo@1.0"):
        dataset = resolver.resolve(spec)
        assert dataset.name == "workbench-demo@1.0"
        assert [t.path.name for t in dataset.tasks] == ["hello-file", "fix-bug", "csv-summary"]
    with pytest.raises(DatasetError, match="nope"):
        resolver.resolve(f"{registry}::nope")


def test_registry_with_several_datasets_needs_a_name(resolver, tmp_path):
    rows = json.loads((DEMO_DIR / "registry.json").read_text())
    rows.append({**rows[0], "name": "other", "tasks": rows[0]["tasks"][:1]})
    for row in rows:
        for task in row["tasks"]:
            task["path"] = str(DEMO_DIR / task["path"])
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(rows))
    with pytest.raises(DatasetError, match="several datasets"):
        resolver.resolve(str(registry))
    assert len(resolver.resolve(f"{registry}::other").tasks) == 1


def test_task_lists_are_cached_until_a_task_changes(resolver, tmp_path):
    root = tmp_path / "tasks"
    shutil.copytree(DEMO_DIR, root)
    first = resolver.resolve(str(root))
    assert resolver.resolve(str(root)) is first
    shutil.rmtree(root / "csv-summary")
    assert len(resolver.resolve(str(root)).tasks) == 2


@pytest.mark.parametrize(
    "spec",
    [
        "workbench-no-such-dataset@0.0",  # legacy registry name
        "workbench-tests/no-such-dataset",  # package registry name
        "https://unreachable.invalid/org/repo",  # git repo (.invalid never resolves)
    ],
)
def test_unreachable_registry_fails_fast_and_says_why(resolver, spec):
    started = time.monotonic()
    with pytest.raises(DatasetError) as caught:
        resolver.resolve(spec)
    assert time.monotonic() - started < 8
    message = str(caught.value)
    # Offline: the registry is unreachable. Online: the made-up name is not found.
    assert ("needs the network" in message and "demo" in message) or "not found" in message


@pytest.mark.parametrize("spec", ["", "./missing-dir", "/no/such/registry.json"])
def test_bad_specs(resolver, spec):
    with pytest.raises(DatasetError):
        resolver.resolve(spec)


def test_directory_without_tasks(resolver, tmp_path):
    with pytest.raises(DatasetError, match="no Harbor task directories"):
        resolver.resolve(str(tmp_path))


@pytest.mark.parametrize(
    ("line", "network", "mode"),
    [
        ('network_mode = "no-network"', False, "no-network"),
        ("allow_internet = false", False, "no-network"),
        ("", True, "public"),
    ],
)
def test_network_policy_is_read_from_task_toml(resolver, tmp_path, line, network, mode):
    task = tmp_path / "task"
    shutil.copytree(DEMO_DIR / "hello-file", task)
    toml = (task / "task.toml").read_text().replace('network_mode = "no-network"', line)
    (task / "task.toml").write_text(toml)
    info = resolver.resolve(str(task)).tasks[0]
    assert (info.network, info.network_mode) == (network, mode)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def git_remote(tmp_path):
    """A dataset repo (tasks/ + registry.json) served by a real `git daemon` on loopback."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    work = tmp_path / "work"
    (work / "tasks").mkdir(parents=True)
    for name in ("hello-file", "fix-bug"):
        shutil.copytree(DEMO_DIR / name, work / "tasks" / name)
    (work / "tasks" / "fix-bug" / "notes.md").symlink_to("instruction.md")
    registry = [
        {
            "name": "in-git",
            "version": "1.0",
            "description": "",
            "tasks": [{"name": "hello-file", "path": "tasks/hello-file"}],
        }
    ]
    (work / "registry.json").write_text(json.dumps(registry))
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "tasks", cwd=work)
    served = tmp_path / "served"
    (served / "org").mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(served / "org" / "repo"), cwd=tmp_path)
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--export-all", "--reuseaddr", "--listen=127.0.0.1",
         f"--port={port}", f"--base-path={served}", str(served)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"git://127.0.0.1:{port}/org/repo"
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(["git", "ls-remote", url], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "git daemon did not start"
            time.sleep(0.05)
        yield daemon, url
    finally:
        daemon.terminate()  # a no-op when the test already stopped it
        daemon.wait()


@pytest.mark.slow
def test_git_repo_through_harbors_client_then_offline(git_remote, tmp_path):
    daemon, url = git_remote
    cache = tmp_path / "cache"
    dataset = DatasetResolver(cache_dir=cache).resolve(url)
    assert {t.name for t in dataset.tasks} == {"workbench/hello-file", "workbench/fix-bug"}
    for task in dataset.tasks:
        assert task.source.startswith("remote:") and task.path.is_relative_to(cache)
    downloaded = [p for t in dataset.tasks for p in t.path.rglob("*")]
    assert downloaded and not any(p.is_symlink() for p in downloaded)
    notes = dataset.task("fix-bug").path / "notes.md"
    assert notes.read_text() == (DEMO_DIR / "fix-bug" / "instruction.md").read_text()

    named = DatasetResolver(cache_dir=cache).resolve(f"{url}::in-git")
    assert (named.name, [t.name for t in named.tasks]) == ("in-git", ["workbench/hello-file"])

    daemon.terminate()
    daemon.wait()
    # A new process (no memory cache) with the registry gone: the saved list still resolves.
    again = DatasetResolver(cache_dir=cache).resolve(url)
    assert [t.path for t in again.tasks] == [t.path for t in dataset.tasks]
    assert "registry unreachable" in again.source
    with pytest.raises(DatasetError, match="needs the network"):
        DatasetResolver(cache_dir=tmp_path / "empty-cache").resolve(url)


@pytest.mark.slow
def test_a_service_caches_remote_datasets_under_its_own_home_not_the_default(git_remote, tmp_path):
    # The resolver once cached under Settings().home (~/.workbench) whatever home the service
    # or app was configured with.
    _, url = git_remote
    home = tmp_path / "home"
    service = WorkbenchService(Settings(home=home))
    try:
        dataset = service.datasets.resolve(url)
        assert dataset.tasks and all(t.path.is_relative_to(home) for t in dataset.tasks)
        assert Catalogues([url], service.datasets).datasets()[0].tasks == len(dataset.tasks)
    finally:
        service.close()


def test_the_default_resolver_follows_workbench_home(tmp_path, monkeypatch):
    # It was created once per process: a later WORKBENCH_HOME (another test, another command)
    # still cached under the first home.
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "a"))
    first = default_resolver()
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "b"))
    second = default_resolver()
    assert first.tasks_dir.is_relative_to(tmp_path / "a")
    assert second.tasks_dir.is_relative_to(tmp_path / "b")
    assert default_resolver() is second  # one per home: its memory cache is shared
