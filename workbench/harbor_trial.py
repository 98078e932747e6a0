"""One Harbor trial: its config (the one place that builds it), the preflights, and the run
inside one hard deadline with cancellation, sandbox-creation slots, backoff on rate-limited
creates, phases from Harbor's hooks, and the guarantee that the sandbox is stopped."""

import asyncio
import contextlib
import logging
import os
import random
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from harbor.agents.factory import AgentFactory
from harbor.environments.factory import EnvironmentFactory
from harbor.models.model_api_format import ModelApiFormat
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.trial.hooks import TrialEvent, TrialHookEvent
from harbor.trial.trial import Trial

from capture.types import Dialect, Phase
from workbench.failures import Failure, describe
from workbench.sandboxes import is_local

if TYPE_CHECKING:  # only their attributes are read here
    from workbench.datasets import TaskInfo
    from workbench.harnesses import HarnessInfo
    from workbench.sandboxes import SandboxInfo

log = logging.getLogger(__name__)

# Harbor's ModelApiFormat per dialect; always passed explicitly (HARBOR.md §2.2).
API_FORMATS: dict[str, ModelApiFormat] = {
    "chat": ModelApiFormat.OPENAI_CHAT_COMPLETIONS,
    "responses": ModelApiFormat.OPENAI_RESPONSES,
    "anthropic": ModelApiFormat.ANTHROPIC_MESSAGES,
    "google": ModelApiFormat.GOOGLE_GENERATE_CONTENT,
}
# LiteLLM routes on the model prefix, so host-side LiteLLM harnesses get one per dialect (the
# Responses API is LiteLLM's `openai/` provider with model_api_format=openai_responses).
LITELLM_PREFIX: dict[str, str] = {
    "chat": "openai/",
    "responses": "openai/",
    "anthropic": "anthropic/",
    "google": "gemini/",
}
# Constructor options a harness needs to run offline against an arbitrary served model.
HARNESS_KWARGS: dict[str, dict[str, Any]] = {
    "terminus-2": {
        "record_terminal_session": False,  # else it installs asciinema from the network
        "max_turns": 50,
        "model_info": {  # LiteLLM knows nothing of the served model
            "max_input_tokens": 32768,
            "max_output_tokens": 8192,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
        },
    },
}
RATE_LIMITED = ("429", "rate limit", "ratelimit", "too many requests")
CREATE_ATTEMPTS = 4
STOP_GRACE_S = 30.0  # after a deadline or cancel: time Harbor gets to stop the sandbox

PHASES: dict[TrialEvent, Phase] = {
    TrialEvent.ENVIRONMENT_START: "booting",
    TrialEvent.AGENT_START: "agent",
    TrialEvent.VERIFICATION_START: "verifying",
}


class SessionKeys:
    """Host env vars that carry session ids to harnesses (`AgentConfig.model_api_key_name`).

    Why slots: CPython spawns children with vfork, and a vforked child reads the parent's live
    `environ` while it execs. Adding or removing a variable reallocates that array, so doing it
    while another thread spawns (every sandbox exec does) can hand the child a freed array: we
    saw `OSError: [Errno 14] Bad address: '/usr/bin/bwrap'`. Overwriting an existing variable
    only swaps one pointer (glibc keeps old strings alive), which is safe. So the `n` variables
    are created once, up front (a service builds its SessionKeys when it starts, before rollouts
    run), and rollouts only ever overwrite their values. Each instance has its own name prefix,
    so two services in one process never share a variable.
    """

    def __init__(self, n: int) -> None:
        self.prefix = f"WORKBENCH_SESSION_KEY_{secrets.token_hex(4)}_"
        self._lock = threading.Lock()
        self._free: list[str] = []
        self._count = 0
        for _ in range(n):
            self._free.append(self._create())

    def _create(self) -> str:
        """A new variable (the only place that adds to the environment); under the lock."""
        name = f"{self.prefix}{self._count}"
        os.environ[name] = ""
        self._count += 1
        return name

    def acquire(self, session_id: str) -> str:
        """A variable now holding `session_id`; give it back with `release`."""
        with self._lock:
            if not self._free:  # more rollouts than reserved: grow (rare; see the docstring)
                log.warning("session key slots exhausted; reserve more when the service starts")
                name = self._create()
            else:
                name = self._free.pop()
            os.environ[name] = session_id
            return name

    def release(self, name: str) -> None:
        with self._lock:
            os.environ[name] = ""  # overwrite, never delete (see the docstring)
            self._free.append(name)


@dataclass(frozen=True)
class ModelConnection:
    """How a harness reaches the capture proxy: its dialect, the proxy (no /v1), the name of the
    host env var holding the session id, and the served model name."""

    dialect: Dialect
    proxy_url: str
    key_name: str
    model: str


def build_trial_config(
    *,
    task: "TaskInfo",
    harness: "HarnessInfo",
    sandbox: "SandboxInfo",
    trials_dir: Path,
    connection: ModelConnection | None,
    sandbox_root: Path | None = None,
) -> TrialConfig:
    """The one place that builds Harbor's TrialConfig (DESIGN.md §4). `connection=None` for a
    harness that makes no model calls (oracle, nop). `sandbox_root`: where the local sandbox
    creates its per-trial roots (ignored by other sandboxes)."""
    identity = {"import_path": harness.name} if ":" in harness.name else {"name": harness.name}
    seams: dict[str, Any] = {}
    if connection is not None:
        dialect = connection.dialect
        openai_style = dialect in ("chat", "responses")
        seams = {
            "model_api_format": API_FORMATS[dialect],
            # The session id is read from the HOST env by this name: AgentConfig.env would be
            # exported into the sandbox shell by terminus-2 (HARBOR.md §7).
            "model_api_key_name": connection.key_name,
            "base_url": connection.proxy_url.rstrip("/") + ("/v1" if openai_style else ""),
        }
        if harness.host_side:
            seams["model_name"] = LITELLM_PREFIX[dialect] + connection.model
        else:
            seams.update(model_name=connection.model, skip_model_parsing=True)
    agent = AgentConfig(**identity, **seams, kwargs=dict(HARNESS_KWARGS.get(harness.name, {})))
    selector = "import_path" if sandbox.kind == "import_path" else "type"
    kwargs = {"root_base": str(sandbox_root)} if sandbox_root and is_local(sandbox) else {}
    environment = EnvironmentConfig(delete=True, kwargs=kwargs, **{selector: sandbox.value})
    return TrialConfig(
        task=TaskConfig(path=Path(task.path)),
        trials_dir=trials_dir,
        agent=agent,
        environment=environment,
    )


def preflight(config: TrialConfig) -> None:
    """`Trial.create` runs neither preflight (HARBOR.md §1.2); both may raise SystemExit."""
    env = config.environment
    try:
        EnvironmentFactory.run_preflight(env.type, import_path=env.import_path, kwargs=env.kwargs)
    except (Exception, SystemExit) as exc:
        raise Failure("sandbox_unavailable", describe(exc)) from exc
    try:
        AgentFactory.run_preflight(config.agent)
    except (Exception, SystemExit) as exc:
        raise Failure("agent_setup_failed", describe(exc)) from exc


class SlotGate(Protocol):
    """A concurrency limit usable from any event loop (workbench.service.Slots)."""

    async def acquire(self) -> None: ...

    def release(self) -> None: ...


class _Gate:
    """A sandbox-creation slot, held from just before boot until the agent starts."""

    def __init__(self, slots: SlotGate | None):
        self._slots = slots
        self._held = False

    async def acquire(self) -> None:
        if self._slots is not None:
            await self._slots.acquire()
            self._held = True

    def release(self) -> None:
        if self._held and self._slots is not None:
            self._held = False
            self._slots.release()


Outcome = Literal["done", "deadline", "cancelled"]


class TrialRun:
    """Runs one trial config to its end. `trial` and `result` are set as far as it got.

    deadline: `time.monotonic()` value by which everything (boot, setup, agent, verifier) ends.
    cancel: set it to stop the trial; the sandbox is stopped before `run()` returns.
    sandbox_slots: limit on concurrent sandbox creations (acquired before boot).
    on_phase: called with booting / agent / verifying as Harbor's hooks fire.
    backoff_base_s: first delay when the provider rate-limits sandbox creation.
    """

    def __init__(
        self,
        config: TrialConfig,
        *,
        deadline: float,
        cancel: asyncio.Event | None = None,
        sandbox_slots: SlotGate | None = None,
        on_phase: Callable[[Phase], None] | None = None,
        backoff_base_s: float = 2.0,
    ):
        self.config = config
        self.deadline = deadline
        self.cancel = cancel
        self.sandbox_slots = sandbox_slots
        self.on_phase = on_phase or (lambda phase: None)
        self.backoff_base_s = backoff_base_s
        self.trial: Trial | None = None
        self.result: TrialResult | None = None
        self.phase: Phase = "queued"

    async def run(self) -> None:
        """Raises Failure("timeout" | "cancelled") when the deadline or a cancel stops it;
        every other failure is in `result.exception_info`, as Harbor recorded it."""
        for attempt in range(CREATE_ATTEMPTS):
            await self._attempt(self.config.model_copy(deep=True))
            if not self._rate_limited_create() or attempt == CREATE_ATTEMPTS - 1:
                return
            delay = min(30.0, self.backoff_base_s * 2**attempt) * random.uniform(0.5, 1.5)
            if time.monotonic() + delay >= self.deadline:
                return
            log.info("sandbox creation rate-limited; retry %d in %.1fs", attempt + 1, delay)
            await self._bounded(asyncio.sleep(delay), "before its sandbox started")

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _rate_limited_create(self) -> bool:
        result = self.result
        if result is None or result.exception_info is None or result.agent_setup is not None:
            return False
        info = result.exception_info
        text = f"{info.exception_type} {info.exception_message}".lower()
        return any(mark in text for mark in RATE_LIMITED)

    async def _attempt(self, config: TrialConfig) -> None:
        gate = _Gate(self.sandbox_slots)
        try:
            # Inside the try: a slot granted just as the deadline fires is still given back.
            await self._bounded(gate.acquire(), "while waiting for a sandbox slot")
            self._set_phase("booting")
            self.trial = await self._bounded(Trial.create(config), "before its sandbox started")
            self._watch(self.trial, gate)
            task = asyncio.create_task(self.trial.run())
            try:
                outcome = await _race(task, self.cancel, self._remaining())
            except asyncio.CancelledError:  # our caller was cancelled: still stop the sandbox
                await self._stop(task)
                raise
            if outcome != "done":
                await self._stop(task)
                raise self._failure(outcome, f"in phase {self.phase}")
            self.result = task.result()
        finally:
            gate.release()

    def _watch(self, trial: Trial, gate: _Gate) -> None:
        async def on_event(event: TrialHookEvent) -> None:
            if event.event in PHASES:
                self._set_phase(PHASES[event.event])
            if event.event in (TrialEvent.AGENT_START, TrialEvent.END, TrialEvent.CANCEL):
                gate.release()

        for event in (*PHASES, TrialEvent.END, TrialEvent.CANCEL):
            trial.add_hook(event, on_event)

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        try:
            self.on_phase(phase)
        except Exception:
            log.exception("phase callback failed")

    async def _bounded[T](self, awaitable: Awaitable[T], where: str) -> T:
        return await bounded(awaitable, cancel=self.cancel, deadline=self.deadline, where=where)

    def _failure(self, outcome: Outcome, where: str) -> Failure:
        return outcome_failure(outcome, where)

    async def _stop(self, task: asyncio.Task) -> None:
        """Cancel the trial task: Harbor then stops the sandbox (shielded) and re-raises. If that
        hangs past the grace period, stop the environment ourselves: no sandbox may outlive us."""
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if self.trial is not None:
            with contextlib.suppress(RuntimeError):  # cancelled before Harbor made its result
                self.result = self.trial.result
        if task in done:
            return
        log.warning("trial did not stop within %.0fs; stopping its sandbox", STOP_GRACE_S)
        if self.trial is not None:
            try:
                await asyncio.wait_for(self.trial.agent_environment.stop(delete=True), STOP_GRACE_S)
            except Exception:
                log.exception("sandbox stop failed")
        # Never leave the trial task behind: the loop would wait on it at shutdown.
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if task in done and not task.cancelled() and task.exception() is not None:
            log.warning("the stopped trial ended with %r", task.exception())


async def bounded[T](
    awaitable: Awaitable[T], *, cancel: asyncio.Event | None, deadline: float, where: str
) -> T:
    """Await within a deadline (time.monotonic) and a cancel event, else raise the Failure that
    says which; for everything a rollout awaits before its trial task exists."""
    if cancel is not None and cancel.is_set():  # start nothing once cancelled
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise outcome_failure("cancelled", where)
    task = asyncio.ensure_future(awaitable)
    outcome = await _race(task, cancel, deadline - time.monotonic())
    if outcome == "done":
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise outcome_failure(outcome, where)


def outcome_failure(outcome: Outcome, where: str) -> Failure:
    if outcome == "deadline":
        return Failure("timeout", f"the rollout exceeded its deadline {where}")
    return Failure("cancelled", f"the rollout was cancelled {where}")


async def _race(task: asyncio.Future, cancel: asyncio.Event | None, timeout: float) -> Outcome:
    """Wait for `task` until the timeout or the cancel event, whichever comes first."""
    waiters: set[asyncio.Future] = {task}
    cancelled = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    if cancelled is not None:
        waiters.add(cancelled)
    try:
        done, _ = await asyncio.wait(
            waiters, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if cancelled is not None:
            cancelled.cancel()
    if task in done:
        return "done"
    return "cancelled" if cancelled is not None and cancelled in done else "deadline"
