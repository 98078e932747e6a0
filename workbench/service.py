"""WorkbenchService: the one object the UI, the CLI and the app share.

It owns the capture app and its session registry, the rollout store, the concurrency limits
(rollouts at once; sandbox creations at once) and, on request, the embedded reference engine.
Rollouts run either awaited on the caller's loop (`await service.run(request)`) or submitted
from synchronous code (`submit` / `status` / `cancel`), each on its own thread and event loop,
so several UI clicks and CLI rollouts progress at once.
"""

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from capture.engines import EnginePool, EngineRef
from capture.proxy import create_capture_app
from capture.serving import ThreadedServer
from capture.sessions import Session, SessionCounters, SessionRegistry
from capture.settings import CaptureSettings, is_public_host
from capture.types import Phase
from workbench.datasets import DatasetResolver
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.script import ScriptPolicy
from workbench.harbor_trial import SessionKeys
from workbench.rollout import (
    RolloutContext,
    RolloutError,
    RolloutRequest,
    RolloutResult,
    StatusCallback,
    new_rollout_id,
    run_rollout,
)
from workbench.sandboxes import SandboxCatalogue
from workbench.settings import Settings
from workbench.store import Store

log = logging.getLogger(__name__)

DEMO_SCRIPT = Path(__file__).parent / "engine" / "scripts" / "demo.json"


class Slots:
    """A counting limit shared by every thread and event loop (asyncio.Semaphore binds to one
    loop). Waiters are served first come, first served."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free = limit
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_use(self) -> int:
        with self._lock:
            return self.limit - self._free

    async def acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter = _Waiter(asyncio.get_running_loop(), asyncio.get_running_loop().create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                granted = waiter.granted
                if not granted:
                    self._waiters.remove(waiter)
            if granted:  # the slot arrived as we were cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.loop.call_soon_threadsafe(waiter.wake)
                except RuntimeError:  # that loop is closed: its waiter is gone
                    continue
                waiter.granted = True
                return
            self._free += 1

    async def __aenter__(self) -> "Slots":
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    granted: bool = False

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


RunState = Literal["queued", "running", "done"]


class RunStatus(BaseModel):
    """What the UI polls for a submitted rollout."""

    run_id: str
    state: RunState
    phase: Phase
    request: RolloutRequest
    submitted_at: float
    session: SessionCounters | None = None
    result: RolloutResult | None = None


@dataclass(eq=False)
class _Handle:
    run_id: str
    request: RolloutRequest
    submitted_at: float = field(default_factory=time.time)
    state: RunState = "queued"
    phase: Phase = "queued"
    session: Session | None = None
    result: RolloutResult | None = None
    loop: asyncio.AbstractEventLoop | None = None
    cancel_event: asyncio.Event | None = None
    cancel_requested: bool = False
    done: threading.Event = field(default_factory=threading.Event)


# What users type for "the embedded reference engine" (CLI --engine, UI, API engine_url).
EMBEDDED = "embedded"


def embedded_engine(script: Path | ScriptPolicy | None = None) -> EngineServer:
    """The CPU reference engine on a free loopback port, scripted with `script` (default: the demo
    script, which solves every demo task with terminus-2); not started yet."""
    return EngineServer(EngineConfig(script=script or DEMO_SCRIPT))


def engine_hosts(settings: Settings) -> tuple[str, ...] | None:
    """The engines sessions may use: WORKBENCH_ENGINE_HOSTS when set; else any on a local server,
    and on a public one only the configured engine's host (the embedded engine is always
    allowed, see `WorkbenchService.engine_refusal`)."""
    if settings.engine_hosts is not None:
        return tuple(h.strip() for h in settings.engine_hosts.split(",") if h.strip())
    if not (is_public_host(settings.host) or settings.space_host):
        return None
    return (urlsplit(settings.engine_url).netloc.rsplit("@", 1)[-1],) if settings.engine_url else ()


class WorkbenchService:
    """Runs rollouts against one capture app. See the module docstring.

    settings: home (store, Harbor jobs, dataset cache), limits, admin key, public URL of the proxy.
    datasets: the dataset resolver (default: the one caching under `settings.home`); pass the
        caller's own to share its cache.
    """

    def __init__(self, settings: Settings | None = None, datasets: DatasetResolver | None = None):
        self.settings = settings or Settings()
        self.datasets = datasets or DatasetResolver.for_home(self.settings.home)
        capture = CaptureSettings(
            admin_key=self.settings.admin_key,
            public=is_public_host(self.settings.host),
            max_tokens_ceiling=self.settings.max_tokens_ceiling,
            max_body_bytes=self.settings.max_body_bytes,
            engine_hosts=engine_hosts(self.settings),
        )
        self.capture = capture
        pool = EnginePool(
            timeout_s=capture.upstream_timeout_s,
            probe_timeout_s=capture.probe_timeout_s,
            probe_ttl_s=capture.probe_ttl_s,
        )
        self.registry = SessionRegistry(pool, replay_window=capture.replay_window)
        self.capture_app = create_capture_app(capture, self.registry)
        self.store = Store(self.settings.home)
        # Session-key env vars are created now, before any rollout spawns a process.
        self.session_keys = SessionKeys(max(16, 4 * self.settings.max_rollouts))
        self.sandboxes = SandboxCatalogue()  # preflight verdicts, cached across rollouts
        self.rollout_slots = Slots(self.settings.max_rollouts)
        self.sandbox_slots = Slots(self.settings.max_sandbox_creates)
        # Where harnesses reach the proxy (no /v1). Set by whoever binds the port (the app, or
        # serve_proxy()); WORKBENCH_PUBLIC_URL overrides it for sandboxes off this machine.
        self.proxy_url: str | None = self.settings.public_url
        self._runs: dict[str, _Handle] = {}
        self._lock = threading.Lock()
        self._proxy: ThreadedServer | None = None
        self._engine: EngineServer | None = None
        self._engine_lock = threading.Lock()

    # -- infrastructure ------------------------------------------------------------------------

    def serve_proxy(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the capture app with uvicorn on a daemon thread (port 0 = a free one); sets and
        returns `proxy_url`. The CLI and tests use it; the app mounts `capture_app` instead."""
        with self._lock:
            if self._proxy is None:
                self._proxy = ThreadedServer(self.capture_app, host, port, name="capture proxy")
                self._proxy.start(timeout_s=20)
                if self.settings.public_url is None:
                    self.proxy_url = self._proxy.url
        return self.proxy_url or ""

    def start_embedded_engine(self, script: Path | ScriptPolicy | None = None) -> EngineRef:
        """Start the CPU reference engine on a free loopback port, scripted with `script` (default:
        the demo script, which solves every demo task with terminus-2); returns its EngineRef.
        Idempotent: a second call returns the running engine."""
        with self._engine_lock:
            if self._engine is None:
                self._engine = embedded_engine(script).start()
            return EngineRef(url=self._engine.url)

    def engine_refusal(self, ref: EngineRef) -> str | None:
        """Why a caller may not use this engine here (a public server probes only allowed
        hosts), or None. The embedded engine is always allowed."""
        if self._engine is not None and ref.url == self._engine.url:
            return None
        return self.capture.engine_refusal(ref.url)

    def close(self) -> None:
        """Stop the proxy thread and the embedded engine; cancel nothing (runs finish alone)."""
        if self._proxy is not None:
            self._proxy.stop()
            self._proxy = None
        if self._engine is not None:
            self._engine.stop()
            self._engine = None
        self.store.close()

    # -- running rollouts ----------------------------------------------------------------------

    async def run(
        self,
        request: RolloutRequest,
        on_status: StatusCallback | None = None,
        *,
        cancel: asyncio.Event | None = None,
        on_session: Callable[[Session], None] | None = None,
        rollout_id: str | None = None,
    ) -> RolloutResult:
        """Run one rollout on the running loop, within the concurrency limits."""
        if self.proxy_url is None:
            await asyncio.to_thread(self.serve_proxy)
        context = RolloutContext(
            registry=self.registry,
            proxy_url=self.proxy_url or "",
            store=self.store,
            datasets=self.datasets,
            session_keys=self.session_keys,
            sandboxes=self.sandboxes,
            sandbox_slots=self.sandbox_slots,
            sandbox_root=self.settings.sandbox_root,
            cancel=cancel,
            on_status=on_status,
            on_session=on_session,
        )
        # Cancelled while queued: no slot is held and the rollout ends at once as `cancelled`.
        holding = await self._queue(cancel)
        try:
            return await run_rollout(request, context, rollout_id=rollout_id)
        finally:
            if holding:
                self.rollout_slots.release()

    async def _queue(self, cancel: asyncio.Event | None) -> bool:
        """Wait for a rollout slot; False (holding none) when `cancel` is set first."""
        if cancel is None:
            await self.rollout_slots.acquire()
            return True
        slot = asyncio.ensure_future(self.rollout_slots.acquire())
        cancelled = asyncio.ensure_future(cancel.wait())
        await asyncio.wait({slot, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        cancelled.cancel()
        if slot.done():
            return True
        slot.cancel()  # Slots passes a slot granted meanwhile on to the next waiter
        await asyncio.gather(slot, return_exceptions=True)
        return False

    def submit(self, request: RolloutRequest) -> str:
        """Start a rollout on its own thread and event loop; returns its run id at once."""
        handle = _Handle(run_id=new_rollout_id(), request=request)
        with self._lock:
            self._runs[handle.run_id] = handle
        thread = threading.Thread(
            target=asyncio.run,
            args=(self._background(handle),),
            name=f"rollout-{handle.run_id}",
            daemon=True,
        )
        thread.start()
        return handle.run_id

    async def _background(self, handle: _Handle) -> None:
        with self._lock:
            handle.loop = asyncio.get_running_loop()
            handle.cancel_event = asyncio.Event()
            if handle.cancel_requested:
                handle.cancel_event.set()
            handle.state = "running"

        def on_status(phase: Phase) -> None:
            handle.phase = phase

        def on_session(session: Session) -> None:
            handle.session = session

        try:
            handle.result = await self.run(
                handle.request,
                on_status,
                cancel=handle.cancel_event,
                on_session=on_session,
                rollout_id=handle.run_id,
            )
        except BaseException as exc:  # run() never raises; this guards the thread itself
            log.exception("rollout %s crashed", handle.run_id)
            handle.result = RolloutResult(
                id=handle.run_id,
                ok=False,
                error=RolloutError(kind="internal", message=f"{type(exc).__name__}: {exc}"),
            )
        finally:
            handle.state = "done"
            handle.phase = "done"
            await self.registry.aclose()  # this loop's engine clients die with the loop
            handle.done.set()

    def status(self, run_id: str) -> RunStatus:
        """The live state of a submitted rollout; KeyError for an unknown run id."""
        with self._lock:
            handle = self._runs[run_id]
        counters = handle.session.counters() if handle.session is not None else None
        return RunStatus(
            run_id=run_id,
            state=handle.state,
            phase=handle.phase,
            request=handle.request,
            submitted_at=handle.submitted_at,
            session=counters,
            result=handle.result,
        )

    def runs(self) -> list[RunStatus]:
        with self._lock:
            ids = list(self._runs)
        return [self.status(run_id) for run_id in ids]

    def wait(self, run_id: str, timeout: float | None = None) -> RolloutResult | None:
        """Block until a submitted rollout is done (None on timeout)."""
        with self._lock:
            handle = self._runs[run_id]
        handle.done.wait(timeout)
        return handle.result

    def cancel(self, run_id: str) -> bool:
        """Ask a submitted rollout to stop (its sandbox is stopped; the result says
        `cancelled`). False when the run is unknown or already done."""
        with self._lock:
            handle = self._runs.get(run_id)
            if handle is None or handle.state == "done":
                return False
            handle.cancel_requested = True
            loop, event = handle.loop, handle.cancel_event
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop just closed: the run is finishing anyway
                return False
        return True
