"""The live and result panels: the run's states in words, the outcome from the document."""

from types import SimpleNamespace

from workbench.ui.panels import activity_message, live_html, result_html


def counters(turns=0, since=None):
    return SimpleNamespace(
        turns=turns,
        roots=1 if turns else 0,
        prompt_tokens=10 * turns,
        completion_tokens=3 * turns,
        errors=0,
        last_error=None,
        seconds_since_last_call=since,
    )


def test_no_session_activity_and_zero_turns_are_different_states():
    assert activity_message("booting", None) == "sandbox booting — no model call yet"
    assert activity_message("agent", None) == "sandbox booting — no model call yet"
    assert activity_message("agent", counters(0)) == "agent running but has not called the model"
    assert activity_message("agent", counters(3, since=2.4)) == (
        "agent running · last model call 2 s ago"
    )
    assert activity_message("verifying", counters(3)) == "verifier running"


def test_live_panel_shows_phase_and_counters():
    out = live_html("agent", counters(4, since=1.0), 12.0)
    assert 'data-phase="agent"' in out
    assert '<span class="wb-step wb-step-now">agent</span>' in out
    assert '<span class="wb-step wb-step-done">booting</span>' in out
    assert 'data-testid="live-turns">4<' in out and 'data-testid="live-prompt">40<' in out


def test_result_of_an_ok_rollout_shows_reward_rewards_tier_and_atif():
    doc = {
        "ids": {"rollout": "r-9"},
        "ok": True,
        "error": None,
        "reward": 1.0,
        "rewards": {"reward": 1.0},
        "engine": {"tier": "tokens"},
        "atif": {"verdict": "match"},
        "task": {"name": "hello"},
        "harness": {"name": "terminus-2"},
        "findings": [{"level": "INFO", "code": "sampling_neutralised", "message": "m", "turn": 0}],
    }
    out = result_html(doc)
    assert 'data-testid="result-status">ok<' in out
    assert 'data-testid="result-reward">1<' in out
    assert "{&quot;reward&quot;: 1.0}" in out and "tokens" in out and "match" in out
    assert "sampling_neutralised" in out and "r-9" in out


def test_result_of_a_failed_rollout_shows_the_error_kind_and_never_a_zero_reward():
    doc = {"ok": False, "error": {"kind": "no_model_calls", "message": "no <call>"}, "reward": None}
    out = result_html(doc)
    assert 'data-testid="result-status">no_model_calls<' in out
    assert "no &lt;call&gt;" in out
    assert 'data-testid="result-reward">not graded<' in out
