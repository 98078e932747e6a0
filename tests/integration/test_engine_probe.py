"""The engine probe over real HTTP: a probe is not trusted forever (an engine restarted with other
flags on the same URL must not keep its old tier), and the engine's version is recorded."""

from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import httpx

from capture.document import validate_document
from capture.engines import EnginePool, EngineRef
from capture.serving import ThreadedServer
from capture.sessions import SessionRegistry
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.server import VERSION, create_engine_app


@asynccontextmanager
async def restarted_in_raw_mode(first_tier: Callable[[EngineRef], Awaitable[str]]):
    """A processed-mode engine whose first probe gives `tokens`, then stopped and restarted in raw
    mode on the same port: what a vLLM restarted with other flags looks like to the pool."""
    first = EngineServer(EngineConfig()).start()
    port = first.port
    ref = EngineRef(url=first.url)
    try:
        assert await first_tier(ref) == "tokens"
    finally:
        first.stop()
    with EngineServer(EngineConfig(logprobs_mode="raw_logprobs"), port=port):
        yield ref


async def test_engine_restarted_in_raw_mode_is_not_labelled_trainable():
    pool = EnginePool(probe_ttl_s=3600.0)

    async def tier(ref: EngineRef) -> str:
        return (await pool.get(ref)).tier

    async with restarted_in_raw_mode(tier) as ref:
        assert await tier(ref) == "tokens"  # within the TTL: the cached probe
        refreshed = await pool.get(ref, refresh=True)
        assert (refreshed.tier, refreshed.logprobs_mode) == ("logprobs", "raw_logprobs")
        assert await tier(ref) == "logprobs"  # the fresh probe replaced the old one


async def test_new_rollout_session_sees_an_engine_restarted_in_raw_mode():
    # What each rollout does: SessionRegistry.create(..., refresh_probe=True).
    registry = SessionRegistry(EnginePool(probe_ttl_s=3600.0))

    async def tier(ref: EngineRef) -> str:
        return (await registry.create(ref)).tier

    async with restarted_in_raw_mode(tier) as ref:
        session = await registry.create(ref, refresh_probe=True)
    assert session.tier == "logprobs"
    assert "processed_logprobs" in (session.engine.tier_reason or "")


async def test_expired_probe_is_probed_again():
    pool = EnginePool(probe_ttl_s=0.0)

    async def tier(ref: EngineRef) -> str:
        return (await pool.get(ref)).tier

    async with restarted_in_raw_mode(tier) as ref:
        assert await tier(ref) == "logprobs"


def test_engine_version_is_recorded_in_session_and_document(stack):
    created = httpx.post(f"{stack.url}/sessions", json={"engine": {"url": stack.engine.url}})
    assert created.status_code == 201, created.text
    assert created.json()["engine"]["version"] == VERSION
    session_id = created.json()["session_id"]
    counters = httpx.get(f"{stack.url}/sessions/{session_id}").json()
    assert counters["engine_version"] == VERSION
    document = httpx.get(f"{stack.url}/sessions/{session_id}/document").json()
    assert validate_document(document) == []
    assert document["engine"]["version"] == VERSION


async def test_engine_without_version_route_has_no_version():
    # A bare OpenAI-compatible server (no /version): probed as usual, version None.
    app = create_engine_app(EngineConfig())
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/version"]
    with ThreadedServer(app, "127.0.0.1", 0, lifespan="off", name="no-version engine") as server:
        handle = await EnginePool().get(EngineRef(url=server.url))
    assert (handle.tier, handle.version) == ("tokens", None)
