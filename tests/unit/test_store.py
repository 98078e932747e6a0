"""The rollout store: index, documents, live turn log, restarts, threads."""

import json
import threading

import numpy as np

from capture.engines import EngineRef
from capture.sessions import SessionRegistry
from capture.turns import Turn
from workbench.store import RolloutRow, Store

# Nothing listens on the discard port: the session is created at tier text at once.
UNREACHABLE = EngineRef(url="http://127.0.0.1:9")


def _row(i, **kw):
    base = dict(
        id=f"r{i}",
        created_at=1000.0 + i,
        dataset="demo",
        task="hello",
        harness="terminus-2",
        sandbox="local",
        engine="http://127.0.0.1:1",
        tier="tokens",
        ok=True,
        reward=1.0,
        turns=2,
        tokens=40,
    )
    base.update(kw)
    return RolloutRow(**base)


def test_saved_rollouts_survive_a_restart(tmp_path):
    store = Store(tmp_path)
    path = store.save(_row(1), {"schema": "x", "n": 1})
    store.save(_row(2, ok=False, error_kind="timeout", reward=None), {"n": 2})
    store.close()

    reopened = Store(tmp_path)
    rows = reopened.list_rollouts()
    assert [r.id for r in rows] == ["r2", "r1"]  # newest first
    assert rows[0].reward is None and rows[0].error_kind == "timeout" and rows[0].ok is False
    assert reopened.get("r1").document_path == str(path)
    assert reopened.get_document("r1") == {"schema": "x", "n": 1}
    assert reopened.get("nope") is None and reopened.get_document("nope") is None


def test_writes_from_many_threads_all_land(tmp_path):
    store = Store(tmp_path)

    def work(k):
        for j in range(10):
            store.save(_row(k * 100 + j), {"k": k, "j": j})
            store.list_rollouts(limit=5)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count() == 60
    assert store.db_path.exists()
    journal = store._connect().execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "wal"


async def test_turn_log_appends_each_turn_with_the_graphs_prompt_deltas(tmp_path):
    store = Store(tmp_path)
    log = store.turn_log("r9")
    session = await SessionRegistry().create(UNREACHABLE)
    session.add_listener(log)
    first = Turn(prompt_ids=[1, 2, 3], completion_ids=[4, 5], completion_logprobs=[-0.5, -0.25])
    second = Turn(prompt_ids=[1, 2, 3, 4, 5, 6, 7], completion_ids=[8], completion_logprobs=[-1.0])
    # A branch off the first turn (not the last one): still a delta, against its real parent.
    branch = Turn(prompt_ids=[1, 2, 3, 4, 5, 9], completion_ids=[1], completion_logprobs=[-2.0])
    other = Turn(prompt_ids=[9, 9], completion_ids=[1], completion_logprobs=None, tier="text")
    for turn in (first, second, branch, other):
        session.ingest(turn)
    lines = [json.loads(x) for x in log.path.read_text().splitlines()]
    # The session id is the live rollout's API key and this file is served to the UI.
    assert session.id not in log.path.read_text()
    assert lines[0]["prompt_ids"] == [1, 2, 3] and lines[0]["logprobs"] == [-0.5, -0.25]
    assert lines[1]["prompt_from"] == 0 and lines[1]["prompt_delta"] == [6, 7]
    assert lines[2]["prompt_from"] == 0 and lines[2]["prompt_delta"] == [9]
    assert lines[3]["prompt_ids"] == [9, 9] and lines[3]["logprobs"] is None
    # Reconstruct turn 1's prompt from the log alone.
    rebuilt = lines[0]["prompt_ids"] + lines[0]["completion_ids"] + lines[1]["prompt_delta"]
    assert np.array_equal(rebuilt, second.prompt_ids)
