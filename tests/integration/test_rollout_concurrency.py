"""Eight rollouts at once, each on its own thread and event loop, all complete; the history
survives a restart of the store."""

import time

import pytest

from tests.fixtures.rollouts import (
    FIXTURE_TASKS,
    leftover_processes,
    make_service,
    needs_local_sandbox,
)
from workbench.datasets import resolve_dataset
from workbench.rollout import RolloutRequest
from workbench.store import Store

pytestmark = [pytest.mark.slow, needs_local_sandbox]


def test_eight_rollouts_on_several_loops_all_complete(tmp_path):
    service = make_service(tmp_path, max_rollouts=8, max_sandbox_creates=3)
    try:
        tasks = resolve_dataset("demo").tasks
        engine = service.start_embedded_engine()
        run_ids = [
            service.submit(
                RolloutRequest(
                    dataset="demo",
                    task=tasks[k % len(tasks)].name,
                    harness="terminus-2",
                    sandbox="local",
                    engine=engine,
                    timeout_s=240,
                    group="g8",
                )
            )
            for k in range(8)
        ]
        results = [service.wait(run_id, timeout=300) for run_id in run_ids]
        assert all(r is not None for r in results)
        failures = [(r.id, r.error) for r in results if not r.ok]
        assert failures == []
        assert all(r.reward == 1.0 and r.turns >= 2 for r in results)
        assert [r.id for r in results] == run_ids  # submit ids are the rollout ids
        assert service.sandbox_slots.in_use == 0 and service.rollout_slots.in_use == 0
        for r in results:
            assert leftover_processes(r.trial_dir.rsplit("/", 1)[-1]) == []
    finally:
        service.close()

    reopened = Store(tmp_path)
    rows = {row.id: row for row in reopened.list_rollouts()}
    assert set(run_ids) <= set(rows)
    for run_id in run_ids:
        assert rows[run_id].ok and rows[run_id].reward == 1.0
        doc = reopened.get_document(run_id)
        assert doc["ids"]["rollout"] == run_id and doc["reward"] == 1.0
        assert doc["ids"]["group"] == "g8"
        turns_log = reopened.documents_dir / f"{run_id}.turns.jsonl"
        assert len(turns_log.read_text().splitlines()) == rows[run_id].turns
    assert time.time() - min(r.created_at for r in rows.values()) < 600


def test_cancelling_a_queued_rollout_ends_it_without_waiting_for_a_slot(tmp_path):
    service = make_service(tmp_path, max_rollouts=1)
    try:
        engine = service.start_embedded_engine()

        def sleeper() -> RolloutRequest:
            return RolloutRequest(
                dataset=str(FIXTURE_TASKS),
                task="sleeper",
                harness="terminus-2",
                sandbox="local",
                engine=engine,
                timeout_s=120,
            )

        first, second = service.submit(sleeper()), service.submit(sleeper())
        deadline = time.monotonic() + 60
        # Either may win the one slot (their threads race): find the one that did.
        while "agent" not in (service.status(first).phase, service.status(second).phase):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        running, queued = (
            (first, second) if service.status(first).phase == "agent" else (second, first)
        )
        assert service.status(queued).phase == "queued"
        started = time.monotonic()
        assert service.cancel(queued)
        result = service.wait(queued, timeout=30)
        assert result is not None and result.error.kind == "cancelled"
        assert time.monotonic() - started < 20  # did not wait for the running one
        assert result.trial_dir is None and result.reward is None
        assert service.status(running).state == "running"
        assert service.cancel(running)
        assert service.wait(running, timeout=60).error.kind == "cancelled"
        assert service.rollout_slots.in_use == 0
    finally:
        service.close()
