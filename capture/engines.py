"""Engines: where model calls go, what each one was measured to return (its tier), and the
pooled connections that reach them.

Connections are bound to the event loop that opened them, and sessions are created from the
workbench's loops while the proxy serves on its own: the pool keeps one `Upstream` (keep-alive
connections, capture/upstream.py) per (event loop, engine) and one probe per engine (url, model,
auth), shared by every loop. A probe is trusted for `probe_ttl_s` only: an engine restarted with
other flags on the same URL (e.g. raw logprobs) must not keep its old tier.
"""

import asyncio
import concurrent.futures
import json
import ssl
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from capture.types import LogprobsMode, Tier
from capture.upstream import Reply, Upstream, UpstreamError

PROBE_MESSAGES = [{"role": "user", "content": "Say one word."}]
# Two temperatures, same seed: processed logprobs follow the temperature, raw ones do not.
PROBE_TEMPERATURES = (1.0, 2.0)
SAME_LOGPROB = 1e-3  # nats; raw logprobs at T=1 and T=2 agree to float precision


class EngineRef(BaseModel):
    """An engine as a caller names it.

    url: base URL of an OpenAI-compatible server, with or without a trailing `/v1`.
    model: served model name to use; None = the first model the engine lists.
    api_key: the engine's own key, sent upstream as `Authorization: Bearer`.
    """

    model_config = ConfigDict(frozen=True)

    url: str = Field(min_length=1)
    model: str | None = None
    api_key: str | None = Field(default=None, repr=False)

    @field_validator("url")
    @classmethod
    def _base_url(cls, url: str) -> str:
        url = url.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"engine url must be http(s)://host[:port], got {url!r}")
        return url.removesuffix("/v1")

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return (self.url, self.model, self.api_key)

    @property
    def public_url(self) -> str:
        """The URL without credentials (safe to log, store and show)."""
        parts = urlsplit(self.url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class Probe:
    """What an engine was measured to return. `tier_reason` says how to reach `tokens`;
    `version` is what its `/version` says (None when it serves none)."""

    tier: Tier
    tier_reason: str | None
    served_model: str
    logprobs_mode: LogprobsMode
    max_model_len: int | None = None
    reachable: bool = True
    version: str | None = None


class EngineError(Exception):
    """An engine call that failed. `status` is what the client gets (4xx passed through,
    502 for an unreachable engine or its 5xx, 504 for a timeout)."""

    def __init__(self, status: int, message: str, kind: str):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


class EngineHandle:
    """A probed engine. Its methods may be awaited from any event loop."""

    def __init__(self, ref: EngineRef, probe: Probe, pool: "EnginePool"):
        self.ref = ref
        self.probe = probe
        self._pool = pool

    @property
    def tier(self) -> Tier:
        return self.probe.tier

    @property
    def tier_reason(self) -> str | None:
        return self.probe.tier_reason

    @property
    def served_model(self) -> str:
        return self.probe.served_model

    @property
    def logprobs_mode(self) -> LogprobsMode:
        return self.probe.logprobs_mode

    @property
    def max_model_len(self) -> int | None:
        return self.probe.max_model_len

    @property
    def version(self) -> str | None:
        return self.probe.version

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/chat/completions (non-streaming); raises EngineError."""
        return await self._pool.request(self.ref, "POST", "/v1/chat/completions", body)

    async def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /tokenize with a chat body; the served model is filled in."""
        return await self._pool.request(
            self.ref, "POST", "/tokenize", {**body, "model": self.served_model}
        )

    async def detokenize(self, ids: list[int]) -> str:
        body = {"model": self.served_model, "tokens": list(ids)}
        reply = await self._pool.request(self.ref, "POST", "/detokenize", body)
        return str(reply.get("prompt", ""))


class EnginePool:
    """One probe per engine, one `Upstream` per (event loop, engine); safe across threads.

    timeout_s: how long one engine call may take (then EngineError 504).
    probe_timeout_s: how long each probe request may take.
    probe_ttl_s: how long a successful probe is reused before the engine is probed again.
    """

    def __init__(
        self,
        *,
        timeout_s: float = 600.0,
        probe_timeout_s: float = 20.0,
        probe_ttl_s: float = 60.0,
    ):
        self.timeout_s, self.probe_timeout_s = timeout_s, probe_timeout_s
        self.probe_ttl_s = probe_ttl_s
        self.connect_s = min(10.0, timeout_s)
        self._ssl: ssl.SSLContext | None = None  # loading CA certificates is slow: once
        self._lock = threading.Lock()
        self._probes: dict[tuple, tuple[Probe, float]] = {}  # key -> (probe, monotonic time)
        self._probing: dict[tuple, concurrent.futures.Future[Probe]] = {}
        self._upstreams: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple, Upstream]
        ] = weakref.WeakKeyDictionary()

    async def get(self, ref: EngineRef, *, refresh: bool = False) -> EngineHandle:
        """The engine, probed at most once per `probe_ttl_s`. `refresh` ignores the cached probe
        (a probe already running is joined, not repeated). An unreachable engine is not cached:
        it is probed again next time (it may just be booting)."""
        with self._lock:
            cached = self._probes.get(ref.key)
            fresh = cached is not None and time.monotonic() - cached[1] < self.probe_ttl_s
            probe = cached[0] if fresh and not refresh else None
            pending = self._probing.get(ref.key) if probe is None else None
            owner = probe is None and pending is None
            if owner:
                pending = self._probing[ref.key] = concurrent.futures.Future()
        if probe is not None:
            return EngineHandle(ref, probe, self)
        assert pending is not None
        if not owner:
            return EngineHandle(ref, await asyncio.wrap_future(pending), self)
        try:
            probe = await self._probe(ref)
        except BaseException as exc:
            with self._lock:
                del self._probing[ref.key]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._probing[ref.key]
            if probe.reachable:
                self._probes[ref.key] = (probe, time.monotonic())
            else:
                self._probes.pop(ref.key, None)
        pending.set_result(probe)
        return EngineHandle(ref, probe, self)

    def upstream(self, ref: EngineRef) -> Upstream:
        """The connections to this engine of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            upstreams = self._upstreams.setdefault(loop, {})
            upstream = upstreams.get(ref.key)
            if upstream is None:
                upstream = upstreams[ref.key] = self._new_upstream(ref)
        return upstream

    def _new_upstream(self, ref: EngineRef) -> Upstream:
        if ref.url.startswith("https:") and self._ssl is None:
            self._ssl = ssl.create_default_context()
        auth = {"authorization": f"Bearer {ref.api_key}"} if ref.api_key else {}
        return Upstream(ref.url, auth, ssl_context=self._ssl)

    async def aclose(self) -> None:
        """Close the connections of the running event loop (other loops close their own)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            upstreams = list(self._upstreams.pop(loop, {}).values())
        for upstream in upstreams:
            await upstream.aclose()

    async def request(
        self,
        ref: EngineRef,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        upstream: Upstream | None = None,
    ) -> dict[str, Any]:
        """One engine call; every failure becomes an EngineError with the client's status."""
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        try:
            reply = await (upstream or self.upstream(ref)).request(
                method,
                path,
                payload,
                timeout_s=timeout_s or self.timeout_s,
                connect_s=min(self.connect_s, timeout_s or self.connect_s),
            )
        except UpstreamError as exc:
            if exc.kind == "timeout":
                message = f"engine at {ref.public_url} timed out ({exc})"
                raise EngineError(504, message, "timeout") from exc
            raise EngineError(
                502,
                f"engine at {ref.public_url} is unreachable ({exc}): start it or fix the engine URL",
                "engine_unreachable",
            ) from exc
        return _json_or_error(ref, reply)

    async def _probe(self, ref: EngineRef) -> Probe:
        # Own connections, closed at once: the probing loop may never call this engine again.
        upstream = self._new_upstream(ref)
        try:
            return await self._probe_with(ref, upstream)
        finally:
            await upstream.aclose()

    async def _probe_with(self, ref: EngineRef, upstream: Upstream) -> Probe:
        timeout_s = self.probe_timeout_s
        try:
            models = await self.request(
                ref, "GET", "/v1/models", timeout_s=timeout_s, upstream=upstream
            )
        except EngineError as exc:
            return Probe(
                "text", exc.message, ref.model or "", "unknown", reachable=exc.status < 500
            )
        served = [m for m in models.get("data") or [] if isinstance(m, dict) and m.get("id")]
        if not served:
            return Probe(
                "text", "the engine lists no model on /v1/models", ref.model or "", "unknown"
            )
        names = [m["id"] for m in served]
        chosen = next((m for m in served if m["id"] == ref.model), None)
        if ref.model is not None and chosen is None:
            reason = f"the engine does not serve model {ref.model!r}; it serves {names}"
            return Probe("text", reason, ref.model, "unknown")
        chosen = chosen or served[0]
        max_len = chosen.get("max_model_len")
        tier, reason, mode = await self._measure(ref, chosen["id"], upstream)
        return Probe(
            tier,
            reason,
            chosen["id"],
            mode,
            max_len if isinstance(max_len, int) else None,
            version=await self._version(ref, upstream),
        )

    async def _version(self, ref: EngineRef, upstream: Upstream) -> str | None:
        """vLLM's `GET /version` ({"version": "0.10.2"}); an engine without it has no version."""
        try:
            reply = await self.request(
                ref, "GET", "/version", timeout_s=self.probe_timeout_s, upstream=upstream
            )
        except EngineError:
            return None
        found = reply.get("version")
        return str(found) if isinstance(found, str | int | float) and found != "" else None

    async def _measure(
        self, ref: EngineRef, model: str, upstream: Upstream
    ) -> tuple[Tier, str | None, LogprobsMode]:
        """Ask for ids and logprobs at two temperatures and judge what came back."""
        replies = []
        for temperature in PROBE_TEMPERATURES:
            body = {
                "model": model,
                "messages": PROBE_MESSAGES,
                "max_tokens": 1,
                "temperature": temperature,
                "seed": 0,
                "top_p": 1.0,
                "top_k": 0,
                "logprobs": True,
                "top_logprobs": 2,
                "return_token_ids": True,
                "stream": False,
            }
            try:
                replies.append(
                    await self.request(
                        ref,
                        "POST",
                        "/v1/chat/completions",
                        body,
                        timeout_s=self.probe_timeout_s,
                        upstream=upstream,
                    )
                )
            except EngineError as exc:
                return "text", f"the probe chat call failed: {exc.message}", "unknown"
        return judge_probe(replies[0], replies[1])


def judge_probe(cold: dict[str, Any], hot: dict[str, Any]) -> tuple[Tier, str | None, LogprobsMode]:
    """Tier from two one-token replies at temperature 1 (`cold`) and 2 (`hot`)."""
    choice = (cold.get("choices") or [{}])[0]
    entries = (choice.get("logprobs") or {}).get("content")
    if not entries:
        return "text", "the engine returned no logprobs: it is not vLLM-compatible", "unknown"
    mode = logprobs_mode(entries[0], ((hot.get("choices") or [{}])[0].get("logprobs") or {}))
    ids, prompt_ids = choice.get("token_ids"), cold.get("prompt_token_ids")
    if not ids or not prompt_ids:
        reason = (
            "the engine returned no token ids: use vLLM >= 0.10.2 (return_token_ids) "
            "without --no-token-ids"
        )
        return "logprobs", reason, mode
    if len(ids) != len(entries):
        return "logprobs", f"token ids ({len(ids)}) and logprobs ({len(entries)}) differ", mode
    if mode == "raw_logprobs":
        reason = (
            "the engine returns raw logprobs (before temperature and sampling): "
            "start vLLM with --logprobs-mode processed_logprobs"
        )
        return "logprobs", reason, mode
    if mode == "unknown":
        reason = (
            "could not tell processed from raw logprobs (the probe got no usable top-2 "
            "alternatives): start vLLM with --logprobs-mode processed_logprobs --max-logprobs 2"
        )
        return "logprobs", reason, mode
    return "tokens", None, mode


def logprobs_mode(cold_entry: dict[str, Any], hot_logprobs: dict[str, Any]) -> LogprobsMode:
    """Processed logprobs are of logits/T: the top-2 gap halves from T=1 to T=2; raw do not move.

    Entries are in engine order (sampled token first, WIRE.md §2.1), so tokens are matched by
    name, and the argmax (present in every top-2) anchors the comparison.
    """
    hot_entries = hot_logprobs.get("content") or []
    if not hot_entries:
        return "unknown"
    cold, hot = _alternatives(cold_entry), _alternatives(hot_entries[0])
    if not cold or not hot:
        return "unknown"
    top = max(cold, key=cold.__getitem__)
    if top not in hot:
        return "unknown"
    shared = [t for t in cold if t in hot and t != top]
    if shared:  # the same runner-up at both temperatures: compare the gaps
        gap_cold = cold[top] - cold[shared[0]]
        gap_hot = hot[top] - hot[shared[0]]
        if gap_cold > SAME_LOGPROB:
            return (
                "raw_logprobs" if abs(gap_hot - gap_cold) < SAME_LOGPROB else "processed_logprobs"
            )
    if abs(hot[top] - cold[top]) > SAME_LOGPROB:
        return "processed_logprobs"
    return "unknown" if cold[top] > -SAME_LOGPROB else "raw_logprobs"


def _alternatives(entry: dict[str, Any]) -> dict[str, float]:
    return {
        str(alt.get("token")): float(alt["logprob"])
        for alt in entry.get("top_logprobs") or []
        if isinstance(alt, dict) and isinstance(alt.get("logprob"), int | float)
    }


def _json_or_error(ref: EngineRef, reply: Reply) -> dict[str, Any]:
    try:
        payload = json.loads(reply.body)
    except ValueError:
        payload = None
    if 200 <= reply.status < 300 and isinstance(payload, dict):
        return payload
    text = reply.body[:500].decode("utf-8", "replace")
    message = _error_message(payload) or text or reply.reason
    if 200 <= reply.status < 300:
        raise EngineError(502, f"engine at {ref.public_url} sent a non-JSON answer", "bad_gateway")
    if reply.status < 500:
        kind = "authentication_error" if reply.status == 401 else "invalid_request_error"
        raise EngineError(reply.status, message, kind)
    raise EngineError(
        502, f"engine at {ref.public_url} failed ({reply.status}): {message}", "bad_gateway"
    )


def _error_message(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    error = payload.get("error", payload.get("message"))
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error) if error is not None else None
