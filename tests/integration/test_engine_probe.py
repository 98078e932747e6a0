"""The engine probe over real HTTP: a probe is not trusted forever (an engine restarted with other
flags on the same URL must not keep its old tier)."""

from capture.engines import EnginePool, EngineRef
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer


async def test_engine_restarted_in_raw_mode_is_not_labelled_trainable():
    pool = EnginePool(probe_ttl_s=3600.0)
    first = EngineServer(EngineConfig()).start()
    port = first.port
    ref = EngineRef(url=first.url)
    try:
        assert (await pool.get(ref)).tier == "tokens"
    finally:
        first.stop()
    with EngineServer(EngineConfig(logprobs_mode="raw_logprobs"), port=port):
        assert (await pool.get(ref)).tier == "tokens"  # within the TTL: the cached probe
        refreshed = await pool.get(ref, refresh=True)
        assert (refreshed.tier, refreshed.logprobs_mode) == ("logprobs", "raw_logprobs")
        assert (await pool.get(ref)).tier == "logprobs"  # the fresh probe replaced the old one


async def test_expired_probe_is_probed_again():
    pool = EnginePool(probe_ttl_s=0.0)
    first = EngineServer(EngineConfig()).start()
    port = first.port
    ref = EngineRef(url=first.url)
    try:
        assert (await pool.get(ref)).tier == "tokens"
    finally:
        first.stop()
    with EngineServer(EngineConfig(logprobs_mode="raw_logprobs"), port=port):
        assert (await pool.get(ref)).tier == "logprobs"
