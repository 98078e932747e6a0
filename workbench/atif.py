"""Reconcile the capture with the harness's own ATIF trajectory (`agent/trajectory.json`).

Two independent records of the same rollout: the proxy saw every model call; the harness wrote
one ATIF step per call it made for the agent. Walking both in order tells whether they agree
(turn count, completion tokens per call) and which captured calls the harness made for a
sub-agent (e.g. terminus-2's summarisation), so the graph can demote those to `aux`.

The files are read as plain JSON, not through Harbor's models, so an ATIF version with extra
fields still reconciles.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

Verdict = Literal["match", "MISMATCH", "none"]

MAIN_FILE = "trajectory.json"
CONTINUATION_GLOB = "trajectory.cont-*.json"  # the same agent after a context handoff
SUBAGENT_GLOB = "trajectory.summarization-*.json"  # calls made for a sub-agent


@dataclass(frozen=True)
class CapturedCall:
    """One non-discarded captured turn, in arrival order."""

    index: int  # graph node index
    completion_ids: tuple[int, ...]


@dataclass(frozen=True)
class ExpectedCall:
    """One model call as the trajectory records it."""

    step_id: int | str
    completion_tokens: int | None
    completion_ids: tuple[int, ...] | None

    def fits(self, call: CapturedCall) -> bool:
        if self.completion_ids is not None:
            return self.completion_ids == call.completion_ids
        if self.completion_tokens is not None:
            return self.completion_tokens == len(call.completion_ids)
        return True

    def describe(self) -> str:
        n = len(self.completion_ids) if self.completion_ids is not None else self.completion_tokens
        return f"step {self.step_id} ({'?' if n is None else n} completion tokens)"


class AtifReport(BaseModel):
    """The verdict stored in the rollout document."""

    verdict: Verdict
    detail: str | None = None
    agent_steps: int = 0
    aux_steps: int = 0
    demoted: list[int] = []  # graph node indices the trajectory shows as sub-agent calls


def reconcile(
    agent_dir: Path, calls: list[CapturedCall], *, interrupted: bool = False
) -> AtifReport:
    """Compare the trajectory in `agent_dir` with the captured calls (see module docstring).
    `interrupted`: the agent was stopped (deadline, cancel), so calls after the trajectory's
    last step may be missing from it; they are tolerated and counted in the detail."""
    main_path = agent_dir / MAIN_FILE
    if not main_path.is_file():
        return AtifReport(verdict="none", detail="the harness wrote no agent/trajectory.json")
    try:
        main = _load(main_path)
        for path in sorted(agent_dir.glob(CONTINUATION_GLOB)):
            main += _load(path)
        aux = [call for path in sorted(agent_dir.glob(SUBAGENT_GLOB)) for call in _load(path)]
    except (OSError, ValueError, TypeError, AttributeError, LookupError) as exc:
        # The harness (or, in the sandbox, the model) writes this file: any shape may arrive.
        return AtifReport(verdict="MISMATCH", detail=f"unreadable trajectory: {exc!r}")
    return _walk(main, aux, calls, interrupted)


def _walk(
    main: list[ExpectedCall],
    aux: list[ExpectedCall],
    calls: list[CapturedCall],
    interrupted: bool,
) -> AtifReport:
    report = AtifReport(verdict="match", agent_steps=len(main), aux_steps=len(aux))
    unused_aux = list(aux)
    position = 0
    for number, call in enumerate(calls, start=1):
        if position < len(main) and main[position].fits(call):
            position += 1
            continue
        helper = next((a for a in unused_aux if a.fits(call)), None)
        if helper is not None:
            unused_aux.remove(helper)
            report.demoted.append(call.index)
            continue
        if interrupted and position == len(main):
            unrecorded = len(calls) - number + 1
            report.detail = f"the agent was interrupted: its last {unrecorded} call(s) unrecorded"
            return report
        expected = main[position].describe() if position < len(main) else "no further step"
        report.verdict = "MISMATCH"
        report.detail = (
            f"captured call {number} (turn {call.index}, {len(call.completion_ids)} completion "
            f"tokens) does not match the trajectory's next agent step: {expected}"
        )
        return report
    if position < len(main):
        report.verdict = "MISMATCH"
        report.detail = (
            f"the trajectory has {len(main)} agent calls, the capture only {position} of them; "
            f"first missing: {main[position].describe()}"
        )
    elif unused_aux:
        report.verdict = "MISMATCH"
        report.detail = f"sub-agent {unused_aux[0].describe()} was never captured"
    return report


def _load(path: Path) -> list[ExpectedCall]:
    """The model calls of one trajectory file: its agent steps (copied context excluded)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ValueError(f"{path.name} has no steps list")
    expected: list[ExpectedCall] = []
    for step in data["steps"]:
        if step.get("source") != "agent" or step.get("is_copied_context"):
            continue
        expected.extend(_calls_of(step))
    return expected


def _calls_of(step: dict[str, Any]) -> list[ExpectedCall]:
    count = step.get("llm_call_count")
    step_id = step.get("step_id", "?")
    if count == 0:
        return []  # an agent step that made no model call (e.g. a replayed action)
    if count is not None and count > 1:
        # Several calls folded into one step: per-call tokens are unknown, count still checks.
        return [ExpectedCall(step_id, None, None) for _ in range(count)]
    metrics = step.get("metrics") or {}
    ids = metrics.get("completion_token_ids")
    return [
        ExpectedCall(
            step_id=step_id,
            completion_tokens=metrics.get("completion_tokens"),
            completion_ids=tuple(ids) if ids is not None else None,
        )
    ]
