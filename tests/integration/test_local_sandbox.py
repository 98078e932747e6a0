"""The local bubblewrap sandbox: real Harbor trials, isolation, cleanup, tmux, cancellation."""

import asyncio
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig as TaskEnvironmentConfig
from harbor.models.task.config import NetworkMode, NetworkPolicy
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, TrialConfig
from harbor.models.trial.paths import TrialPaths
from harbor.trial.trial import Trial

from workbench.datasets import DEMO_DIR, resolve_dataset
from workbench.local_sandbox import (
    IMPORT_PATH,
    KEPT_FILE,
    MARKER_ENV,
    LocalSandbox,
    SandboxPathError,
    bwrap_problem,
    marked_pids,
    remove_stale_roots,
)

BWRAP_PROBLEM = bwrap_problem()
pytestmark = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap: {BWRAP_PROBLEM}")
DEMO_TASKS = [t.path.name for t in resolve_dataset("demo").tasks]


def marker(session_id: str) -> bytes:
    return f"{MARKER_ENV}={session_id}".encode()


def make_sandbox(
    tmp_path: Path,
    *,
    network: NetworkMode = NetworkMode.PUBLIC,
    workdir: str | None = "/app",
    **options,
) -> LocalSandbox:
    trial_paths = TrialPaths(tmp_path / "trial")
    trial_paths.mkdir()
    return LocalSandbox(
        environment_dir=tmp_path / "environment",
        environment_name="probe",
        session_id=f"probe-{uuid.uuid4().hex[:8]}__env",
        trial_paths=trial_paths,
        task_env_config=TaskEnvironmentConfig(workdir=workdir, network_mode=network),
        network_policy=NetworkPolicy(network_mode=network),
        root_base=tmp_path / "roots",
        **options,
    )


@pytest.fixture
async def sandbox(tmp_path):
    env = make_sandbox(tmp_path)
    await env.start(force_build=False)
    yield env
    await env.stop(delete=True)


async def run_trial(task_dir: Path, agent: str, trials_dir: Path):
    config = TrialConfig(
        task=TaskConfig(path=task_dir),
        trials_dir=trials_dir,
        agent=AgentConfig(name=agent),
        environment=EnvironmentConfig(
            import_path=IMPORT_PATH, kwargs={"root_base": str(trials_dir / "roots")}
        ),
    )
    trial = await Trial.create(config)
    return trial, await trial.run()


@pytest.mark.slow
@pytest.mark.parametrize("task", DEMO_TASKS)
@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
async def test_demo_task_reward(tmp_path, task, agent, reward):
    trial, result = await run_trial(DEMO_DIR / task, agent, tmp_path)
    assert result.exception_info is None, result.exception_info
    assert result.verifier_result.rewards == {"reward": reward}
    # Harbor read the reward through the /logs/verifier bind, straight from the trial dir.
    assert (trial.paths.verifier_dir / "reward.txt").read_text().strip() in {"1", "0"}
    if agent == "oracle":
        assert (trial.paths.agent_dir / "oracle.txt").exists()
    assert not any((tmp_path / "roots").iterdir()), "the sandbox root was not removed"


async def test_exec_env_cwd_streaming_and_exit_code(sandbox):
    sandbox._persistent_env = {"A": "persistent", "B": "persistent"}
    lines: list[str] = []

    async def on_output(text: str, stream: str) -> None:
        lines.append(text)

    with sandbox.scoped_output_callback(on_output):
        result = await sandbox.exec(
            'echo "$A $B $PWD"; echo err >&2; exit 3', env={"B": "per-exec"}
        )
    assert result.return_code == 3
    assert result.stdout.splitlines() == ["persistent per-exec /app", "err"]
    assert lines == ["persistent per-exec /app\n", "err\n"]
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout.strip() == "/tmp"


async def test_exec_timeout_raises_and_kills(sandbox):
    with pytest.raises(RuntimeError, match="timed out after 1 seconds"):
        await sandbox.exec("sleep 30", timeout_sec=1)
    # Killed (a zombie until a reaper collects it is fine; a running `sleep 30` is not).
    alive = await sandbox.exec(
        "ps -eo stat=,args= | awk '$1 !~ /^Z/ && $2 == \"sleep\" && $3 == 30'"
    )
    assert alive.stdout is None


async def test_cannot_write_host_usr_or_outside_root(sandbox, tmp_path):
    name = f"wb-probe-{uuid.uuid4().hex}"
    result = await sandbox.exec(f"touch /usr/{name}; touch /etc/{name}; touch /tmp/{name}")
    assert result.return_code == 0  # the last touch (/tmp inside the root) succeeds
    assert "Read-only file system" in result.stdout
    assert not Path(f"/usr/{name}").exists() and not Path(f"/etc/{name}").exists()
    assert not Path(f"/tmp/{name}").exists(), "sandbox /tmp leaked to the host"
    assert (sandbox.root / "tmp" / name).exists()
    # The host's other directories are not there at all.
    assert (await sandbox.exec(f"ls {tmp_path}")).return_code != 0

    source = tmp_path / "payload.txt"
    source.write_text("x")
    for target in ("/usr/payload.txt", "/etc/x", "/proc/x", "/dev/x", "/bin/x", "relative"):
        with pytest.raises(SandboxPathError):
            await sandbox.upload_file(source, target)
    # A link planted inside the sandbox is followed the way the sandbox sees it.
    await sandbox.exec("ln -s /root /app/escape && ln -s /etc/hostname /app/hostlink")
    await sandbox.upload_file(source, "/app/escape/payload.txt")
    assert (sandbox.root / "root" / "payload.txt").read_text() == "x"
    with pytest.raises(SandboxPathError):
        await sandbox.upload_file(source, "/app/hostlink")


async def test_upload_download_round_trip(sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("hello")
    await sandbox.upload_dir(src, "/data")
    assert (await sandbox.exec("cat /data/sub/f.txt")).stdout == "hello"
    await sandbox.exec("echo made > /data/sub/g.txt")
    await sandbox.download_dir("/data", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "g.txt").read_text() == "made\n"
    await sandbox.download_file("/data/sub/f.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "hello"
    # /logs/agent is Harbor's bind: what the sandbox writes is in the trial dir at once.
    await sandbox.exec("echo log > /logs/agent/x.txt")
    assert (sandbox.trial_paths.agent_dir / "x.txt").read_text() == "log\n"


@pytest.mark.parametrize(("network", "reachable"), [("no-network", False), ("public", True)])
async def test_network_policy_and_host_loopback(tmp_path, network, reachable):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    env = make_sandbox(tmp_path, network=NetworkMode(network))
    await env.start(force_build=False)
    try:
        probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
        result = await env.exec(probe, timeout_sec=20)
    finally:
        await env.stop(delete=True)
        server.close()
    assert (result.return_code == 0) is reachable, result.stdout


async def test_stop_leaves_no_process_and_removes_root(tmp_path):
    env = make_sandbox(tmp_path)
    await env.start(force_build=False)
    # One child keeps the output pipe open: exec must still return once bash exits.
    result = await asyncio.wait_for(env.exec("sleep 1000 & echo started"), 10)
    assert result.stdout.strip() == "started"
    await env.exec("nohup sleep 1000 >/dev/null 2>&1 &")
    assert len(marked_pids(marker(env.session_id))) >= 2
    root = env.root
    await env.stop(delete=True)
    assert marked_pids(marker(env.session_id)) == []
    assert not root.exists()


async def test_starting_a_sandbox_removes_stale_roots_of_interrupted_runs(tmp_path):
    roots = tmp_path / "roots"
    stale, live, young, kept = (roots / name for name in ("stale", "live", "young", "kept"))
    for root in (stale, live, young, kept):
        (root / "app").mkdir(parents=True)
    (kept / KEPT_FILE).touch()
    an_hour_ago = time.time() - 3600
    for root in (stale, live, kept):
        os.utime(root, (an_hour_ago, an_hour_ago))
    # A live run's processes carry its marker (as its keeper and execs do).
    keeper = subprocess.Popen(["sleep", "60"], env={**os.environ, MARKER_ENV: "live"})
    try:
        env = make_sandbox(tmp_path)
        await env.start(force_build=False)
        await env.stop(delete=True)
    finally:
        keeper.kill()
        keeper.wait()
    assert not stale.exists()
    assert live.exists() and young.exists() and kept.exists()


async def test_a_running_sandbox_root_is_not_stale(sandbox):
    os.utime(sandbox.root, (time.time() - 3600,) * 2)
    assert remove_stale_roots(sandbox.root.parent) == []
    assert sandbox.root.exists() and (await sandbox.exec("echo alive")).stdout == "alive\n"


async def test_a_sandbox_that_cannot_start_says_so_and_stops_cleanly(tmp_path):
    env = make_sandbox(tmp_path, bwrap="false")
    with pytest.raises(RuntimeError, match="could not start bubblewrap"):
        await env.start(force_build=False)
    with pytest.raises(RuntimeError, match="not started"):
        await env.exec("true")
    await env.stop(delete=True)
    assert not env.root.exists()


async def test_dockerfile_task_uses_its_workdir_and_is_warned_about(tmp_path, caplog):
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim\nWORKDIR /srv\nRUN pip install x\nWORKDIR /srv/work\n"
    )
    with caplog.at_level("WARNING"):
        env = make_sandbox(tmp_path, workdir=None)
    assert "builds no image" in caplog.text
    await env.start(force_build=False)
    try:
        assert (await env.exec("pwd")).stdout.strip() == "/srv/work"
    finally:
        await env.stop(delete=True)


async def test_stop_can_keep_root(tmp_path):
    env = make_sandbox(tmp_path)
    await env.start(force_build=False)
    await env.exec("echo kept > /app/file")
    await env.stop(delete=False)
    assert (env.root / "app" / "file").read_text() == "kept\n"
    shutil.rmtree(env.root)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_tmux_server_survives_between_execs(sandbox):
    started = await sandbox.exec("tmux new-session -d -s wb -x 80 -y 24 'bash --login'")
    assert started.return_code == 0, started.stdout
    await sandbox.exec("tmux send-keys -t wb 'echo from-tmux > /app/t.txt' Enter")
    result = await sandbox.exec(
        "for i in $(seq 200); do [ -s /app/t.txt ] && break; sleep 0.1; done; "
        "tmux has-session -t wb && cat /app/t.txt"
    )
    assert result.return_code == 0
    assert result.stdout.strip() == "from-tmux"


@pytest.mark.slow
async def test_cancelled_trial_stops_its_sandbox(tmp_path):
    task = tmp_path / "slow-task"
    shutil.copytree(DEMO_DIR / "hello-file", task)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nsleep 1000\n")
    config = TrialConfig(
        task=TaskConfig(path=task),
        trials_dir=tmp_path / "trials",
        agent=AgentConfig(name="oracle"),
        environment=EnvironmentConfig(
            import_path=IMPORT_PATH, kwargs={"root_base": str(tmp_path / "roots")}
        ),
    )
    trial = await Trial.create(config)
    session = marker(f"{trial.config.trial_name}__env")
    running = asyncio.create_task(trial.run())
    deadline = time.monotonic() + 60  # generous: the shared CI box can be slow to boot
    while not marked_pids(session) and not running.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not running.done(), f"the trial ended before it was cancelled: {running.result()}"
    assert marked_pids(session), "the oracle's sleep never started"
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert marked_pids(session) == []
    assert not any((tmp_path / "roots").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("network_line", "reward"),
    [
        ('network_mode = "no-network"', 0.0),
        ("allow_internet = false", 0.0),  # the deprecated spelling, mapped by Harbor
        ('network_mode = "public"', 1.0),
    ],
)
async def test_trial_network_policy_reaches_the_sandbox(tmp_path, network_line, reward):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    task = tmp_path / "net-task"
    shutil.copytree(DEMO_DIR / "hello-file", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace('network_mode = "no-network"', network_line))
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
    (task / "solution" / "solve.sh").write_text(
        f"#!/bin/bash\npython3 -c \"{connect}\" && printf 'Hello, Harbor!\\n' > /app/hello.txt\n"
    )
    try:
        _, result = await run_trial(task, "oracle", tmp_path / "trials")
    finally:
        server.close()
    assert result.exception_info is None, result.exception_info
    assert result.verifier_result.rewards == {"reward": reward}
