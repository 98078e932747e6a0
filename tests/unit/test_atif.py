"""Reconciling captured calls with an ATIF trajectory."""

import json

from workbench.atif import CapturedCall, reconcile


def _step(step_id, source="agent", completion_tokens=None, ids=None, **extra):
    step = {"step_id": step_id, "timestamp": "2026-01-01T00:00:00Z", "source": source}
    step["message"] = "x"
    if source == "agent":
        metrics = {"prompt_tokens": 10}
        if completion_tokens is not None:
            metrics["completion_tokens"] = completion_tokens
        if ids is not None:
            metrics["completion_token_ids"] = ids
        step["metrics"] = metrics
    step.update(extra)
    return step


def _write(path, steps):
    path.write_text(
        json.dumps(
            {
                "schema_version": "ATIF-v1.8",
                "session_id": "s",
                "agent": {"name": "terminus-2", "version": "2"},
                "steps": steps,
            }
        )
    )


def _calls(*lengths):
    return [CapturedCall(index=i, completion_ids=tuple(range(n))) for i, n in enumerate(lengths)]


def test_no_trajectory_is_none(tmp_path):
    assert reconcile(tmp_path, _calls(3)).verdict == "none"


def test_counts_match_call_by_call(tmp_path):
    _write(
        tmp_path / "trajectory.json",
        [_step(1, "user"), _step(2, completion_tokens=3), _step(3, completion_tokens=5)],
    )
    report = reconcile(tmp_path, _calls(3, 5))
    assert (report.verdict, report.agent_steps, report.demoted) == ("match", 2, [])


def test_token_ids_are_compared_exactly_when_present(tmp_path):
    _write(tmp_path / "trajectory.json", [_step(2, completion_tokens=3, ids=[0, 1, 9])])
    report = reconcile(tmp_path, _calls(3))
    assert report.verdict == "MISMATCH" and "step 2" in report.detail


def test_first_difference_is_reported(tmp_path):
    _write(
        tmp_path / "trajectory.json", [_step(2, completion_tokens=3), _step(3, completion_tokens=4)]
    )
    report = reconcile(tmp_path, _calls(3, 5))
    assert report.verdict == "MISMATCH"
    assert "captured call 2" in report.detail and "5 completion tokens" in report.detail
    assert "step 3 (4 completion tokens)" in report.detail


def test_missing_captured_call_is_a_turn_count_mismatch(tmp_path):
    _write(
        tmp_path / "trajectory.json", [_step(2, completion_tokens=3), _step(3, completion_tokens=4)]
    )
    report = reconcile(tmp_path, _calls(3))
    assert report.verdict == "MISMATCH" and "2 agent calls" in report.detail


def test_subagent_calls_are_demoted(tmp_path):
    _write(
        tmp_path / "trajectory.json", [_step(2, completion_tokens=3), _step(3, completion_tokens=4)]
    )
    _write(tmp_path / "trajectory.summarization-1-summary.json", [_step(1, completion_tokens=7)])
    report = reconcile(tmp_path, _calls(3, 7, 4))
    assert (report.verdict, report.demoted, report.aux_steps) == ("match", [1], 1)


def test_copied_context_steps_are_not_calls(tmp_path):
    _write(
        tmp_path / "trajectory.json",
        [_step(1, completion_tokens=9, is_copied_context=True), _step(2, completion_tokens=3)],
    )
    assert reconcile(tmp_path, _calls(3)).verdict == "match"


def test_unreadable_trajectory_is_a_mismatch_not_a_crash(tmp_path):
    (tmp_path / "trajectory.json").write_text("{not json")
    report = reconcile(tmp_path, _calls(3))
    assert report.verdict == "MISMATCH" and "unreadable" in report.detail


def test_calls_after_the_last_step_of_an_interrupted_agent_are_tolerated(tmp_path):
    _write(tmp_path / "trajectory.json", [_step(2, completion_tokens=3)])
    assert reconcile(tmp_path, _calls(3, 8)).verdict == "MISMATCH"
    report = reconcile(tmp_path, _calls(3, 8), interrupted=True)
    assert report.verdict == "match" and "last 1 call(s)" in report.detail
    # ...but a difference before that point is still a mismatch.
    assert reconcile(tmp_path, _calls(4, 8), interrupted=True).verdict == "MISMATCH"


def test_a_trajectory_of_the_wrong_shape_is_a_mismatch_not_a_crash(tmp_path):
    # The harness (or the model, in the sandbox) writes this file: any JSON may arrive.
    _write(
        tmp_path / "trajectory.json", [{"source": "agent", "metrics": {"completion_token_ids": 5}}]
    )
    report = reconcile(tmp_path, _calls(3))
    assert report.verdict == "MISMATCH" and "unreadable" in report.detail
    _write(tmp_path / "trajectory.json", ["not a step"])
    assert reconcile(tmp_path, _calls(3)).verdict == "MISMATCH"
