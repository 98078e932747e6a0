"""The capture app: model routes of every dialect, aux routes, and the session control plane.

A model call: the path picks the dialect -> the key picks the session -> the dialect translates the
body to one chat-completions request -> shaping -> one non-streaming engine call -> the turn is
ingested into the session's graph -> the answer goes back as JSON, or as synthetic SSE in the
dialect's own grammar (`: keepalive` comments while the engine works). The turn is committed
before the terminal event reaches the client.

Retries: the stainless SDKs (openai, anthropic) send `x-stainless-retry-count`. A retried request
whose body is identical to one already committed in the same session is answered by replaying the
committed reply: the engine is not called again and no second turn is recorded (the client lost
the first answer; sampling anew would record a turn the agent never acted on twice). Identical
bodies without that header are real resamples and become new turns (the graph marks the earlier
one discarded). A retry that arrives while the original is still in flight is a new sample too.

Keepalives: while a streaming client waits, the proxy sends the dialect's `keepalive` attribute
when it has one (e.g. `sse.BLANK_LINE` for clients whose parser reads any non-`data:` line as
JSON, like google-genai), else the SSE comment `: keepalive`.

Shared paths: `GET /v1/models` is chat's, Anthropic's and (API version v1) Google's. The dialect
whose clients' headers the request carries (`Dialect.claims`) serves it, else the first in order.

WebSocket upgrades get a plain HTTP answer at once (no dialect speaks WebSocket): for
`GET /v1/responses` the Responses dialect's 426, on which Codex falls back to HTTP without the
five reconnects Starlette's default 403 costs it.
"""

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.requests import HTTPConnection
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket

from capture import sse
from capture.dialects import anthropic, google, responses
from capture.dialects.base import ChatCall, Dialect, DialectError, Route
from capture.dialects.chat import ChatDialect
from capture.engines import EngineError, EnginePool, EngineRef
from capture.sessions import Session, SessionCounters, SessionRegistry
from capture.settings import CaptureSettings
from capture.shaping import Shaped, refusal, shape_chat_body
from capture.turns import Turn
from capture.types import LogprobsMode, Phase, Tier

log = logging.getLogger(__name__)

# Every dialect, in dispatch order. Factories, not instances: a dialect holds replay memory,
# which each app must own (two apps in one process never share it).
DIALECTS: tuple[Callable[[], Dialect], ...] = (
    ChatDialect,
    responses.ResponsesDialect,
    anthropic.AnthropicDialect,
    google.GoogleDialect,
)

RETRY_HEADER = "x-stainless-retry-count"
TOO_DEEP = "the request body nests JSON too deeply to translate: flatten it"
NO_SESSION = (
    "missing or unknown session key: create a session (POST /sessions) and send its session_id "
    "as the API key"
)


@dataclass(frozen=True)
class Arrival:
    """When a request arrived: wall clock (recorded) and monotonic clock (for durations)."""

    epoch: float
    clock: float


class ProxyError(Exception):
    """A request the proxy refuses before any engine call (4xx in the dialect's shape)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


class SessionCreate(BaseModel):
    engine: EngineRef
    labels: dict[str, str] | None = None


class EngineInfo(BaseModel):
    url: str
    model: str
    logprobs_mode: LogprobsMode
    max_model_len: int | None
    version: str | None  # the engine's own /version


class SessionCreated(BaseModel):
    session_id: str
    tier: Tier
    tier_reason: str | None
    engine: EngineInfo


class PhaseUpdate(BaseModel):
    phase: Phase


def create_capture_app(
    settings: CaptureSettings | None = None,
    registry: SessionRegistry | None = None,
    *,
    dialects: Sequence[Dialect] | None = None,
) -> FastAPI:
    """The capture proxy as an ASGI app, standalone or mounted (e.g. at `/capture`).

    settings: limits, timeouts and the admin key (defaults: loopback, no admin key).
    registry: the sessions to serve; pass the workbench's own to share it in-process. A new
        registry (with its own engine pool) is made when omitted; it is `app.state.registry`.
    dialects: the wire dialects served, in dispatch order (default: a new instance of each of
        `DIALECTS`, so this app's replay memory is its own); they are `app.state.dialects`.
    """
    settings = settings or CaptureSettings()
    dialects = tuple(dialects) if dialects is not None else tuple(make() for make in DIALECTS)
    if registry is None:
        pool = EnginePool(
            timeout_s=settings.upstream_timeout_s,
            probe_timeout_s=settings.probe_timeout_s,
            probe_ttl_s=settings.probe_ttl_s,
        )
        registry = SessionRegistry(pool, replay_window=settings.replay_window)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await registry.aclose()

    app = FastAPI(
        title="Harbor Workbench capture proxy", docs_url=None, redoc_url=None, lifespan=lifespan
    )
    app.state.settings = settings
    app.state.registry = registry
    app.state.dialects = dialects
    app.include_router(control_plane(settings, registry, dialects))
    proxy = Proxy(settings, registry, dialects)
    app.add_route("/{path:path}", proxy, include_in_schema=False)  # every method
    app.router.add_websocket_route("/{path:path}", proxy.refuse_websocket)

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.error("capture control plane failed", exc_info=exc)
        return json_response(500, {"detail": f"internal error ({type(exc).__name__})"})

    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        # Only the control plane validates with FastAPI (the proxy route reads raw bodies).
        return json_response(400, {"detail": validation_message(exc.errors())})

    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    return app


def validation_message(errors: Sequence[Any]) -> str:
    """One readable line for pydantic/FastAPI validation errors: `where: what; ...`, without
    pydantic's "Value error, " prefix and FastAPI's "body" location."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        if error.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', '')})")
            continue
        what = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc)}: {what}" if loc else what)
    return "invalid request: " + "; ".join(parts or ["the body does not match the schema"])


def control_plane(
    settings: CaptureSettings, registry: SessionRegistry, dialects: Sequence[Dialect]
) -> APIRouter:
    def require_admin(request: Request) -> None:
        if settings.admin_key:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            sent = token.strip() if scheme.lower() == "bearer" else ""
            sent = request.headers.get("x-admin-key") or sent
            if not secrets.compare_digest(sent.encode(), settings.admin_key.encode()):
                raise HTTPException(
                    401,
                    "the capture control plane needs the admin key: send it as "
                    "`Authorization: Bearer <key>` or `x-admin-key: <key>`",
                )
        elif settings.public:
            raise HTTPException(
                403,
                "the capture control plane is disabled: this server is public and has no admin "
                "key. Set one (WORKBENCH_ADMIN_KEY, or CaptureSettings.admin_key) and send it as "
                "`Authorization: Bearer <key>` or `x-admin-key: <key>`",
            )

    router = APIRouter()
    guarded = APIRouter(dependencies=[Depends(require_admin)])

    @router.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "dialects": [d.name for d in dialects]}

    @guarded.post("/sessions", status_code=201)
    async def create_session(spec: SessionCreate) -> SessionCreated:
        if refusal := settings.engine_refusal(spec.engine.url):
            raise HTTPException(400, refusal)  # before any probe: no request to that host
        session = await registry.create(spec.engine, spec.labels)
        engine = session.engine
        return SessionCreated(
            session_id=session.id,
            tier=engine.tier,
            tier_reason=engine.tier_reason,
            engine=EngineInfo(
                url=engine.ref.public_url,
                model=engine.served_model,
                logprobs_mode=engine.logprobs_mode,
                max_model_len=engine.max_model_len,
                version=engine.version,
            ),
        )

    @guarded.get("/sessions")
    async def list_sessions() -> dict[str, list[SessionCounters]]:
        return {"sessions": registry.all_counters()}

    @guarded.get("/sessions/{session_id}")
    async def get_session(session_id: str) -> SessionCounters:
        return known(session_id).counters()

    @guarded.patch("/sessions/{session_id}")
    async def update_session(session_id: str, update: PhaseUpdate) -> SessionCounters:
        session = known(session_id)
        session.phase = update.phase
        return session.counters()

    @guarded.get("/sessions/{session_id}/document")
    async def get_document(session_id: str, compact: bool = False) -> dict[str, Any]:
        return known(session_id).document(compact=compact)

    @guarded.delete("/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str) -> Response:
        if not registry.delete(session_id):
            raise HTTPException(404, f"no session {session_id!r}")
        return Response(status_code=204)

    def known(session_id: str) -> Session:
        session = registry.get(session_id)
        if session is None:
            raise HTTPException(404, f"no session {session_id!r}")
        return session

    router.include_router(guarded)
    return router


class Proxy:
    """The ASGI endpoint behind every non-control-plane path."""

    def __init__(
        self, settings: CaptureSettings, registry: SessionRegistry, dialects: Sequence[Dialect]
    ):
        self.settings = settings
        self.registry = registry
        self.dialects = dialects
        self._background: set[asyncio.Task] = set()

    async def __call__(self, scope, receive, send) -> None:
        request = Request(scope, receive)
        response = await self.respond(request)
        await response(scope, receive, send)

    async def refuse_websocket(self, websocket: WebSocket) -> None:
        """Every WebSocket upgrade gets an HTTP answer instead of 101, at once: the path's own
        answer when it is an error (the Responses 426, a 401), else a 426 saying to use HTTP."""
        response = await self.respond(websocket)
        if response.status_code < 400:  # e.g. GET /v1/models: served, but not over WebSocket
            dialect, _ = self.select("GET", websocket)
            message = "the capture proxy serves this path over plain HTTP only: send no Upgrade"
            body = dialect.error_body(426, message, "invalid_request_error")
            response = json_response(426, body)
        if "websocket.http.response" in websocket.scope.get("extensions", {}):
            await websocket.send_denial_response(response)
        else:  # a server without the ASGI denial extension answers 403 to this close
            await websocket.close()

    def select(self, method: str, request: HTTPConnection) -> tuple[Dialect, Route | None]:
        """The dialect serving this request and its route (None: no dialect serves the path,
        answer in the first dialect's shape). A path several dialects serve goes to the one
        whose clients' headers the request carries, else to the first of them."""
        path = request_path(request)
        matches = [(d, r) for d in self.dialects if (r := d.match(method, path)) is not None]
        if not matches:
            return self.dialects[0], None
        if len(matches) > 1:
            headers, query = request.headers, request.query_params
            return next((m for m in matches if m[0].claims(headers, query)), matches[0])
        return matches[0]

    async def respond(self, request: HTTPConnection) -> Response:
        arrival = Arrival(time.time(), time.perf_counter())
        # A WebSocket handshake is a GET; it has no body and no `method` in its scope.
        method = request.scope.get("method", "GET").upper()
        path = request_path(request)
        if path == "/" and method in ("GET", "HEAD"):
            body = {"service": "harbor-workbench capture proxy", "dialects": self.dialect_names}
            return json_response(200, None if method == "HEAD" else body)
        dialect, route = self.select(method, request)
        if route is None:
            message = f"no capture route for {method} {path}"
            return json_response(404, dialect.error_body(404, message, "not_found_error"))
        session: Session | None = None
        try:
            session = self.registry.get(dialect.session_key(request.headers, request.query_params))
            if session is None:
                raise ProxyError(401, NO_SESSION, "authentication_error")
            session.touch()
            return await self.dispatch(request, method, dialect, route, path, session, arrival)
        except (ProxyError, DialectError, EngineError) as exc:
            if session is not None and isinstance(exc, EngineError):
                session.record_error(exc.message)
            return json_response(exc.status, dialect.error_body(exc.status, exc.message, exc.kind))
        except RecursionError:  # client JSON deeper than a translation can recurse (~1000)
            return json_response(400, dialect.error_body(400, TOO_DEEP, "invalid_request_error"))
        except Exception as exc:  # a bug: answer in the dialect's shape, never a traceback
            return self.internal_error(dialect, session, exc)

    @property
    def dialect_names(self) -> list[str]:
        return [d.name for d in self.dialects]

    def internal_error(self, dialect: Dialect, session: Session | None, exc: Exception) -> Response:
        message = record_bug(session, exc)
        return json_response(500, dialect.error_body(500, message, "api_error"))

    async def dispatch(
        self,
        request: HTTPConnection,
        method: str,
        dialect: Dialect,
        route: Route,
        path: str,
        session: Session,
        arrival: Arrival,
    ) -> Response:
        raw = await self.read_body(request) if isinstance(request, Request) else b""
        if route.kind == "aux":
            body = parse_json(raw) if raw else None
            answer = await dialect.answer_aux(route, body, session.engine)
            content = None if method == "HEAD" else answer.body
            return json_response(answer.status, content, answer.headers)
        call = dialect.to_chat(parse_json(raw), route)
        problem = refusal(call.body)
        if problem is not None:
            raise ProxyError(400, problem)
        digest = None
        if RETRY_HEADER in request.headers:
            digest = hashlib.blake2b(path.encode() + b"\0" + raw, digest_size=16).hexdigest()
            replayed = session.replay(digest) if request.headers[RETRY_HEADER] != "0" else None
            if replayed is not None:
                return self.answer(dialect, call, replayed)
        engine = session.engine
        shaped = shape_chat_body(
            call.body,
            tier=engine.tier,
            served_model=engine.served_model,
            max_tokens_ceiling=self.settings.max_tokens_ceiling,
            max_model_len=engine.max_model_len,
        )
        work = self.complete(session, dialect, path, call, shaped, digest, arrival)
        if not call.stream:
            return self.answer(dialect, call, await work)
        return StreamingResponse(
            self.stream(session, dialect, call, work),
            media_type=sse.MEDIA_TYPE,
            headers=sse.HEADERS,
        )

    def answer(self, dialect: Dialect, call: ChatCall, reply: dict[str, Any]) -> Response:
        if call.stream:
            frames = "".join(dialect.stream(reply, call))
            return Response(frames, media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
        return json_response(200, dialect.render(reply, call))

    async def complete(
        self,
        session: Session,
        dialect: Dialect,
        path: str,
        call: ChatCall,
        shaped: Shaped,
        digest: str | None,
        arrival: Arrival,
    ) -> dict[str, Any]:
        """The engine call and the ingest of its turn; the reply is returned once committed."""
        start = time.perf_counter()
        reply = await session.engine.chat(shaped.body)
        upstream_ms = (time.perf_counter() - start) * 1000.0
        try:
            turn = turn_from_reply(reply, shaped, session)
        except (TypeError, ValueError, LookupError, AttributeError) as exc:
            raise EngineError(
                502, f"the engine's answer is not a chat completion ({exc})", "bad_gateway"
            ) from exc
        turn.dialect = dialect.name
        turn.route = path
        turn.client_stream = call.stream
        # proxy_ms: the proxy's own time so far, engine excluded (the ingest, the answer's
        # encoding and its socket write follow; bench/proxy_overhead.py measures all of it).
        proxy_ms = (time.perf_counter() - arrival.clock) * 1000.0 - upstream_ms
        turn.timings = {
            "received_at": arrival.epoch,
            "upstream_ms": round(upstream_ms, 3),
            "proxy_ms": round(proxy_ms, 3),
        }
        session.ingest(turn, digest=digest, reply=reply)
        return reply

    async def stream(
        self, session: Session, dialect: Dialect, call: ChatCall, work
    ) -> AsyncIterator[str]:
        # The engine call runs as its own task: a client that hangs up does not cancel it, so a
        # sampled answer is still committed (the graph tells whether the agent used it).
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        keepalive = getattr(dialect, "keepalive", sse.KEEPALIVE)
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=self.settings.keepalive_s)
            if not done:
                yield keepalive
        try:
            # One write for the whole answer: the turn is already committed.
            frames = "".join(dialect.stream(task.result(), call))
        except EngineError as exc:
            session.record_error(exc.message)
            frames = dialect.stream_error(exc.status, exc.message, exc.kind, call)
        except Exception as exc:  # a bug (also in dialect.stream): an error frame, not a cut
            frames = dialect.stream_error(500, record_bug(session, exc), "api_error", call)
        yield frames

    async def read_body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ProxyError(413, too_large(limit), "request_too_large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ProxyError(413, too_large(limit), "request_too_large")
            chunks.append(chunk)
        return b"".join(chunks)


def request_path(request: HTTPConnection) -> str:
    """The path a dialect matches: the app-relative path with one leading slash, no query."""
    return "/" + request.path_params.get("path", "").lstrip("/")


def turn_from_reply(reply: dict[str, Any], shaped: Shaped, session: Session) -> Turn:
    """The Turn of one engine reply (WIRE.md §2.2): ids and logprobs exactly as returned."""
    choice = reply["choices"][0]
    message = choice.get("message") or {}
    entries = (choice.get("logprobs") or {}).get("content")
    logprobs = None if entries is None else [float(e["logprob"]) for e in entries]
    usage = reply.get("usage") or {}
    engine = session.engine
    return Turn(
        prompt_ids=reply.get("prompt_token_ids"),
        completion_ids=choice.get("token_ids"),
        completion_logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
        stop_reason=choice.get("stop_reason"),
        messages=shaped.body.get("messages") or [],
        has_tools=bool(shaped.body.get("tools")),
        tools=shaped.body.get("tools") or None,
        tool_calls=list(message.get("tool_calls") or []),
        content=message.get("content"),
        reasoning=message.get("reasoning") or message.get("reasoning_content"),
        sampling_requested=shaped.sampling_requested,
        sampling_applied=shaped.sampling_applied,
        usage={k: v for k, v in usage.items() if isinstance(v, int)},
        engine=engine.ref.public_url,
        model=engine.served_model,
        tier=engine.tier,
    )


def record_bug(session: Session | None, exc: Exception) -> str:
    """Log a failure of the proxy itself on the session; the message the client gets."""
    log.error("capture proxy failed", exc_info=exc)
    if session is not None:
        session.record_error(f"internal: {type(exc).__name__}: {exc}")
    return f"internal capture error ({type(exc).__name__}); it has been recorded"


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw, parse_constant=not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProxyError(400, f"the request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ProxyError(400, TOO_DEEP) from exc
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body must be a JSON object")
    return body


def not_json(constant: str) -> Any:
    # Python's parser takes NaN and Infinity; JSON has no such numbers and engines refuse them.
    raise ValueError(f"{constant} is not a JSON number: send a finite number or null")


def too_large(limit: int) -> str:
    return f"request body over {limit} bytes: raise CaptureSettings.max_body_bytes to accept it"


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    content = b"" if body is None else sse.dumps(body).encode()
    return Response(content, status_code=status, media_type="application/json", headers=headers)
