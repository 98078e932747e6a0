"""Findings at ingest (check_turn) and over a whole rollout (check_rollout)."""

from capture.graph import RolloutGraph
from capture.turns import Turn
from capture.validate import Finding, check_rollout, check_turn

SYSTEM = list(range(1000, 1040))


def codes(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.level, f.code) for f in findings}


def test_a_clean_turn_has_no_findings():
    assert check_turn(Turn(SYSTEM, [1, 2], [-0.1, -0.2], content="hi"), "tokens") == []


def test_completion_ids_and_logprobs_of_different_lengths_are_fatal():
    findings = check_turn(Turn(SYSTEM, [1, 2], [-0.1]), "tokens", index=3)
    assert codes(findings) == {("FATAL", "logprobs_length_mismatch")}
    assert findings[0].turn == 3
    assert "2 completion ids but 1 logprobs" in findings[0].message


def test_missing_logprobs_at_tier_tokens_are_fatal_but_fine_at_tier_text():
    assert ("FATAL", "logprobs_length_mismatch") in codes(
        check_turn(Turn(SYSTEM, [1], None), "tokens")
    )
    assert check_turn(Turn(SYSTEM, [1], None), "logprobs") == []


def test_tier_tokens_without_ids_is_fatal():
    no_prompt = check_turn(Turn([], [1], [-0.1], content="x"), "tokens")
    assert ("FATAL", "token_ids_missing") in codes(no_prompt)
    no_completion = check_turn(Turn(SYSTEM, [], [], content="an answer"), "tokens")
    assert ("FATAL", "token_ids_missing") in codes(no_completion)
    assert "return_token_ids" in no_completion[0].message
    # Tier text never had ids: not a finding.
    assert check_turn(Turn([], [], None, content="x", tier="text"), "text") == []


def test_a_turn_that_sampled_nothing_is_a_warning():
    findings = check_turn(Turn(SYSTEM, [], [], finish_reason="length"), "tokens")
    assert codes(findings) == {("WARN", "empty_completion")}


def test_neutralised_sampling_knobs_are_info():
    turn = Turn(
        SYSTEM,
        [1],
        [-0.1],
        content="x",
        sampling_requested={"top_p": 0.9, "temperature": 0.7},
        sampling_applied={"top_p": 1.0, "temperature": 0.7},
    )
    (finding,) = check_turn(turn, "tokens")
    assert (finding.level, finding.code) == ("INFO", "sampling_neutralised")
    assert "top_p: 0.9 -> 1.0" in finding.message and "temperature" not in finding.message


def test_a_dropped_or_clamped_knob_is_reported():
    turn = Turn(
        SYSTEM,
        [1],
        [-0.1],
        content="x",
        sampling_requested={"top_k": 20, "max_tokens": 100_000},
        sampling_applied={"max_tokens": 8192},
    )
    (finding,) = check_turn(turn, "tokens")
    assert "max_tokens: 100000 -> 8192" in finding.message
    assert "top_k: 20 -> '(dropped)'" in finding.message


def test_no_model_calls_is_fatal():
    (finding,) = check_rollout(RolloutGraph(), agentic=True, tier="tokens")
    assert (finding.level, finding.code) == ("FATAL", "no_model_calls")
    assert "proxy" in finding.message


def test_one_call_of_an_agentic_harness_is_a_warning():
    g = RolloutGraph()
    g.add(Turn(SYSTEM, [1], [-0.1], has_tools=True))
    assert codes(check_rollout(g, agentic=True, tier="tokens")) == {("WARN", "single_call_agentic")}
    assert check_rollout(g, agentic=False, tier="tokens") == []


def test_drift_retries_and_late_continuations_are_reported_with_their_turn():
    g = RolloutGraph()
    sampled = list(range(500, 540))
    g.add(Turn(SYSTEM, sampled, [-0.1] * 40))  # 0
    g.add(Turn([*SYSTEM, *sampled[:3], 7], [1], [-0.1]))  # 1: drift against 0
    g.add(Turn(SYSTEM, [2], [-0.1]))  # 2: retry of 0 -> 0 discarded
    g.add(Turn([*SYSTEM, *sampled, 9], [3], [-0.1]))  # 3: continues discarded 0
    findings = check_rollout(g, agentic=True, tier="tokens")
    by_code = {f.code: f for f in findings}
    assert by_code["drift"].turn == 1 and by_code["drift"].level == "WARN"
    assert "position 43" in by_code["drift"].message
    assert by_code["continues_discarded"].turn == 3
    assert by_code["retries_discarded"].level == "INFO"
    assert "2 turn(s)" in by_code["retries_discarded"].message


def test_a_tool_call_without_completion_ids_is_fatal_at_tier_tokens():
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    findings = check_turn(Turn(SYSTEM, [], [], tool_calls=[call]), "tokens")
    assert codes(findings) == {("FATAL", "token_ids_missing")}


def test_ids_that_disagree_with_usage_are_fatal():
    turn = Turn(SYSTEM, [1, 2], [-0.1, -0.2], content="hi")
    turn.usage = {"prompt_tokens": len(SYSTEM), "completion_tokens": 3}
    findings = check_turn(turn, "tokens")
    assert codes(findings) == {("FATAL", "usage_mismatch")}
    assert "2 completion ids but counted 3" in findings[0].message
    turn.usage = {"prompt_tokens": len(SYSTEM), "completion_tokens": 2}
    assert check_turn(turn, "tokens") == []
