"""Engine references and the tier judgement of the probe (the live probe runs in integration)."""

import pytest
from pydantic import ValidationError

from capture.engines import EngineRef, judge_probe


def reply(alternatives, *, ids=True, sampled=None):
    """A one-token vLLM reply whose first position offers `alternatives` (token -> logprob)."""
    top = [{"token": t, "logprob": lp} for t, lp in alternatives.items()]
    entry = {"token": sampled or top[0]["token"], "logprob": top[0]["logprob"], "top_logprobs": top}
    choice = {"logprobs": {"content": [entry]}, "token_ids": [7] if ids else None}
    return {"choices": [choice], "prompt_token_ids": [1, 2, 3] if ids else None}


def test_processed_logprobs_follow_the_temperature():
    cold = reply({"a": -0.31, "b": -1.31})
    hot = reply({"a": -0.47, "b": -0.97})  # gap 1.0 at T=1, 0.5 at T=2
    assert judge_probe(cold, hot) == ("tokens", None, "processed_logprobs")


def test_raw_logprobs_do_not_move_and_cost_the_tokens_tier():
    same = reply({"a": -0.31, "b": -1.31})
    tier, reason, mode = judge_probe(same, same)
    assert (tier, mode) == ("logprobs", "raw_logprobs")
    assert "--logprobs-mode processed_logprobs" in reason


def test_sampled_token_listed_first_does_not_fool_the_probe():
    # Engine order puts the sampled token first (WIRE.md §2.1): here a non-argmax one at T=2.
    cold = reply({"a": -0.31, "b": -1.31})
    hot = reply({"c": -3.2, "a": -0.47}, sampled="c")
    assert judge_probe(cold, hot)[2] == "processed_logprobs"


def test_missing_token_ids_cost_the_tokens_tier():
    tier, reason, _ = judge_probe(
        reply({"a": -0.3, "b": -1.3}, ids=False), reply({"a": -0.4, "b": -0.9}, ids=False)
    )
    assert tier == "logprobs" and "token ids" in reason


def test_no_logprobs_means_tier_text():
    bare = {"choices": [{"message": {"content": "hi"}}]}
    tier, reason, mode = judge_probe(bare, bare)
    assert (tier, mode) == ("text", "unknown") and "no logprobs" in reason


def test_engine_ref_normalises_the_url_and_hides_credentials():
    ref = EngineRef(url="http://user:pw@host:8000/v1/", model="m", api_key="k")
    assert ref.url == "http://user:pw@host:8000"
    assert ref.public_url == "http://host:8000"
    assert "api_key" not in repr(ref)


def test_engine_ref_rejects_a_url_without_scheme():
    with pytest.raises(ValidationError):
        EngineRef(url="localhost:8000")
