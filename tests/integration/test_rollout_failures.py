"""Every way a rollout fails comes back as ok=False with a typed kind, the right reward (None when
never graded, never 0), and no sandbox process left behind."""

import asyncio
import socket
import time

import pytest

from capture.document import validate_document
from capture.engines import EngineRef
from tests.fixtures.rollouts import (
    FIXTURE_TASKS,
    leftover_processes,
    needs_local_sandbox,
    sandboxed_environments,
    scripted_policy,
)
from tests.fixtures.sandboxes import RateLimitedOnceSandbox
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.rollout import RolloutRequest, RolloutResult
from workbench.service import WorkbenchService

pytestmark = [pytest.mark.slow, needs_local_sandbox]


def _request(service: WorkbenchService, task: str, **over) -> RolloutRequest:
    fields = dict(
        dataset=str(FIXTURE_TASKS),
        task=task,
        harness="terminus-2",
        sandbox="local",
        engine=service.start_embedded_engine(),
        timeout_s=90,
    )
    fields.update(over)
    return RolloutRequest(**fields)


def _assert_failed(result: RolloutResult, kind: str) -> None:
    assert result.ok is False
    assert result.error is not None and result.error.kind == kind, result.error
    assert result.document_path is not None
    if result.trial_dir is not None:
        assert leftover_processes(result.trial_dir.rsplit("/", 1)[-1]) == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_engine_unreachable(service):
    dead = EngineRef(url=f"http://127.0.0.1:{_closed_port()}")
    result = await service.run(_request(service, "two-keys", engine=dead))
    _assert_failed(result, "engine_unreachable")
    assert result.reward is None and result.trial_dir is None  # no sandbox was ever created
    assert "127.0.0.1" in result.error.message
    assert validate_document(result.document) == []


async def test_verifier_without_reward_file_is_none_not_zero(service):
    result = await service.run(_request(service, "no-reward"))
    _assert_failed(result, "verifier_failed")
    assert result.reward is None and result.rewards is None
    assert result.turns >= 2  # the agent did run
    assert result.document["reward"] is None


async def test_two_reward_keys_without_reward_key_is_ambiguous(service):
    result = await service.run(_request(service, "two-keys"))
    _assert_failed(result, "reward_ambiguous")
    assert result.reward is None
    assert result.rewards == {"passed": 1, "style": 0.5}  # verbatim
    assert "reward_key" in result.error.message


async def test_two_reward_keys_with_reward_key_is_ok(service):
    result = await service.run(_request(service, "two-keys", reward_key="style"))
    assert result.ok, result.error
    assert (result.reward, result.reward_key) == (0.5, "style")


async def test_rollout_sandbox_roots_stay_under_the_service_home_not_shared_tmp(service):
    result = await service.run(_request(service, "two-keys", harness="nop"))
    assert result.trial_dir is not None  # a sandbox was made
    roots = service.settings.home / "sandboxes"
    assert roots.is_dir() and list(roots.iterdir()) == []  # made there, removed after the trial


async def test_nop_harness_makes_no_model_calls(service):
    result = await service.run(_request(service, "two-keys", harness="nop"))
    _assert_failed(result, "no_model_calls")
    assert result.turns == 0
    assert result.rewards == {"passed": 1, "style": 0.5}  # the verifier still ran


async def test_deadline_stops_the_agent_and_the_sandbox(service):
    started = time.monotonic()
    result = await service.run(_request(service, "sleeper", timeout_s=12))
    _assert_failed(result, "timeout")
    assert time.monotonic() - started < 12 + 40  # deadline + Harbor's shielded stop
    assert result.reward is None
    assert result.atif.verdict in ("match", "none")  # the cut-off call is not a mismatch
    assert result.trial_dir is not None


async def test_cancellation_mid_run_stops_the_sandbox(service):
    run_id = service.submit(_request(service, "sleeper", timeout_s=120))
    deadline = time.monotonic() + 60
    while service.status(run_id).phase != "agent":
        assert time.monotonic() < deadline, service.status(run_id)
        await asyncio.sleep(0.1)
    while (service.status(run_id).session.turns if service.status(run_id).session else 0) < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    # The sandbox is running the agent's `sleep 300`: its processes must not see the session id
    # (the harness's API key lives in the host env of the Harbor process only).
    inside = sandboxed_environments()
    assert inside, "expected the sandbox's processes to be running"
    session_id = service.status(run_id).session.session_id.encode()
    assert not [env for env in inside if session_id in env]
    assert service.cancel(run_id) is True
    result = await asyncio.to_thread(service.wait, run_id, 60)
    assert result is not None
    _assert_failed(result, "cancelled")
    assert result.reward is None
    assert service.status(run_id).state == "done"
    assert service.cancel(run_id) is False  # already done


async def test_sandbox_whose_preflight_fails_is_unavailable(service):
    sandbox = "tests.fixtures.sandboxes:NoCredentialsSandbox"
    before = set(service.store.jobs_dir.rglob("result.json"))
    result = await service.run(_request(service, "two-keys", sandbox=sandbox))
    _assert_failed(result, "sandbox_unavailable")
    assert "NOCRED_API_KEY" in result.error.message  # says what to do
    assert result.reward is None and result.trial_dir is None
    assert set(service.store.jobs_dir.rglob("result.json")) == before  # no trial ran


async def test_rate_limited_sandbox_creation_is_retried_with_backoff(service):
    RateLimitedOnceSandbox.creates = 0
    sandbox = "tests.fixtures.sandboxes:RateLimitedOnceSandbox"
    started = time.monotonic()
    result = await service.run(_request(service, "two-keys", sandbox=sandbox, reward_key="style"))
    assert result.ok, result.error
    assert RateLimitedOnceSandbox.creates == 2  # refused once, then created
    assert time.monotonic() - started >= 1.0  # waited (jittered 2 s x [0.5, 1.5]) before retrying
    assert leftover_processes(result.trial_dir.rsplit("/", 1)[-1]) == []


async def test_engine_without_token_ids_is_not_trainable(service):
    with EngineServer(EngineConfig(token_ids=False)) as engine:
        result = await service.run(_request(service, "two-keys", engine=EngineRef(url=engine.url)))
    _assert_failed(result, "engine_not_trainable")
    assert result.tier in ("logprobs", "text") and result.trial_dir is None
    assert "tokens" in result.error.message


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini-cli"])
async def test_in_sandbox_harness_on_no_network_task_in_local_sandbox_is_refused_up_front(
    service, harness
):
    # Harbor would turn no-network into an allowlist (the proxy host) that bubblewrap cannot
    # enforce: Trial.create raised ValueError, reported as `internal` with a traceback.
    result = await service.run(_request(service, "two-keys", harness=harness))
    _assert_failed(result, "sandbox_unavailable")
    assert result.trial_dir is None  # refused before any trial
    message = result.error.message
    assert "allowlist" in message and "terminus-2" in message and "docker" in message
    assert "Traceback" not in message and validate_document(result.document) == []


async def test_unknown_task_is_invalid_request_not_internal(service):
    result = await service.run(_request(service, "no-such-task"))
    _assert_failed(result, "invalid_request")
    assert "no-such-task" in result.error.message and "two-keys" in result.error.message
    assert result.session_id is None and validate_document(result.document) == []
    assert result.document["error"]["kind"] == "invalid_request"
    assert service.store.get_document(result.id) == result.document


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("dataset", "/no/such/dataset", "/no/such/dataset"),
        ("harness", "no-such-harness", "no-such-harness"),
        ("sandbox", "no-such-sandbox", "no-such-sandbox"),
        ("dialect", "google", "terminus-2"),
    ],
)
async def test_unknown_dataset_harness_sandbox_or_dialect_is_invalid_request(
    service, field, value, named
):
    result = await service.run(_request(service, "two-keys", **{field: value}))
    _assert_failed(result, "invalid_request")
    assert named in result.error.message and result.trial_dir is None


async def test_engine_lost_mid_rollout_is_engine_unreachable(service):
    with EngineServer(EngineConfig(script=scripted_policy())) as engine:
        ref = EngineRef(url=engine.url)
        run_id = service.submit(_request(service, "engine-dies", engine=ref))
        deadline = time.monotonic() + 60
        while (service.status(run_id).session.turns if service.status(run_id).session else 0) < 1:
            assert time.monotonic() < deadline, service.status(run_id)
            await asyncio.sleep(0.05)
    # The engine is gone before the agent's second call (it waits 2 s for `sleep 2`).
    result = await asyncio.to_thread(service.wait, run_id, 120)
    _assert_failed(result, "engine_unreachable")
    assert "unreachable" in result.error.message and result.turns == 1


async def test_cancel_while_the_engine_probe_hangs_is_cancelled_at_once(service):
    # An engine that accepts connections and never answers: the probe would wait its own
    # timeout (20 s per request); the rollout's cancel and deadline must cover it too.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        engine = EngineRef(url=f"http://127.0.0.1:{silent.getsockname()[1]}")
        run_id = service.submit(_request(service, "two-keys", engine=engine, timeout_s=60))
        await asyncio.sleep(1.0)
        assert service.status(run_id).state != "done"
        started = time.monotonic()
        assert service.cancel(run_id) is True
        result = await asyncio.to_thread(service.wait, run_id, 30)
    assert result is not None
    assert time.monotonic() - started < 5
    _assert_failed(result, "cancelled")
    assert "probing the engine" in result.error.message
    assert result.reward is None and result.trial_dir is None
