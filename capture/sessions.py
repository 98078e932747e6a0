"""Sessions: the capture scope of one rollout, and the registry that holds them.

A session id is an unguessable token; it is also the API key the harness sends, so the proxy only
ever serves calls that carry a registered id. The registry is shared by the proxy's event loop and
the workbench's threads and loops: it is guarded by `threading.Lock`s, never `asyncio.Lock`s
(those bind to one loop).
"""

import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from capture.document import DocumentMeta, build_document
from capture.engines import EngineHandle, EnginePool, EngineRef
from capture.graph import RolloutGraph
from capture.turns import Turn
from capture.types import Phase, Tier
from capture.validate import Finding, check_turn

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

Listener = Callable[["Session", int, Turn], None]


def new_session_id() -> str:
    # token_urlsafe may start with "-" or "_": the prefix keeps ids valid file names.
    return "s" + secrets.token_urlsafe(24)


def read_session_key(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The session id a client sent, in WIRE.md §7.3 order: `x-session-id`, `?session_id=`,
    `?key=`, `Authorization: Bearer`, `x-api-key`, `x-goog-api-key`. Header names are
    case-insensitive (Starlette's Headers)."""
    bearer = headers.get("authorization", "")
    scheme, _, token = bearer.partition(" ")
    candidates = (
        headers.get("x-session-id"),
        query.get("session_id"),
        query.get("key"),
        token.strip() if scheme.lower() == "bearer" else None,
        headers.get("x-api-key"),
        headers.get("x-goog-api-key"),
    )
    return next((c for c in candidates if c), None)


class SessionCounters(BaseModel):
    """Live view of one session. `seconds_since_last_call` is None until the first call."""

    session_id: str
    phase: Phase
    tier: Tier
    tier_reason: str | None
    engine: str
    engine_version: str | None
    model: str
    turns: int
    roots: int
    forks: int
    discarded: int
    prompt_tokens: int
    completion_tokens: int
    errors: int
    last_error: str | None
    seconds_since_last_call: float | None
    created_at: float
    labels: dict[str, str]


@dataclass(eq=False)
class Session:
    """One rollout's capture: its engine, graph, findings and live counters."""

    id: str
    engine: EngineHandle
    labels: dict[str, str] = field(default_factory=dict)
    replay_window: int = 8
    created_at: float = field(default_factory=time.time)
    phase: Phase = "queued"
    graph: RolloutGraph = field(default_factory=RolloutGraph)
    findings: list[Finding] = field(default_factory=list)
    errors: int = 0
    last_error: str | None = None
    last_call_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _listeners: list[Listener] = field(default_factory=list, repr=False)
    _replies: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict, repr=False)

    @property
    def tier(self) -> Tier:
        return self.engine.tier

    def add_listener(self, fn: Listener) -> None:
        """`fn(session, index, turn)` runs after each ingest (outside the lock: it may read the
        graph through `with_graph`), on the proxy's loop: keep it quick (e.g. append a JSONL line). A listener that raises is logged and counted as an
        error; it never fails the agent's call."""
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.remove(fn)

    def touch(self) -> None:
        self.last_call_at = time.time()

    def ingest(self, turn: Turn, *, digest: str | None = None, reply: Any = None) -> int:
        """Add a turn to the graph, validate it, remember its reply for retries, notify."""
        with self._lock:
            index = self.graph.add(turn)
            self.findings.extend(check_turn(turn, turn.tier, index))
            if digest is not None and self.replay_window:
                self._replies[digest] = reply
                while len(self._replies) > self.replay_window:
                    self._replies.popitem(last=False)
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(self, index, turn)
            except Exception as exc:  # a listener's bug must not fail the agent's call
                log.exception("session %s listener %r failed", self.id, fn)
                self.record_error(f"listener failed: {type(exc).__name__}: {exc}")
        return index

    def replay(self, digest: str) -> Any:
        """The committed reply to an identical earlier request, if still remembered."""
        with self._lock:
            return self._replies.get(digest)

    def with_graph[T](self, fn: Callable[[RolloutGraph], T]) -> T:
        """`fn(graph)` under the session's lock: the proxy may ingest a turn at any moment, and
        the graph is not thread-safe by itself. Read (or edit) the graph only this way."""
        with self._lock:
            return fn(self.graph)

    def all_findings(self) -> list[Finding]:
        """A copy of the findings so far (ingest appends to them)."""
        with self._lock:
            return list(self.findings)

    def add_findings(self, findings: list[Finding]) -> None:
        with self._lock:
            self.findings.extend(findings)

    def record_error(self, message: str) -> None:
        with self._lock:
            self.errors += 1
            self.last_error = message

    def counters(self) -> SessionCounters:
        with self._lock:
            graph = self.graph.counters()
            errors, last_error = self.errors, self.last_error
        last = self.last_call_at
        return SessionCounters(
            session_id=self.id,
            phase=self.phase,
            tier=self.tier,
            tier_reason=self.engine.tier_reason,
            engine=self.engine.ref.public_url,
            engine_version=self.engine.version,
            model=self.engine.served_model,
            turns=graph["turns"],
            roots=graph["roots"],
            forks=graph["forks"],
            discarded=graph["discarded"],
            prompt_tokens=graph["prompt_tokens"],
            completion_tokens=graph["completion_tokens"],
            errors=errors,
            last_error=last_error,
            seconds_since_last_call=None if last is None else round(time.time() - last, 3),
            created_at=self.created_at,
            labels=dict(self.labels),
        )

    def default_meta(self) -> DocumentMeta:
        """What the session itself knows about its rollout (the workbench adds the rest)."""
        return DocumentMeta(
            ids={"session": self.id},
            engine={
                "url": self.engine.ref.public_url,
                "model": self.engine.served_model,
                "tier": self.tier,
                "logprobs_mode": self.engine.logprobs_mode,
                "version": self.engine.version,
            },
            labels=dict(self.labels),
        )

    def document(self, meta: DocumentMeta | None = None, *, compact: bool = False) -> dict:
        with self._lock:
            return build_document(
                self.graph, list(self.findings), meta or self.default_meta(), compact=compact
            )


class SessionRegistry:
    """All live sessions of one capture app; safe across threads and event loops.

    pool: the engine pool sessions share (a new one when omitted).
    replay_window: recent replies per session kept to answer SDK retries (see proxy.py).
    """

    def __init__(self, pool: EnginePool | None = None, *, replay_window: int = 8):
        self.pool = pool or EnginePool()
        self.replay_window = replay_window
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    async def create(
        self,
        engine: EngineRef,
        labels: Mapping[str, str] | None = None,
        *,
        refresh_probe: bool = False,
    ) -> Session:
        """Probe the engine (reusing a recent probe unless `refresh_probe`) and open a session on
        it. Never raises for an unreachable engine: the session's tier is then `text`, with the
        reason."""
        handle = await self.pool.get(engine, refresh=refresh_probe)
        session = Session(
            new_session_id(), handle, dict(labels or {}), replay_window=self.replay_window
        )
        with self._lock:
            self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            return self._sessions.get(session_id)

    def require(self, session_id: str) -> Session:
        session = self.get(session_id)
        if session is None:
            raise KeyError(f"no session {session_id!r}")
        return session

    def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def counters(self, session_id: str) -> SessionCounters:
        return self.require(session_id).counters()

    def all_counters(self) -> list[SessionCounters]:
        return [s.counters() for s in self.sessions()]

    def set_phase(self, session_id: str, phase: Phase) -> None:
        self.require(session_id).phase = phase

    def document(
        self, session_id: str, meta: DocumentMeta | None = None, *, compact: bool = False
    ) -> dict:
        return self.require(session_id).document(meta, compact=compact)

    async def aclose(self) -> None:
        """Close the engine clients of the running event loop."""
        await self.pool.aclose()
