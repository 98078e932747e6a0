"""terminus-2 in each dialect it speaks, against the scripted reference engine, in the local
sandbox: a real Harbor trial that ends in a real reward with every model call captured."""

from pathlib import Path

import pytest

from capture.document import validate_document
from capture.types import Dialect
from tests.fixtures.rollouts import leftover_processes, needs_local_sandbox
from workbench.datasets import resolve_dataset
from workbench.engine.server import VERSION
from workbench.rollout import RolloutRequest

pytestmark = [pytest.mark.slow, needs_local_sandbox]


# responses: terminus-2's LiteLLM chains calls with `previous_response_id` and sends only the new
# prompt (harbor/llms/chat.py:93); the proxy serves it from its memory of its own answers.
@pytest.mark.parametrize("dialect", ["chat", "responses", "anthropic"])
async def test_terminus_2_solves_a_demo_task_in_each_dialect(service, dialect: Dialect):
    engine = service.start_embedded_engine()
    request = RolloutRequest(
        dataset="demo",
        task=resolve_dataset("demo").tasks[0].name,
        harness="terminus-2",
        sandbox="local",
        engine=engine,
        dialect=dialect,
        timeout_s=120,
    )
    phases: list[str] = []
    result = await service.run(request, phases.append)

    assert result.error is None, result.error
    assert (result.ok, result.reward, result.tier) == (True, 1.0, "tokens")
    assert result.turns >= 2
    doc = result.document
    assert validate_document(doc) == []
    assert doc["harness"]["dialect"] == dialect
    # Harbor's, the agent's and the engine's versions are on record (DESIGN.md §1).
    assert doc["engine"]["version"] == VERSION and doc["versions"]["harbor"]
    agent_turns = [t for t in doc["turns"] if t["role"] == "agent" and not t["discarded"]]
    assert len(agent_turns) >= 2
    assert len({t["root"] for t in agent_turns}) == 1  # one conversation, not fragments
    assert all(t["prompt_token_ids"] and t["completion_token_ids"] for t in agent_turns)
    assert result.atif is not None and result.atif.verdict == "match", result.atif
    assert doc["atif"]["verdict"] == "match"
    assert doc["reward_provenance"] in ("verifier/reward.txt", "verifier/reward.json")
    assert phases[:1] == ["booting"] and "agent" in phases and "verifying" in phases
    assert phases[-1] == "done"
    # Stored, and no sandbox process outlived the trial.
    assert service.store.get(result.id).reward == 1.0
    trial_name = result.trial_dir.rsplit("/", 1)[-1]
    assert leftover_processes(trial_name) == []
    # The session id (the harness's API key) never lands in the trial dir.
    for path in Path(result.trial_dir).rglob("*"):
        if path.is_file():
            assert result.session_id not in path.read_text(errors="replace"), path
