"""Sessions and their registry: ids, counters, listeners, threads and event loops."""

import asyncio
import threading

import numpy as np
import pytest

from capture.engines import EnginePool, EngineRef
from capture.sessions import SESSION_ID, SessionRegistry, read_session_key
from capture.turns import Turn

# Nothing listens on the discard port: the connection is refused at once.
UNREACHABLE = EngineRef(url="http://127.0.0.1:9")


def turn(prompt, completion):
    return Turn(
        prompt_ids=np.array(prompt),
        completion_ids=np.array(completion),
        completion_logprobs=np.full(len(completion), -0.5),
        tier="tokens",
    )


def run_in_threads(count, make_coroutine):
    """Run make_coroutine(i) on `count` threads, each with its own event loop."""
    results, errors = [None] * count, []

    def work(i):
        try:
            results[i] = asyncio.run(make_coroutine(i))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


async def test_session_ids_are_unguessable_valid_tokens():
    registry = SessionRegistry()
    ids = {(await registry.create(UNREACHABLE)).id for _ in range(50)}
    assert len(ids) == 50
    assert all(SESSION_ID.match(i) and len(i) >= 32 for i in ids)


async def test_unreachable_engine_gives_tier_text_with_a_reason():
    session = await SessionRegistry().create(UNREACHABLE)
    assert session.tier == "text"
    assert "unreachable" in session.engine.tier_reason
    assert "127.0.0.1:9" in session.engine.tier_reason


async def test_counters_follow_ingest_and_phase():
    registry = SessionRegistry()
    session = await registry.create(UNREACHABLE, labels={"task": "t1"})
    fresh = registry.counters(session.id)
    assert fresh.turns == 0 and fresh.seconds_since_last_call is None
    assert fresh.phase == "queued" and fresh.labels == {"task": "t1"}
    session.touch()
    session.ingest(turn([1, 2, 3], [4, 5]))
    session.ingest(turn([1, 2, 3, 4, 5, 6], [7]))
    registry.set_phase(session.id, "agent")
    counters = registry.counters(session.id)
    assert (counters.turns, counters.roots, counters.phase) == (2, 1, "agent")
    assert counters.prompt_tokens == 9 and counters.completion_tokens == 3
    assert counters.seconds_since_last_call is not None


async def test_listeners_run_after_ingest_and_a_failing_one_is_recorded():
    session = await SessionRegistry().create(UNREACHABLE)
    seen = []
    session.add_listener(lambda s, index, t: seen.append((s.id, index, len(s.graph))))

    def broken(s, index, t):
        raise RuntimeError("disk full")

    session.add_listener(broken)
    assert session.ingest(turn([1, 2], [3])) == 0
    assert seen == [(session.id, 0, 1)]  # the turn was in the graph when the listener ran
    assert session.errors == 1 and "disk full" in session.last_error


async def test_delete_forgets_the_session():
    registry = SessionRegistry()
    session = await registry.create(UNREACHABLE)
    assert registry.delete(session.id) is True
    assert registry.get(session.id) is None and registry.delete(session.id) is False
    with pytest.raises(KeyError):
        registry.counters(session.id)


def test_session_key_is_read_in_wire_order():
    assert read_session_key({"authorization": "Bearer abc"}, {}) == "abc"
    assert read_session_key({"x-api-key": "k1"}, {}) == "k1"
    assert read_session_key({"x-goog-api-key": "g1"}, {"key": "q1"}) == "q1"
    assert read_session_key({"x-session-id": "s1", "authorization": "Bearer b"}, {}) == "s1"
    assert read_session_key({"authorization": "Basic abc"}, {}) is None
    assert read_session_key({}, {}) is None


def test_lock_works_across_event_loops():
    """Sessions created and fed from four threads, each on its own loop, lose nothing."""
    registry = SessionRegistry()

    async def create_and_ingest(i):
        sessions = [await registry.create(UNREACHABLE) for _ in range(8)]
        for n, session in enumerate(sessions):
            for k in range(5):
                session.ingest(turn([i, n, k], [k]))
                await asyncio.sleep(0)
        return [s.id for s in sessions]

    ids = [sid for batch in run_in_threads(4, create_and_ingest) for sid in batch]
    assert len(set(ids)) == len(registry) == 32
    assert all(registry.counters(sid).turns == 5 for sid in ids)


def test_engine_connections_are_per_event_loop():
    """asyncio streams bind to the loop that opened them: loops never share connections."""
    pool = EnginePool()

    async def upstream(_):
        first = pool.upstream(UNREACHABLE)
        assert pool.upstream(UNREACHABLE) is first  # pooled within the loop
        await pool.aclose()
        return first

    upstreams = run_in_threads(3, upstream)
    assert len({id(u) for u in upstreams}) == 3


def test_probe_of_one_engine_is_shared_by_concurrent_loops():
    pool = EnginePool()

    async def handle(_):
        return (await pool.get(UNREACHABLE)).tier

    assert run_in_threads(4, handle) == ["text"] * 4


async def test_with_graph_holds_the_lock_so_an_ingest_waits_for_the_reader():
    # The rollout reads the graph while a straggling call may still be ingested: a reader must
    # never see (or edit) a graph halfway through an add.
    session = await SessionRegistry().create(UNREACHABLE)
    ingested = threading.Event()

    def ingest():
        session.ingest(turn([1, 2], [3]))
        ingested.set()

    def read(graph):
        writer = threading.Thread(target=ingest)
        writer.start()
        blocked = not ingested.wait(0.2)
        return blocked, len(graph), writer

    blocked, seen, writer = session.with_graph(read)
    writer.join(timeout=10)
    assert blocked and seen == 0
    assert ingested.is_set() and session.counters().turns == 1
